#!/usr/bin/env bash
# Packs an A/B of the Hopper prefill kernels for one device call without a second full build:
# the translation units that hold them (the library's prefill_attention_hopper.cu and the GPU
# tests that instantiate the kernels directly) are compiled from SRC_DIR once per variant, with
# that variant's -D flags, into copies of BUILD_DIR's libraries and objects, and quench_bench (and,
# for the variants named in PREFILL_KIT_TESTS, default the first, quench_gpu_tests) are relinked.
# BUILD_DIR is a built build folder of the A side (its quench_bench is `base`).
#   tools/prefill_variant_kit.sh BUILD_DIR SRC_DIR KIT_DIR NAME="DEFINES" [NAME="DEFINES" ...]
#   e.g. tools/prefill_variant_kit.sh build ../wt .gpu_bin/prefill lazy2="" lazy4="-DX=4"
# then, on the device (the `run` tool carrying KIT_DIR):
#   OUT=$OUT bash KIT_DIR/run.sh tests|ab|both
set -euo pipefail
[ $# -ge 4 ] || { sed -n 2,12p "$0"; exit 1; }
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
kit=$3
shift 3
repo=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$kit"
kit=$(cd "$kit" && pwd)
scratch=$(mktemp -d /tmp/quench_prefill_kit.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
export CUDACXX=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
# shellcheck source=tools/lib/variant_relink.sh
source "$repo/tools/lib/variant_relink.sh"
lib_tu=src/quench/ops/attention/prefill/hopper/prefill_attention_hopper.cu
test_tus=(tests/ops/attention/prefill_hopper_ws_gpu_test.cu
          tests/ops/attention/prefill_hopper_persistent_gpu_test.cu)
cp "$build/quench_bench" "$scratch/qb_base"
names=()
read -r -a test_variants <<< "${PREFILL_KIT_TESTS:-${1%%=*}}"
for spec in "$@"; do
  name=${spec%%=*}
  defines=${spec#*=}
  names+=("$name")
  echo "prefill_variant_kit: $name ($defines)"
  parts="$scratch/parts/$name"
  variant_relink "$build" quench_bench "$scratch/qb_$name" "$parts" "$src" "$defines" "$lib_tu"
  if [[ " ${test_variants[*]} " == *" $name "* ]]; then
    # This variant's tests binary: its own test objects in place of the build's.
    variant_relink "$build" quench_gpu_tests "$scratch/tests_$name" "$parts" "$src" "$defines" \
      "$lib_tu" "${test_tus[@]}"
  fi
done
strip "$scratch"/qb_* "$scratch"/tests_*
# xz -9e: its 64 MiB window shares the binaries' common bytes (46 MB -> 9 MB).
(cd "$scratch" && tar -cf - qb_base "${names[@]/#/qb_}" "${test_variants[@]/#/tests_}" | xz -9e -T2 > "$kit/prefill_kit.tar.xz")
cp "$repo/tools/bench_ab.sh" "$kit/"
cat > "$kit/run.sh" <<EOF
#!/usr/bin/env bash
# The prefill A/B kit (tools/prefill_variant_kit.sh).
#   bash run.sh tests|ab|both   (tests: ${test_variants[0]}'s prefill and attention-op GPU tests and
#   racecheck on the persistent kernel, then the Hopper and needle tests of ${test_variants[*]:1};
#   ab: base against ${names[*]}, two rounds, TFLOP/s)
set -uo pipefail
cd "\$(dirname "\$0")"
part=\${1:-both}
tar xJf prefill_kit.tar.xz
out=\${OUT:-/tmp/prefill_kit}
mkdir -p "\$out"
torch_cublas=\$(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null || true)
[ -n "\$torch_cublas" ] && export LD_LIBRARY_PATH="\${LD_LIBRARY_PATH:+\$LD_LIBRARY_PATH:}\$torch_cublas"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw --format=csv
if [ "\$part" != ab ]; then
  echo "== prefill and attention-op GPU tests (${test_variants[0]})"
  timeout 330 ./tests_${test_variants[0]} --gtest_filter='*Prefill*:AttentionOp*' --gtest_brief=1 >"\$out/tests.log" 2>&1
  echo "rc=\$?"
  grep -E "^\[  (FAILED|PASSED) |^\[==========\]|Failure|needle n=|Expected|Which" "\$out/tests.log" | tail -n 40
  echo "== compute-sanitizer racecheck (${test_variants[0]})"
  timeout 120 compute-sanitizer --tool racecheck ./tests_${test_variants[0]} \\
    --gtest_filter='PrefillHopperPersistent.ManyItemsPerCtaMatchReference' --gtest_brief=1 2>&1 | tail -n 3
  for variant in ${test_variants[*]:1}; do
    echo "== the Hopper prefill and needle tests (\$variant)"
    timeout 200 ./tests_\$variant --gtest_filter='PrefillAttentionHopper.*:PrefillAttentionNeedle.Hopper*' \\
      --gtest_brief=1 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure|needle n=|Expected|Which" | tail -n 20
  done
fi
[ "\$part" = tests ] && exit 0
echo "== A/B"
tail=" h32/8 d128 page16 causal"
OUT=\$out bash ./bench_ab.sh --bench prefill --rounds 2 \\
  --case "fp8 b16 s1024\$tail hopper_fp8pv\\\$" --case "fp8 b2 s8192\$tail hopper_fp8pv\\\$" \\
  --case "fp8 b1 s16384 h32/8 d128 page64 causal hopper_fp8pv\\\$" \\
  --case "bf16 b16 s1024\$tail hopper\\\$" --case "bf16 b4 s4096\$tail hopper\\\$" \\
  --case "bf16 b2 s8192\$tail hopper\\\$" --case "bf16q_fp8kv b2 s8192\$tail hopper\\\$" \\
  ./qb_base ${names[*]/#/./qb_}
EOF
chmod +x "$kit/run.sh"
echo "prefill_variant_kit: packed $(du -h "$kit/prefill_kit.tar.xz" | cut -f1) in $kit"
