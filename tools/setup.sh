#!/usr/bin/env bash
# Takes a fresh Debian 12 machine (with the CUDA 13 toolkit, or pip to fetch nvcc) from clone to a
# built quench, then runs quench's main jobs on built-in defaults (`quench generate`, `quench layer`).
#   bash tools/setup.sh            # install packages, configure, build, run both
# Environment: QUENCH_BUILD_DIR (default build), QUENCH_JOBS (default: all cores).
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=${QUENCH_BUILD_DIR:-build}
jobs=${QUENCH_JOBS:-$(nproc)}

# Debian packages the build needs. Installed only when missing, so a second run costs nothing.
packages=(cmake g++ make pkg-config libgtest-dev nlohmann-json3-dev libcpp-httplib-dev libpcre2-dev
          libutf8proc-dev python3 git clang-format)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  echo "setup: installing ${missing[*]}"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The CUDA compiler: $CUDACXX, nvcc on PATH, or the toolkit's usual home.
if [ -z "${CUDACXX:-}" ]; then
  if command -v nvcc >/dev/null 2>&1; then
    CUDACXX=$(command -v nvcc)
  elif [ -x /usr/local/cuda/bin/nvcc ]; then
    CUDACXX=/usr/local/cuda/bin/nvcc
  else
    echo "setup: no CUDA compiler found (checked \$CUDACXX, PATH, /usr/local/cuda/bin/nvcc)." >&2
    echo "setup: install the CUDA 13 toolkit, or set CUDACXX to its nvcc." >&2
    exit 1
  fi
fi
export CUDACXX
echo "setup: CUDA compiler $CUDACXX ($("$CUDACXX" --version | tail -n 2 | head -n 1))"

cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release
cmake --build "$build_dir" -j "$jobs"

echo "setup: built $build_dir/quench; running quench generate on the built-in tiny model"
"$build_dir/quench" generate
echo "setup: and quench layer, one decoder layer's FP8 attention path on its built-in default"
"$build_dir/quench" layer
