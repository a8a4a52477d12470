#!/usr/bin/env bash
# A/B of quench_bench binaries on the same GPU in one call: every case runs on every binary in
# turn, for several rounds, so that clock drift and run order hit all of them alike (the H200's
# sustained-load clock moves figures by 2-5% over a minute; see bench/LOG.md). Prints one line
# per case with each binary's result per round, and keeps every JSON line.
#
#   tools/bench_ab.sh --bench NAME --case SUBSTRING [--case SUBSTRING ...] [--rounds N]
#                     [--metric METRIC] BIN [BIN ...]
#
# --bench NAME     the benchmark (quench_bench --filter), e.g. prefill, decode, rope_quant_append
# --case S         a case substring (quench_bench --case); repeatable, run in the order given
# --rounds N       rounds over all binaries (default 2)
# --metric M       the metric printed (default: TFLOP/s for prefill, TB/s otherwise)
# BIN              quench_bench binaries (a path each; the label is the file name)
# Environment: OUT (default /tmp/quench_bench_ab): ab.jsonl gets every result line, each with
# "bin" and "round" added; QUENCH_COMMIT, QUENCH_DATE (recorded in every result, as
# tools/gpu_check.sh does).
set -uo pipefail

bench=""
cases=()
rounds=2
metric=""
bins=()
while [ $# -gt 0 ]; do
  case "$1" in
    --bench) bench=${2:-}; shift 2 ;;
    --case) cases+=("${2:-}"); shift 2 ;;
    --rounds) rounds=${2:-}; shift 2 ;;
    --metric) metric=${2:-}; shift 2 ;;
    --*) echo "bench_ab: unknown option '$1'; allowed: --bench --case --rounds --metric" >&2; exit 2 ;;
    *) bins+=("$1"); shift ;;
  esac
done
if [ -z "$bench" ]; then echo "bench_ab: --bench NAME is required" >&2; exit 2; fi
if [ ${#cases[@]} -eq 0 ]; then echo "bench_ab: at least one --case SUBSTRING is required" >&2; exit 2; fi
if ! [[ "$rounds" =~ ^[1-9][0-9]*$ ]]; then
  echo "bench_ab: --rounds '$rounds' is not valid; allowed: an integer >= 1" >&2; exit 2
fi
if [ ${#bins[@]} -eq 0 ]; then echo "bench_ab: at least one quench_bench binary is required" >&2; exit 2; fi
for b in "${bins[@]}"; do
  if [ ! -x "$b" ]; then echo "bench_ab: '$b' is not an executable file" >&2; exit 2; fi
done
if [ -z "$metric" ]; then
  if [ "$bench" = prefill ]; then metric="TFLOP/s"; else metric="TB/s"; fi
fi

record=()
[ -n "${QUENCH_COMMIT:-}" ] && record+=(--commit "$QUENCH_COMMIT")
[ -n "${QUENCH_DATE:-}" ] && record+=(--date "$QUENCH_DATE")
out=${OUT:-/tmp/quench_bench_ab}
mkdir -p "$out"
: > "$out/ab.jsonl"
for ((r = 1; r <= rounds; ++r)); do
  for c in "${cases[@]}"; do
    for b in "${bins[@]}"; do
      label=$(basename "$b")
      rm -f "$out/one.jsonl"
      if ! "$b" --filter "$bench" --case "$c" --jsonl "$out/one.jsonl" "${record[@]}" \
        > "$out/one.log" 2>&1; then
        echo "bench_ab: $label failed on case '$c' (round $r); its output:" >&2
        tail -5 "$out/one.log" >&2
        continue
      fi
      [ -f "$out/one.jsonl" ] || continue
      python3 - "$out/one.jsonl" "$label" "$r" >> "$out/ab.jsonl" <<'PY'
import json, sys
path, label, rnd = sys.argv[1], sys.argv[2], int(sys.argv[3])
for line in open(path):
    record = json.loads(line)
    record["bin"] = label
    record["round"] = rnd
    print(json.dumps(record))
PY
    done
  done
done

# Each value is followed by the mean SM clock it ran at (@MHz) where the benchmark measured it
# (support/gpu_clock_watch.h): under the power limit two rounds of one binary can differ by
# their clocks alone.
python3 - "$out/ab.jsonl" "$metric" <<'PY'
import collections, json, re, sys
path, metric = sys.argv[1], sys.argv[2]
rows = collections.OrderedDict()
for line in open(path):
    record = json.loads(line)
    if record.get("metric") != metric:
        continue
    clock = re.search(r"sm_mhz=(\d+)", record.get("note", ""))
    cell = f"{record['value']:.1f}" + (f"@{clock.group(1)}" if clock else "")
    rows.setdefault(record["case"], collections.OrderedDict()).setdefault(
        record["bin"], []).append(cell)
if not rows:
    print(f"bench_ab: no '{metric}' results (see {path})")
for case, by_bin in rows.items():
    cells = "  ".join(f"{b} " + " / ".join(values) for b, values in by_bin.items())
    print(f"{case}: {cells}")
PY
