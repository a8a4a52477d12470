#!/usr/bin/env bash
# The device call that decides whether two-term Q for a bf16 query over an FP8 cache at head_dim
# 64 and 256 becomes the Hopper prefill's default (bench/LOG.md, forty-first session): its GPU
# tests, an A/B against the widened-K kernels and the three-slot ring, racecheck, then the
# prefill record sweep beside cuDNN in what time is left.
#
# Here (about 10 min on 2 cores):
#   1. set QUENCH_PREFILL_BF16Q_TWO_TERM_HD64 and _HD256 to 1 in prefill_hopper_config.cuh and
#      cmake --build build
#   2. h=src/quench/ops/attention/prefill/hopper/prefill_attention_hopper.cu
#      tools/bench_build_variant.sh widened $h -DQUENCH_PREFILL_BF16Q_TWO_TERM_HD64=0 \
#        -DQUENCH_PREFILL_BF16Q_TWO_TERM_HD256=0
#      tools/bench_build_variant.sh slots3 $h -DQUENCH_PREFILL_WS_RING_SLOTS_FIRST=1
#   3. tools/engine_gpu_kit.sh && mkdir -p .gpu_bin/ab && tar -C build/variants -cJf \
#        .gpu_bin/ab/ab_bin.tar.xz quench_bench_widened quench_bench_slots3
# Then the `run` tool, carrying [".gpu_bin/engine", ".gpu_bin/ab"]:
#   BUDGET=560 QUENCH_COMMIT=<sha> OUT=$OUT bash tools/prefill_two_term_check.sh
# BUDGET: the seconds the call may take (the sweep gets what the rest leaves).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/quench_two_term}
mkdir -p "$out"
b=$(mktemp -d)
tar -C "$b" -xJf .gpu_bin/engine/engine_bin.tar.xz && tar -C "$b" -xJf .gpu_bin/ab/ab_bin.tar.xz ||
  { echo "prefill_two_term_check: cannot unpack the kit (see the steps above)" >&2; exit 2; }
export LD_LIBRARY_PATH="$b/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name --format=csv,noheader
left() { echo $((${BUDGET:-300} - SECONDS)); }

tests='PrefillHopperLayout.*:PrefillAttentionHopper.*:PrefillHopperWs.*:PrefillHopperPersistent.*'
timeout 150 stdbuf -oL "$b/quench_gpu_tests" --gtest_filter="$tests" >"$out/tests.log" 2>&1
echo "tests rc=$? at $SECONDS s"
grep -E "^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]|Failure|Expected|Which is|wrong" "$out/tests.log" | head -40

cp "$b/quench_bench" "$b/quench_bench_twoterm"
OUT="$out/ab" timeout 120 bash tools/bench_ab.sh --bench prefill --rounds 2 \
  --case "bf16q_fp8kv b2 s8192 h32/8 d256" --case "bf16q_fp8kv b2 s8192 h32/8 d64" \
  "$b/quench_bench_twoterm" "$b/quench_bench_widened" "$b/quench_bench_slots3" >"$out/ab.log" 2>&1
echo "ab rc=$? at $SECONDS s"
tail -n 12 "$out/ab.log"

timeout 120 compute-sanitizer --tool racecheck "$b/quench_gpu_tests" \
  --gtest_filter='PrefillHopperLayout.Bf16QueryFp8Kv:PrefillHopperWs.HeadDim256RingWrapAround' \
  >"$out/racecheck.log" 2>&1
echo "racecheck rc=$? at $SECONDS s"
tail -n 6 "$out/racecheck.log"

if [ "$(left)" -gt 60 ]; then
  OUT="$out/rec_prefill" timeout "$(left)" bash tools/gpu_check.sh --bin "$b" --no-tests \
    --bench prefill >"$out/rec_prefill.log" 2>&1
  echo "rec rc=$? at $SECONDS s"
  tail -n 5 "$out/rec_prefill.log"
fi
