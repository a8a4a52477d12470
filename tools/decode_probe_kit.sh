#!/usr/bin/env bash
# Builds the decode probe binaries (tools/decode_probe.patch) here, from a built build folder and
# a patched copy of src/, and packs them with the script that runs them on the GPU machine, so
# that one device call answers: how much of a full-grid FP8 decode's time is the compute warps' work per tile, and
# what does the swapped loop's Q·Kᵀ on FP8 wgmma (QUENCH_DECODE_QK=wgmma) give?
#   base   HEAD as built
#   wgmma  the same binary with QUENCH_DECODE_QK=wgmma (a wrapper script)
#   wgmma_ring3  the same with a 3-stage ring where small grids take 2 (a wrapper script)
#   p1     the FP8 -> f16 conversions on the integer pipe instead of the conversion unit (same
#          count)
#   p2     no Q·Kᵀ work in the warps (no K loads, conversions or MMAs; fixed scores): the most
#          that moving Q·Kᵀ out of the warps' instruction stream could give
#   p3     no consumer math: each stage released as soon as it lands (the loads' and ring's bound)
#   p4     main's loop with each warp's stage released once V is in registers, before the V
#          conversions and P·V MMAs (correct numbers: a candidate, the wgmma variant's order)
# p1-p3 compute wrong numbers, for timing only; no probe enters main's build. The kit also
# carries HEAD's GPU tests, which run.sh runs over the decode cases with QUENCH_DECODE_QK=wgmma
# before timing it.
#
#   tools/decode_probe_kit.sh [KIT_DIR]     # default .gpu_bin/decode_probe; build first
#                                           # (QUENCH_PROBE_BUILD, default build)
# then, on the device (the `run` tool, carrying KIT_DIR's three files):
#   bash KIT_DIR/run.sh                     # prints the tests and the A/B; OUT/ab.jsonl keeps all
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
kit=${1:-.gpu_bin/decode_probe}
mkdir -p "$kit"
kit=$(cd "$kit" && pwd)
scratch=$(mktemp -d /tmp/quench_decode_probe.XXXXXX)
trap 'rm -rf "$scratch"' EXIT

export CUDACXX=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
# Base is QUENCH_PROBE_BUILD's binaries (default build: a built build folder of HEAD). The probes
# switch on a macro read by the FP8 decode instantiations only, so each variant rebuilds that one
# translation unit from a patched copy of src/ and relinks quench_bench (tools/lib/
# variant_relink.sh): 2 minutes, no second build.
built=$(cd "${QUENCH_PROBE_BUILD:-build}" && pwd)
for binary in quench_bench quench_gpu_tests; do
  [ -x "$built/$binary" ] || { echo "decode_probe_kit: $built/$binary is missing; build first" >&2; exit 1; }
done
cp "$built/quench_bench" "$scratch/qb_base"
cp "$built/quench_gpu_tests" "$scratch/quench_gpu_tests"
mkdir -p "$scratch/src"
cp -r src "$scratch/src/src"
(cd "$scratch/src" && patch -s -p1 < "$repo/tools/decode_probe.patch")
# shellcheck source=tools/lib/variant_relink.sh
source "$repo/tools/lib/variant_relink.sh"
for variant in 1 2 3 4; do
  variant_relink "$built" quench_bench "$scratch/qb_p$variant" "$scratch/parts/p$variant" \
    "$scratch/src" "-DQUENCH_DECODE_PROBE=$variant" \
    src/quench/ops/attention/decode/decode_attention_kv_e4m3.cu
done
cat > "$scratch/qb_wgmma" <<'EOF2'
#!/usr/bin/env bash
QUENCH_DECODE_QK=wgmma exec "$(dirname "$0")/qb_base" "$@"
EOF2
# Small grids (B1 / B2 x 32k) run 2 stages per CTA (SmallGridRing::kShallow, measured when a
# stage was held through the whole tile's compute); the wgmma variant releases it earlier, so
# its 3-stage ring is timed beside it.
cat > "$scratch/qb_wgmma_ring3" <<'EOF2'
#!/usr/bin/env bash
QUENCH_DECODE_QK=wgmma QUENCH_DECODE_DEEP_RING=1 QUENCH_DECODE_STAGES=3 \
  exec "$(dirname "$0")/qb_base" "$@"
