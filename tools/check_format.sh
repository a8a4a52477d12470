#!/usr/bin/env bash
# Checks that every tracked C++/CUDA source follows the checked-in .clang-format; lists the files
# that do not and how to fix them. Run from anywhere: bash tools/check_format.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null 2>&1; then
  echo "check_format: clang-format not found (tools/setup.sh installs it)" >&2
  exit 1
fi
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.cc' '*.h' '*.cu' '*.cuh')
else  # a source tree without git: every source below the project's folders
  mapfile -t files < <(find src tests bench tools \( -name '*.cc' -o -name '*.h' -o -name '*.cu' \
                       -o -name '*.cuh' \) | sort)
fi
unformatted=()
for f in "${files[@]}"; do
  clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || unformatted+=("$f")
done
if [ ${#unformatted[@]} -gt 0 ]; then
  echo "check_format: ${#unformatted[@]} of ${#files[@]} files differ from .clang-format:" >&2
  printf '  %s\n' "${unformatted[@]}" >&2
  echo "fix: clang-format -i <file> (then re-wrap any comment it split awkwardly)" >&2
  exit 1
fi
echo "check_format: ${#files[@]} files follow .clang-format ($(clang-format --version))"
