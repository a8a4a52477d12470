#!/usr/bin/env bash
# Runs compute-sanitizer racecheck on a GPU test filter several times (its hazard reports can
# come and go between runs of the same binary: bench/LOG.md, forty-second session) and prints the
# SASS around every instruction a report names, so that an intermittent hazard can be read
# against the code on the GPU machine, with its cuobjdump (on the build machine, tools/sass.sh reads
# the same offsets from a build's object).
#
#   tools/racecheck_sites.sh BIN_DIR 'GTEST_FILTER' [RUNS] [CONTEXT]
#
# BIN_DIR holds quench_gpu_tests (an unpacked kit); RUNS default 3; CONTEXT instructions either
# side (default 12). Output in $OUT (default /tmp/quench_race): race_N.log per run, sites.txt
# (each "function+offset" reported, with how many runs named it), sass_sites.txt.
set -uo pipefail
if [ $# -lt 2 ]; then sed -n 2,11p "$0"; exit 2; fi
bin=$1 filter=$2 runs=${3:-3} context=${4:-12}
out=${OUT:-/tmp/quench_race}
mkdir -p "$out"
for ((i = 1; i <= runs; i++)); do
  compute-sanitizer --tool racecheck "$bin/quench_gpu_tests" --gtest_filter="$filter" \
    > "$out/race_$i.log" 2>&1
  echo "run $i: $(grep -c 'Race reported' "$out/race_$i.log") reports; $(tail -n 1 "$out/race_$i.log")"
done
# "Read access at void f<...>(args)+0xc490": the function's demangled signature and the offset,
# from both sides of each report.
grep -hoE "(Read|Write) access at .*\+0x[0-9a-f]+" "$out"/race_*.log |
  sed -E 's/^(Read|Write) access at //' | sort | uniq -c | sort -rn > "$out/sites.txt"
echo "$(wc -l < "$out/sites.txt") sites (count, site):"
head -n 20 "$out/sites.txt"
[ -s "$out/sites.txt" ] || exit 0
# The mangled name of each reported function (cuobjdump -fun takes it), by demangling the
# binary's function symbols.
cuobjdump -symbols "$bin/quench_gpu_tests" 2>/dev/null | grep -oE "_Z[A-Za-z0-9_]+" | sort -u |
  while read -r mangled; do printf '%s\t%s\n' "$mangled" "$(echo "$mangled" | c++filt)"; done \
  > "$out/symbols.tsv"
: > "$out/sass_sites.txt"
sed -E 's/^ *[0-9]+ //' "$out/sites.txt" | sed -E 's/\+0x[0-9a-f]+$//' | sort -u |
  while read -r function; do
    # racecheck writes template arguments as casts ((int)256, (bool)0), c++filt as literals.
    wanted=$(echo "$function" | sed -E 's/^void //; s/\(int\)//g; s/\(bool\)0/false/g;
      s/\(bool\)1/true/g; s/\(unsigned int\)([0-9]+)/\1u/g')
    mangled=$(awk -F'\t' -v f="$wanted" '$2 == f || $2 == "void " f { print $1; exit }' "$out/symbols.tsv")
    [ -z "$mangled" ] && { echo "no symbol for: $function" >> "$out/sass_sites.txt"; continue; }
    cuobjdump -sass -fun "$mangled" "$bin/quench_gpu_tests" > "$out/fn.sass" 2>&1
    grep -F "$function+" "$out/sites.txt" | grep -oE "\+0x[0-9a-f]+$" | sort -u | while read -r offset; do
      hex=$(printf '%04x' $((16#${offset#+0x})))
      echo "== $function$offset" >> "$out/sass_sites.txt"
      grep -n "/\*$hex\*/" "$out/fn.sass" | head -n 1 | cut -d: -f1 | while read -r line; do
        sed -n "$((line > context ? line - context : 1)),$((line + context))p" "$out/fn.sass"
      done >> "$out/sass_sites.txt"
    done
  done
echo "SASS around the sites: $out/sass_sites.txt ($(wc -l < "$out/sass_sites.txt") lines)"
