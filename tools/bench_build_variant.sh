#!/usr/bin/env bash
# Builds a quench_bench variant for an A/B of a compile-time switch: one source file of quench_lib
# compiled again with extra defines, its object replaced in a copy of libquench_lib.a, and
# quench_bench relinked against that copy (~3 min for the Hopper prefill on 2 cores, where a
# second build folder takes ~20). Compare it with the build's own quench_bench by
# tools/bench_ab.sh in one device call.
#
#   tools/bench_build_variant.sh NAME SOURCE [-DNAME=VALUE ...]   # BUILD_DIR default build
#   e.g. tools/bench_build_variant.sh widened \
#          src/quench/ops/attention/prefill/hopper/prefill_attention_hopper.cu \
#          -DQUENCH_PREFILL_BF16Q_TWO_TERM_HD64=0 -DQUENCH_PREFILL_BF16Q_TWO_TERM_HD256=0
# Writes BUILD_DIR/variants/quench_bench_NAME, and with VARIANT_TESTS=1 also
# BUILD_DIR/variants/quench_gpu_tests_NAME (the GPU tests against the same variant library), so
# that one device call can check the variant before timing it.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
if [ $# -lt 2 ]; then
  echo "usage: tools/bench_build_variant.sh NAME SOURCE [-DNAME=VALUE ...]" >&2
  exit 2
fi
name=$1
source=$2
shift 2
build=${BUILD_DIR:-build}
[[ "$name" =~ ^[A-Za-z0-9_]+$ ]] || { echo "bench_build_variant: NAME '$name' must be letters, digits or _" >&2; exit 2; }
[ -f "$source" ] || { echo "bench_build_variant: no source '$source'" >&2; exit 2; }
for define in "$@"; do
  [[ "$define" == -D* ]] || { echo "bench_build_variant: '$define' is not a -DNAME=VALUE define" >&2; exit 2; }
done
lib_dir="$build/CMakeFiles/quench_lib.dir"
object="$lib_dir/$source.o"
[ -f "$object" ] || { echo "bench_build_variant: $object is missing: build first, and name a .cu of quench_lib" >&2; exit 1; }
[ -f "$build/libquench_lib.a" ] || { echo "bench_build_variant: $build/libquench_lib.a is missing; build first" >&2; exit 1; }

work="$build/variants/$name"
mkdir -p "$work"
flags=$(sed -n 's/^CUDA_FLAGS = //p' "$lib_dir/flags.make")
# shellcheck disable=SC2086  # the flags are a word list
(cd "$build" && nvcc $flags --options-file "CMakeFiles/quench_lib.dir/includes_CUDA.rsp" "$@" \
  -x cu -c "$repo/$source" -o "variants/$name/$(basename "$object")")
cp "$build/libquench_lib.a" "$work/libquench_lib.a"
# The archive names members by file name: r replaces the default build's object.
ar r "$work/libquench_lib.a" "$work/$(basename "$object")"
link=$(sed -e "s# libquench_lib.a # variants/$name/libquench_lib.a #" \
           -e "s#-o quench_bench #-o variants/quench_bench_$name #" "$build/CMakeFiles/quench_bench.dir/link.txt")
(cd "$build" && eval "$link")
echo "bench_build_variant: $build/variants/quench_bench_$name"
if [ "${VARIANT_TESTS:-0}" = 1 ]; then
  [ -f "$build/CMakeFiles/quench_gpu_tests.dir/link.txt" ] || { echo "bench_build_variant: no quench_gpu_tests link line; build first" >&2; exit 1; }
  link=$(sed -e "s# libquench_lib.a # variants/$name/libquench_lib.a #" \
             -e "s#-o quench_gpu_tests #-o variants/quench_gpu_tests_$name #" \
             "$build/CMakeFiles/quench_gpu_tests.dir/link.txt")
  (cd "$build" && eval "$link")
  echo "bench_build_variant: $build/variants/quench_gpu_tests_$name"
fi
