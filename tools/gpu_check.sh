#!/usr/bin/env bash
# Runs every GPU test and GPU benchmark on the machine's GPU in one call and prints a short table
# last. Built for the H200 session workflow: build here, copy the binaries, run there once.
#
#   tools/gpu_check.sh [--bin DIR] [--tests FILTER] [--bench FILTER] [--no-tests] [--no-bench]
#                      [--sanitize FILTER] [--quick]
#
# --bin DIR        folder holding quench_gpu_tests and quench_bench (default: build)
# --tests FILTER   gtest filter for quench_gpu_tests (default: all, and then the decode cases
#                  again with QUENCH_DECODE_QK=wgmma)
# --bench FILTER   benchmark name filter (default: all)
# --sanitize F     also run compute-sanitizer memcheck and racecheck on the gtest filter F
# Environment: OUT (logs and JSON land there; default /tmp/quench_gpu_check), QUENCH_COMMIT,
# QUENCH_DATE (recorded in every benchmark result). The benchmarks run beside an nvidia-smi log
# of clocks, power and throttle reasons (OUT/clocks.csv; each result carries its unix_time).
set -uo pipefail
cd "$(dirname "$0")/.."

bin=build
tests_filter="*"
bench_filter=""
run_tests=1
run_bench=1
sanitize_filter=""
quick=()
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --tests) tests_filter=$2; shift 2 ;;
    --bench) bench_filter=$2; shift 2 ;;
    --no-tests) run_tests=0; shift ;;
    --no-bench) run_bench=0; shift ;;
    --sanitize) sanitize_filter=$2; shift 2 ;;
    --quick) quick=(--quick); shift ;;
    *) echo "gpu_check: unknown argument '$1'; allowed: --bin --tests --bench --no-tests --no-bench --sanitize --quick" >&2; exit 2 ;;
  esac
done

out=${OUT:-/tmp/quench_gpu_check}
mkdir -p "$out"
commit=${QUENCH_COMMIT:-unknown}
date=${QUENCH_DATE:-$(date -u +%Y-%m-%d)}
summary=()

# quench_gpu_tests links cuBLAS (the GPU model runner's tests): if the toolkit's copy is not where
# the binary looks, PyTorch's wheel carries one.
torch_cublas=$(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null || true)
[ -n "$torch_cublas" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$torch_cublas"
if ldd "$bin/quench_gpu_tests" | grep -q "not found"; then
  echo "gpu_check: quench_gpu_tests misses shared libraries:"; ldd "$bin/quench_gpu_tests" | grep "not found"
fi

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw \
  --format=csv | tee "$out/gpu.txt"

if [ "$run_tests" = 1 ]; then
  echo "== GPU tests ($tests_filter)"
  start=$(date +%s)
  "$bin/quench_gpu_tests" --gtest_filter="$tests_filter" --gtest_brief=1 \
    --gtest_output="xml:$out/gpu_tests.xml" >"$out/gpu_tests.log" 2>&1
  rc=$?
  grep -E "^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]|Failure|mismatch|max_abs|error" "$out/gpu_tests.log" | tail -n 60
  summary+=("gpu tests: rc=$rc, $(grep -c '^\[       OK \]' "$out/gpu_tests.log" 2>/dev/null || true) ok lines, $(( $(date +%s) - start )) s, $(grep -E '^\[  PASSED  \]|^\[  FAILED  \].*tests?, listed' "$out/gpu_tests.log" | tr '\n' ' ')")
  # The decode cases again through the A/B switch QUENCH_DECODE_QK=wgmma (ctest's
  # gpu_tests_decode_wgmma_qk), when the whole suite runs.
  if [ "$tests_filter" = "*" ]; then
    echo "== GPU tests (*Decode*, QUENCH_DECODE_QK=wgmma)"
    QUENCH_DECODE_QK=wgmma "$bin/quench_gpu_tests" --gtest_filter='*Decode*' --gtest_brief=1 \
      >"$out/gpu_tests_decode_wgmma_qk.log" 2>&1
    rc=$?
    grep -E "^\[  (FAILED|PASSED) |Failure|mismatch|max_abs|error" "$out/gpu_tests_decode_wgmma_qk.log" | tail -n 30
    summary+=("gpu tests, decode with QUENCH_DECODE_QK=wgmma: rc=$rc, $(grep -E '^\[  PASSED  \]|^\[  FAILED  \].*tests?, listed' "$out/gpu_tests_decode_wgmma_qk.log" | tr '\n' ' ')")
  fi
fi

if [ -n "$sanitize_filter" ]; then
  for tool in memcheck racecheck; do
    echo "== compute-sanitizer $tool ($sanitize_filter)"
    compute-sanitizer --tool "$tool" --error-exitcode 9 "$bin/quench_gpu_tests" \
      --gtest_filter="$sanitize_filter" --gtest_brief=1 >"$out/sanitizer_$tool.log" 2>&1
    rc=$?
    tail -n 5 "$out/sanitizer_$tool.log"
    summary+=("sanitizer $tool: rc=$rc ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer_$tool.log" | tail -n 1))")
  done
fi

if [ "$run_bench" = 1 ]; then
  echo "== peers (PyTorch / cuDNN)"
  : >"$out/peers.jsonl"
  for script in bench/peers/*.py; do
    [ -e "$script" ] || continue
    name=$(basename "$script" .py)
    if [ -n "$bench_filter" ] && [[ "$name" != *"$bench_filter"* ]]; then continue; fi
    PYTHONUNBUFFERED=1 timeout 240 python3 "$script" >>"$out/peers.jsonl" 2>"$out/peer_$name.log" \
      || summary+=("peer $name failed: $(tail -n 1 "$out/peer_$name.log")")
  done
  echo "== benchmarks (${bench_filter:-all})"
  : >"$out/bench_raw.jsonl"
  # The GPU's clocks, power and throttle reasons every 200 ms beside the benchmarks, to line up
  # with each result's unix_time (a sweep's late cases run on a GPU under seconds of full load).
  clock_pid=""
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
      --format=csv -lms 200 >"$out/clocks.csv" 2>&1 &
    clock_pid=$!
  fi
  "$bin/quench_bench" --jsonl "$out/bench_raw.jsonl" --commit "$commit" --date "$date" \
    ${bench_filter:+--filter "$bench_filter"} "${quick[@]}" >"$out/bench.log" 2>&1
  rc=$?
  if [ -n "$clock_pid" ]; then kill "$clock_pid" 2>/dev/null; wait "$clock_pid" 2>/dev/null; fi
  summary+=("bench: rc=$rc")
  python3 tools/merge_bench_results.py "$out/bench_raw.jsonl" "$out/peers.jsonl" >"$out/bench.jsonl"
  python3 tools/merge_bench_results.py --table "$out/bench.jsonl"
fi

echo "== summary"
for line in "${summary[@]}"; do echo "$line"; done