EOF2
chmod +x "$scratch/qb_wgmma" "$scratch/qb_wgmma_ring3"
strip "$scratch"/qb_base "$scratch"/qb_p? "$scratch/quench_gpu_tests" 2>/dev/null || true
# xz -9e: its 64 MiB window shares the binaries' common bytes (45 MB -> 11 MB).
tar -C "$scratch" -cf - qb_base qb_wgmma qb_wgmma_ring3 qb_p1 qb_p2 qb_p3 qb_p4 quench_gpu_tests | xz -9e -T2 > "$kit/probe.tar.xz"
cp tools/bench_ab.sh "$kit/bench_ab.sh"

cat > "$kit/run.sh" <<'EOF'
#!/usr/bin/env bash
# Decode kit (tools/decode_probe_kit.sh): the decode GPU tests with QUENCH_DECODE_QK=wgmma and
# compute-sanitizer on two of them, then base / wgmma / wgmma_ring3 / p1 / p2 / p3 / p4 in turn,
# two rounds, us per call.
#   bash run.sh [tests|ab]   (default: both; each part stays well inside one 600 s call alone)
set -uo pipefail
cd "$(dirname "$0")"
part=${1:-both}
tar xJf probe.tar.xz
out=${OUT:-/tmp/decode_probe}
mkdir -p "$out"
# quench_gpu_tests links cuBLAS; PyTorch's wheel carries one if the toolkit's is not found.
torch_cublas=$(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null || true)
[ -n "$torch_cublas" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$torch_cublas"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw --format=csv
if [ "$part" != ab ]; then
  echo "== decode GPU tests, QUENCH_DECODE_QK=wgmma"
  QUENCH_DECODE_QK=wgmma timeout 300 ./quench_gpu_tests --gtest_filter='*Decode*:*FarPages*' \
    --gtest_brief=1 >"$out/wgmma_tests.log" 2>&1
  echo "rc=$?"
  grep -E "^\[  (FAILED|PASSED) |^\[==========\]|Failure|mismatch|max_abs" "$out/wgmma_tests.log" | tail -n 30
  # compute-sanitizer on two swapped-loop cases through the variant (window + soft-cap masks,
  # multi-token rows): the wgmma reads of the stage and of the Q terms beside the TMA writes.
  sanitize='*loops_kv_e4m3_q_bf16_g4_hd128_p16_NHD_out_bf16_window_softcap:*multi_token_g4_swapped'
  for tool in memcheck racecheck; do
    echo "== compute-sanitizer $tool, QUENCH_DECODE_QK=wgmma ($sanitize)"
    QUENCH_DECODE_QK=wgmma timeout 150 compute-sanitizer --tool "$tool" --error-exitcode 9 \
      ./quench_gpu_tests --gtest_filter="$sanitize" --gtest_brief=1 >"$out/sanitizer_$tool.log" 2>&1
    echo "rc=$?"
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$out/sanitizer_$tool.log" | tail -n 4
  done
fi
[ "$part" = tests ] && exit 0
echo "== A/B"
OUT=$out bash ./bench_ab.sh --bench decode --rounds 2 --metric us \
  --case 'B64xL4096 kv=fp8_e4m3 page=16 out=bf16 hq32/hkv8 hd128$' \
  --case 'B128xL2048 kv=fp8_e4m3 page=16 out=bf16 hq32/hkv8 hd128$' \
  --case 'B8xL32768 kv=fp8_e4m3 page=16 out=bf16 hq32/hkv8 hd128$' \
  --case 'B2xL32768 kv=fp8_e4m3 page=16 out=bf16 hq32/hkv8 hd128$' \
  --case 'B1xL32768 kv=fp8_e4m3 page=16 out=bf16 hq32/hkv8 hd128$' \
  ./qb_base ./qb_wgmma ./qb_wgmma_ring3 ./qb_p1 ./qb_p2 ./qb_p3 ./qb_p4
EOF
chmod +x "$kit/run.sh"
echo "decode_probe_kit: packed $(du -h "$kit/probe.tar.xz" | cut -f1) in $kit (commit $(git rev-parse --short HEAD))"
echo "decode_probe_kit: on the device: bash ${kit#"$repo"/}/run.sh (carry ${kit#"$repo"/}/probe.tar.xz, run.sh, bench_ab.sh)"
