#!/usr/bin/env bash
# Profiles one benchmark case's kernel with Nsight Compute (on the GPU machine) and writes the
# report's details page and its per-SASS-instruction source page (CSV) for
# tools/ncu_sass_stalls.py to summarise anywhere.
#
#   tools/ncu_profile_case.sh NAME KERNEL_REGEX BENCH "CASE SUBSTRING" [SKIP] [COUNT] [--real]
#
# NAME      output prefix (files land in $OUT, default /tmp/quench_ncu)
# SKIP      launches of matching kernels to skip first (warm-up; default 3), COUNT to profile (1)
# --real    time at the GPU's own clocks with warm caches (ncu otherwise locks the base clock
#           and flushes caches before every kernel: right for stall shares, wrong for durations)
# Environment: QUENCH_BIN (folder with quench_bench; default build).
set -uo pipefail
if [ $# -lt 4 ]; then sed -n 2,13p "$0"; exit 2; fi
name=$1 kernel=$2 bench=$3 case_filter=$4 skip=${5:-3} count=${6:-1}
out=${OUT:-/tmp/quench_ncu}
bin=${QUENCH_BIN:-build}
mkdir -p "$out"
controls=()
[ "${7:-}" = "--real" ] && controls=(--clock-control none --cache-control none)
ncu "${controls[@]}" --section SpeedOfLight --section LaunchStats --section Occupancy \
  --section WarpStateStats --section SourceCounters --section MemoryWorkloadAnalysis \
  --kernel-name "regex:$kernel" --launch-skip "$skip" --launch-count "$count" \
  -o "$out/$name" -f "$bin/quench_bench" --filter "$bench" --case "$case_filter" \
  > "$out/$name.log" 2>&1 || { echo "ncu failed; see $out/$name.log"; exit 1; }
ncu -i "$out/$name.ncu-rep" --page details > "$out/${name}_details.txt"
ncu -i "$out/$name.ncu-rep" --page source --print-source sass --csv > "$out/${name}_sass.csv"
grep -E "^  [a-z_].*\(|Duration|DRAM Throughput|Achieved Occupancy" "$out/${name}_details.txt"
