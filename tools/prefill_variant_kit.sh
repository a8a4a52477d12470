#!/usr/bin/env bash
# Packs an A/B of the Hopper prefill kernels for one device call without a second full build:
# the translation units that hold them (the library's prefill_attention_hopper.cu and the GPU
# tests that instantiate the kernels directly) are compiled from SRC_DIR once per variant, with
# that variant's -D flags, into copies of BUILD_DIR's libraries and objects, and quench_bench (and,
# for the first variant, quench_gpu_tests) are relinked. BUILD_DIR is a built build folder of the
# A side (its quench_bench is `base`).
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
nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
lib_flags=$(sed -n 's/^CUDA_FLAGS = //p' "$build/CMakeFiles/quench_lib.dir/flags.make")
test_flags=$(sed -n 's/^CUDA_FLAGS = //p' "$build/CMakeFiles/quench_gpu_tests.dir/flags.make")
lib_tu=src/quench/ops/attention/prefill/hopper/prefill_attention_hopper.cu
test_tus=(tests/ops/attention/prefill_hopper_ws_gpu_test.cu
          tests/ops/attention/prefill_hopper_persistent_gpu_test.cu)
cp "$build/quench_bench" "$scratch/qb_base"
names=()
first=1
for spec in "$@"; do
  name=${spec%%=*}
  defines=${spec#*=}
  names+=("$name")
  out="$scratch/$name"
  mkdir -p "$out"
  echo "prefill_variant_kit: $name ($defines)"
  # shellcheck disable=SC2086  # flag lists are words
  "$nvcc" -forward-unknown-to-host-compiler -I"$src/src" -isystem=/usr/local/cuda/include \
    $lib_flags $defines -x cu -c "$src/$lib_tu" -o "$out/$(basename "$lib_tu").o"
  cp "$build/libquench_lib.a" "$out/libquench_lib.a"
  ar r "$out/libquench_lib.a" "$out/$(basename "$lib_tu").o"
  link=$(sed -e "s| libquench_lib.a | $out/libquench_lib.a |" -e "s| -o quench_bench | -o $scratch/qb_$name |" \
    "$build/CMakeFiles/quench_bench.dir/link.txt")
  (cd "$build" && eval "$link")
  if [ $first = 1 ]; then
    # The tests binary of the first variant: its own test objects in place of the build's.
    link=$(sed -e "s| libquench_lib.a | $out/libquench_lib.a |" \
      -e "s| -o quench_gpu_tests | -o $scratch/quench_gpu_tests |" \
      "$build/CMakeFiles/quench_gpu_tests.dir/link.txt")
    for tu in "${test_tus[@]}"; do
      object="$out/$(basename "$tu").o"
      # shellcheck disable=SC2086
      "$nvcc" -forward-unknown-to-host-compiler -I"$src/tests" -I"$src/src" \
        -isystem=/usr/local/cuda/include $test_flags $defines -x cu -c "$src/$tu" -o "$object"
      link=${link//" CMakeFiles/quench_gpu_tests.dir/$tu.o "/" $object "}
    done
    (cd "$build" && eval "$link")
    first=0
  fi
done
strip "$scratch"/qb_* "$scratch/quench_gpu_tests"
(cd "$scratch" && tar -cJf "$kit/prefill_kit.tar.xz" qb_base "${names[@]/#/qb_}" quench_gpu_tests)
cp "$repo/tools/bench_ab.sh" "$kit/"
cat > "$kit/run.sh" <<EOF
#!/usr/bin/env bash
# The prefill A/B kit (tools/prefill_variant_kit.sh): quench_gpu_tests is variant ${names[0]}'s.
#   bash run.sh tests|ab|both   (tests: the prefill and attention-op GPU tests, racecheck on two
#   warp-specialized cases; ab: base against ${names[*]}, two rounds, TFLOP/s)
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
  echo "== prefill and attention-op GPU tests (${names[0]})"
  timeout 330 ./quench_gpu_tests --gtest_filter='*Prefill*:AttentionOp*' --gtest_brief=1 >"\$out/tests.log" 2>&1
  echo "rc=\$?"
  grep -E "^\[  (FAILED|PASSED) |^\[==========\]|Failure|rel_l2|max_abs|Expected|Which" "\$out/tests.log" | tail -n 40
  echo "== compute-sanitizer racecheck (${names[0]})"
  timeout 120 compute-sanitizer --tool racecheck ./quench_gpu_tests \\
    --gtest_filter='PrefillHopperPersistent.ManyItemsPerCtaMatchReference' --gtest_brief=1 2>&1 | tail -n 3
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
