#!/usr/bin/env bash
# Builds the decode probe binaries (tools/decode_probe.patch) here, in a scratch worktree of HEAD,
# and packs them with the script that A/Bs them on the GPU machine, so that one device call
# answers: how much of a full-grid FP8 decode's time is the compute warps' work per tile?
#   p1  the FP8 -> f16 conversions on the integer pipe instead of the conversion unit (same count)
#   p2  no Q·Kᵀ work in the warps (no K loads, conversions or MMAs; fixed scores): the most that
#       moving Q·Kᵀ to wgmma from shared memory could give
#   p3  no consumer math: each stage released as soon as it lands (the loads' and ring's bound)
# The probes compute wrong numbers: they exist for timing only and never enter main's build.
#
#   tools/decode_probe_kit.sh [KIT_DIR]     # default .gpu_bin/decode_probe
# then, on the device (the `run` tool, carrying KIT_DIR):
#   bash KIT_DIR/run.sh                     # prints the A/B; OUT/ab.jsonl keeps every line
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
kit=${1:-.gpu_bin/decode_probe}
mkdir -p "$kit"
kit=$(cd "$kit" && pwd)
scratch=$(mktemp -d /tmp/quench_decode_probe.XXXXXX)
trap 'git -C "$repo" worktree remove --force "$scratch/src" >/dev/null 2>&1 || true; rm -rf "$scratch"' EXIT

git worktree add --detach "$scratch/src" HEAD >/dev/null
git -C "$scratch/src" apply "$repo/tools/decode_probe.patch"
export CUDACXX=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
cmake -S "$scratch/src" -B "$scratch/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
jobs=${QUENCH_JOBS:-$(nproc)}

# The probes switch on a macro read by the FP8 decode instantiations only: one translation unit
# is rebuilt per variant (the define goes at its top), the rest of the build is shared.
tu="$scratch/src/src/quench/ops/attention/decode/decode_attention_kv_e4m3.cu"
cp "$tu" "$scratch/tu.orig"
for variant in base 1 2 3; do
  cp "$scratch/tu.orig" "$tu"
  [ "$variant" != base ] && sed -i "1i #define QUENCH_DECODE_PROBE $variant" "$tu"
  cmake --build "$scratch/build" --target quench_bench -j "$jobs" >/dev/null
  name=$([ "$variant" = base ] && echo qb_base || echo "qb_p$variant")
  cp "$scratch/build/quench_bench" "$scratch/$name"
done
tar -C "$scratch" -cJf "$kit/probe.tar.xz" qb_base qb_p1 qb_p2 qb_p3
cp tools/bench_ab.sh "$kit/bench_ab.sh"

cat > "$kit/run.sh" <<'EOF'
#!/usr/bin/env bash
# Decode probe A/B (tools/decode_probe_kit.sh): base vs p1 / p2 / p3, two rounds, us per call.
set -uo pipefail
cd "$(dirname "$0")"
tar xJf probe.tar.xz
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw --format=csv
OUT=${OUT:-/tmp/decode_probe} bash ./bench_ab.sh --bench decode --rounds 2 --metric us \
  --case "B64xL4096 kv=fp8_e4m3 page=16 out=bf16 hq32/hkv8 hd128" \
  --case "B128xL2048 kv=fp8_e4m3 page=16 out=bf16 hq32/hkv8 hd128" \
  --case "B1xL32768 kv=fp8_e4m3 page=16 out=bf16 hq32/hkv8 hd128" \
  ./qb_base ./qb_p1 ./qb_p2 ./qb_p3
EOF
chmod +x "$kit/run.sh"
echo "decode_probe_kit: packed $(du -h "$kit/probe.tar.xz" | cut -f1) in $kit (commit $(git rev-parse --short HEAD))"
echo "decode_probe_kit: on the device: bash ${kit#$repo/}/run.sh (carry ${kit#$repo/}/probe.tar.xz, run.sh, bench_ab.sh)"
