#!/usr/bin/env bash
# Prints the SASS of device functions in an object or binary built here, on this machine: the
# CUDA toolkit here has no cuobjdump, but NVIDIA's PyPI wheels of it and of the nvdisasm it calls
# (pinned below) run here and read cubins of nvcc 13.0, so reading a kernel's loop no longer
# needs a device call.
#
#   tools/sass.sh FILE [NAME_SUBSTRING]    # FILE: a .o of build/, or a linked binary
#
# With NAME_SUBSTRING, only the functions whose mangled name contains it (each from its
# "Function :" line to the next). The wheels are unpacked once into .whl/ (git-ignored).
# e.g. the FP8 P·V per-tile prefill kernel, then its loop census:
#   tools/sass.sh build/CMakeFiles/quench_lib.dir/src/quench/ops/attention/prefill/hopper/\
#     prefill_attention_hopper.cu.o ws_kernelILNS0_10HopperKindE0ELi128ELb0ELb0 > /tmp/k.sass
#   tools/sass_loop_census.py /tmp/k.sass
set -euo pipefail
if [ $# -lt 1 ]; then sed -n 2,14p "$0"; exit 2; fi
[ -f "$1" ] || { echo "sass: no file '$1'" >&2; exit 2; }
file=$(realpath "$1")  # before the cd below: FILE may be relative to the caller's directory
name=${2:-}
cd "$(dirname "$0")/.."
wheel_version=13.5.37
home=.whl/cuda-sass-$wheel_version
tool=$home/nvidia/cu13/bin/cuobjdump
if [ ! -x "$tool" ] || [ ! -x "$home/nvidia/cu13/bin/nvdisasm" ]; then
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  python3 -m pip download --quiet --no-deps --dest "$scratch" \
    "nvidia-cuda-cuobjdump==$wheel_version" "nvidia-cuda-nvdisasm==$wheel_version" >&2
  mkdir -p "$home"
  for wheel in "$scratch"/*.whl; do python3 -m zipfile -e "$wheel" "$home"; done
  chmod +x "$home"/nvidia/cu13/bin/*
fi
export NVDISASM_PATH="$PWD/$home/nvidia/cu13/bin"
if [ -z "$name" ]; then
  "$tool" -sass "$file"
else
  "$tool" -sass "$file" | awk -v name="$name" '
    /Function :/ { keep = index($0, name) > 0 }
    keep'
fi
