# Sourced by the GPU A/B kits (decode_probe_kit.sh, prefill_variant_kit.sh): builds a variant
# binary of a built build folder without a second build. The variant's translation units are
# compiled with the build's own flags (and the variant's -D flags) from a source tree, replace
# their objects in a copy of the build's library (library TUs) or in the link line (test TUs),
# and the target is relinked with the build's link command.
#
#   variant_relink BUILD TARGET OUT PARTS SRC_ROOT "DEFINES" LIB_TU [TEST_TU ...]
#     BUILD     a built build folder (CMake, Unix Makefiles)
#     TARGET    quench_bench or quench_gpu_tests (its CMakeFiles/TARGET.dir/link.txt)
#     OUT       the variant binary's path
#     PARTS     the variant's objects and library copy: one folder per variant, so that its
#               second target reuses the library built for the first
#     SRC_ROOT  the source tree to compile from (its src/ and tests/)
#     LIB_TU    a translation unit of quench_lib, relative to SRC_ROOT
#     TEST_TU   translation units of TARGET itself, relative to SRC_ROOT
# Needs CUDACXX (nvcc).

variant_relink() {
  local build=$1 target=$2 out=$3 scratch=$4 src=$5 defines=$6 lib_tu=$7
  shift 7
  mkdir -p "$scratch"
  local lib_flags target_flags
  lib_flags=$(sed -n 's/^CUDA_FLAGS = //p' "$build/CMakeFiles/quench_lib.dir/flags.make")
  target_flags=$(sed -n 's/^CUDA_FLAGS = //p' "$build/CMakeFiles/$target.dir/flags.make")
  local object="$scratch/$(basename "$lib_tu").o"
  if [ ! -f "$scratch/libquench_lib.a" ]; then
    # shellcheck disable=SC2086  # flag lists are words
    "$CUDACXX" -forward-unknown-to-host-compiler -I"$src/src" -isystem=/usr/local/cuda/include \
      $lib_flags $defines -x cu -c "$src/$lib_tu" -o "$object"
    cp "$build/libquench_lib.a" "$scratch/libquench_lib.a"
    ar r "$scratch/libquench_lib.a" "$object" 2>/dev/null
  fi
  local link
  link=$(sed -e "s| libquench_lib.a | $scratch/libquench_lib.a |" -e "s| -o $target | -o $out |" \
    "$build/CMakeFiles/$target.dir/link.txt")
  local tu
  for tu in "$@"; do
    object="$scratch/$(basename "$tu").o"
    # shellcheck disable=SC2086
    "$CUDACXX" -forward-unknown-to-host-compiler -I"$src/tests" -I"$src/src" \
      -isystem=/usr/local/cuda/include $target_flags $defines -x cu -c "$src/$tu" -o "$object"
    link=${link//" CMakeFiles/$target.dir/$tu.o "/" $object "}
  done
  (cd "$build" && eval "$link")
}
