#!/usr/bin/env bash
# Runs named sections of GPU work in one device call, from a kit that tools/engine_gpu_kit.sh
# packed here (the binaries built for sm_90a), and picks the sections by the card that came: the
# device tool may hand an H100 to a call that asked for the H200, and the issues' figures are
# H200 figures, so a call lists what is worth running on each.
#
#   H200_SECTIONS="rec:decode:150 qkab" OTHER_SECTIONS="tests:*Decode*:120" \
#     OUT=$OUT bash tools/device_sections.sh [KIT_DIR]        # KIT_DIR default .gpu_bin/engine
#
# Sections:
#   rec:NAME:SECONDS     tools/gpu_check.sh --no-tests --bench NAME (the benchmark beside its
#                        ceiling and its PyTorch peer: the issues' figures of record), under a
#                        timeout of SECONDS; results in $OUT/rec_NAME/
#   tests:FILTER:SECONDS quench_gpu_tests --gtest_filter=FILTER under a timeout of SECONDS
#   qkab                 decode with QUENCH_DECODE_QK=mma (the default) against wgmma, FP8 page
#                        16, bf16 out, two rounds (tools/bench_ab.sh); results in $OUT/qkab/
# Environment: OUT (default /tmp/quench_device), QUENCH_COMMIT (recorded in every result).
# The device tool brings back at most 8 files from $OUT, and three `rec` sections write more than
# that (a call lost its bench.jsonl to the count): every section writes into a scratch folder, and
# at the end $OUT gets that folder as one sections.tgz beside this script's own output,
# sections.log (unpack here with `tar -xzf FILES_AT/sections.tgz -C SOMEWHERE`).
set -uo pipefail
cd "$(dirname "$0")/.."
kit=${1:-.gpu_bin/engine}
final_out=${OUT:-/tmp/quench_device}
mkdir -p "$final_out"
out=$(mktemp -d)
exec > >(tee "$final_out/sections.log") 2>&1
pack_results() {
  tar -C "$out" -czf "$final_out/sections.tgz" .
  echo "device_sections: results packed into sections.tgz ($(du -sh "$final_out/sections.tgz" | cut -f1))"
}
trap pack_results EXIT
bin=$(mktemp -d)
tar -C "$bin" -xJf "$kit/engine_bin.tar.xz" || { echo "device_sections: cannot unpack $kit/engine_bin.tar.xz" >&2; exit 2; }
export LD_LIBRARY_PATH="$bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
echo "device_sections: card '$card'"
if [[ "$card" == *H200* ]]; then
  sections=${H200_SECTIONS:-}
else
  sections=${OTHER_SECTIONS:-}
fi
[ -z "$sections" ] && echo "device_sections: no sections for this card"

# bench_ab.sh compares binaries; a switch's A/B runs the same binary through one wrapper per value.
switch_wrapper() {  # NAME VAR VALUE
  printf '#!/usr/bin/env bash\nexport %s=%s\nexec %q "$@"\n' "$2" "$3" "$bin/quench_bench" > "$bin/$1"
  chmod +x "$bin/$1"
}

read -r -a section_list <<< "$sections"  # no globbing: gtest filters hold stars
for section in "${section_list[@]}"; do
  # KIND:ARG:SECONDS, where ARG may hold colons (a gtest filter's list): the seconds are the
  # last field when it is a number.
  kind=${section%%:*}
  arg=${section#"$kind"}; arg=${arg#:}
  seconds=""
  if [[ "$arg" =~ ^(.*):([0-9]+)$ ]]; then arg=${BASH_REMATCH[1]}; seconds=${BASH_REMATCH[2]}; fi
  start=$SECONDS
  case "$kind" in
    rec)
      echo "== rec:$arg (timeout ${seconds:-300} s)"
      OUT="$out/rec_$arg" timeout "${seconds:-300}" bash tools/gpu_check.sh --bin "$bin" --no-tests --bench "$arg" \
        > "$out/rec_$arg.log" 2>&1
      echo "rc=$?"; tail -n 40 "$out/rec_$arg.log"
      ;;
    tests)
      echo "== tests:$arg (timeout ${seconds:-120} s)"
      # Line-buffered, every test named: a run the timeout cuts still shows how far it got (the
      # whole GPU suite needs more than 240 s on an H100, and block-buffered output was lost).
      timeout "${seconds:-120}" stdbuf -oL -eL "$bin/quench_gpu_tests" --gtest_filter="$arg" \
        > "$out/tests.log" 2>&1
      echo "rc=$?"
      grep -E "^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]|Failure|Expected|Which is|error" "$out/tests.log" | tail -n 40
      ;;
    qkab)
      echo "== qkab: QUENCH_DECODE_QK mma vs wgmma"
      switch_wrapper qk_mma QUENCH_DECODE_QK mma
      switch_wrapper qk_wgmma QUENCH_DECODE_QK wgmma
      OUT="$out/qkab" timeout 200 bash tools/bench_ab.sh --bench decode --rounds 2 \
        --case "B64xL4096 kv=fp8_e4m3 page=16 out=bf16" --case "B128xL2048 kv=fp8_e4m3 page=16 out=bf16" \
        --case "B1xL32768 kv=fp8_e4m3 page=16 out=bf16" --case "B2xL32768 kv=fp8_e4m3 page=16 out=bf16" \
        "$bin/qk_mma" "$bin/qk_wgmma"
      ;;
    *)
      echo "device_sections: unknown section '$section'; allowed: rec:NAME:SECONDS, tests:FILTER:SECONDS, qkab" >&2
      ;;
  esac
  echo "(section $section: $((SECONDS - start)) s)"
done
