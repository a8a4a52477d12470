#!/usr/bin/env bash
# Packs the engine's GPU checks for one device call: the quench, quench_gpu_tests and quench_bench
# binaries of the build folder (built here for sm_90a) and run.sh, which on the GPU machine
#   1. runs the GPU model runner's tests: its ops against the CPU references (ModelOpsGpu,
#      ArgmaxGpu), the GPU decoder against the CPU decoder (DeviceDecoderModelVsCpu, per-head
#      scales, decode CUDA graphs against eager steps), the engine on the GPU (DeviceEngine), the
#      last under compute-sanitizer memcheck; the graphs again under the arrival-counted merges;
#   1b. the weight-streaming linear kernel (the default for one-token layers): its tests and the
#      runner's with QUENCH_LINEAR=skinny, quench_bench --filter linear, and a 1B decode step
#      with each QUENCH_LINEAR choice;
#   1c. GPU sampling: the draws' tests with the top-k / top-p cutoffs in one CTA per row and
#      spread over several (QUENCH_SAMPLING_CUTOFFS), quench_bench --filter sampling (default);
#   2. runs quench generate --device gpu on the tiny model (FP8 against bf16 KV, token for token),
#      then on the Llama-3.2-1B shape (1 and 32 prompts of 1024 -> 128 tokens) for the step-time
#      split (host, runner, GPU stream);
#   3. measures the serving stack on the GPU: quench bench-serve --launch --device gpu on random
#      weights in Llama-3.2-1B's shape, FP8 KV (ENGINE_KIT_KV="fp8 bf16" for both), 1024 -> 128
#      tokens, concurrency 1 (decode CUDA graphs, then --enforce-eager, then sampled at
#      temperature 0.8, top-p 0.95) and 32 (greedy, then sampled, then with a repetition
#      penalty and logprobs: logit edits and logprobs picked on the device).
# Each step has a timeout, so that the call stays inside the device tool's 600 s (the whole kit
# took ~260 s on the H200 before section 1c; ENGINE_KIT_SHORT=1 for less).
# Everything it prints and the result JSONs land under $OUT.
#   tools/engine_gpu_kit.sh [BUILD_DIR] [KIT_DIR]   # defaults build, .gpu_bin/engine
# then, on the device (the `run` tool carrying KIT_DIR):
#   OUT=$OUT bash KIT_DIR/run.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
kit=${2:-.gpu_bin/engine}
mkdir -p "$kit"
for binary in quench quench_gpu_tests quench_bench; do
  [ -x "$build/$binary" ] || { echo "engine_gpu_kit: $build/$binary is missing; build first" >&2; exit 1; }
done
# quench needs the HTTP server library, which the GPU machine lacks (and its brotli, in case).
staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
cp "$build/quench" "$build/quench_gpu_tests" "$build/quench_bench" "$staging/"
mkdir -p "$staging/lib"
for lib in libcpp-httplib.so.0.11 libbrotlicommon.so.1 libbrotlidec.so.1 libbrotlienc.so.1; do
  cp -L "/usr/lib/x86_64-linux-gnu/$lib" "$staging/lib/"
done
# xz -9e: its 64 MiB window shares the binaries' common bytes (26 MB -> 10 MB).
tar -C "$staging" -cf - quench quench_gpu_tests quench_bench lib | xz -9e -T2 > "$kit/engine_bin.tar.xz"
cp tools/step_kernel_times.py tools/bench_ab.sh "$kit/"
cat > "$kit/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs on the GPU machine; see tools/engine_gpu_kit.sh.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here/out}
mkdir -p "$out" "$here/bin"
tar -C "$here/bin" -xJf "$here/engine_bin.tar.xz"
cd "$here/bin"
torch_cublas=$(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null || true)
export LD_LIBRARY_PATH="$here/bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}${torch_cublas:+:$torch_cublas}"
ldd ./quench ./quench_gpu_tests | grep "not found" && echo "run.sh: shared libraries missing (above)"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv
# ENGINE_KIT_DECODE=1 (~120 s): the decode attention GPU tests (every workspace mode: the merge
# kernel after the grid and on arrival counts, the last split CTA, one split) with the runner's
# pick tests, and compute-sanitizer racecheck on the split merges; then stop.
if [ -n "${ENGINE_KIT_DECODE:-}" ]; then
  echo "== decode GPU tests"
  timeout 240 ./quench_gpu_tests --gtest_filter='*Decode*:RowLogprobsGpu*:ApplyLogitEditsGpu*:DeviceEngine.Logprobs*:DeviceEngine.Draws*' > "$out/decode_tests.log" 2>&1
  grep -E "^\[  (FAILED|PASSED) |Failure|Which|Expected|tests ran" "$out/decode_tests.log" | tail -30
  echo "-- compute-sanitizer racecheck: the split merges"
  timeout 120 compute-sanitizer --tool racecheck ./quench_gpu_tests \
    --gtest_filter='DecodeAttentionGpuSplitMerge*' 2>&1 | tail -3
  echo "($SECONDS s)"
  exit 0
fi
# The values that ENGINE_KIT_STEP_AB and ENGINE_KIT_NCU give their switch (default "0 1"; e.g.
# ENGINE_KIT_VALUES="grid kernel" for QUENCH_DECODE_MERGE).
read -r -a values <<< "${ENGINE_KIT_VALUES:-0 1}"
# ENGINE_KIT_STEP_AB=VAR (an A/B switch of docs/kernel_switches.md, e.g. QUENCH_LINEAR_FUSION):
# the linear and runner tests, the runner's again under each value, then the one-token step
# with each value, two interleaved rounds (each quench generate takes ~25 s: it writes and loads
# the 1B model), and the linear benchmark's one-token cases; then stop (~200 s).
if [ -n "${ENGINE_KIT_STEP_AB:-}" ]; then
  var=$ENGINE_KIT_STEP_AB
  echo "== tests (default switches), then the runner's with $var=${values[*]}"
  timeout 150 ./quench_gpu_tests --gtest_filter='LinearSkinny*:ModelOpsGpu*:*DeviceDecoderModel*:DeviceEngine*' 2>&1 | \
    tee "$out/tests.log" | grep -E "^\[  (FAILED|PASSED) |Failure|Expected|Which is|error" | tail -20
  for value in "${values[@]}"; do
    echo "-- $var=$value"
    env "$var=$value" timeout 100 ./quench_gpu_tests --gtest_filter='*DeviceDecoderModel*:DeviceEngine*' 2>&1 | \
      grep -E "^\[  (FAILED|PASSED) |Failure|Expected|Which is|error" | tail -8
  done
  for round in 1 2; do
    for value in "${values[@]}"; do
      echo "-- $var=$value (round $round)"
      env "$var=$value" timeout 50 ./quench generate --device gpu \
        --builtin llama3.2-1b --max-model-len 2048 --max-num-seqs 64 --num-prompts 1 \
        --input-len 1024 --max-tokens 256 --ignore-eos --no-compare 2>&1 | grep -E "^(steps .*decode|error)"
    done
  done
  echo "-- quench_bench --filter linear (T=1)"
  timeout 90 ./quench_bench --filter linear --jsonl "$out/bench.jsonl" 2>&1 | grep "T=1 "
  exit 0
fi
# ENGINE_KIT_NCU=VAR (an A/B switch): the kernels of one decode step of the 1B shape under
# Nsight Compute with each value of VAR (tools/step_kernel_times.py: kernel time by name), and
# the step's wall time without the profiler beside each; ENGINE_KIT_PROMPTS=N (default 1) prompts
# of 1024 tokens decode together (32: a batched step).
if [ -n "${ENGINE_KIT_NCU:-}" ]; then
  var=$ENGINE_KIT_NCU
  prompts=${ENGINE_KIT_PROMPTS:-1}
  generate=(./quench generate --device gpu --builtin llama3.2-1b --max-model-len 2048
            --max-num-seqs "$prompts" --num-prompts "$prompts" --input-len 1024 --ignore-eos --no-compare)
  for value in "${values[@]}"; do
    echo "-- $var=$value"
    env "$var=$value" timeout 60 "${generate[@]}" --max-tokens 256 2>&1 | grep -E "^(steps .*decode|error)"
    env "$var=$value" timeout 200 ncu --graph-profiling node --clock-control none --cache-control none \
      --metrics gpu__time_duration.sum --csv "${generate[@]}" --max-tokens 4 > "$out/ncu_$value.csv" 2> "$out/ncu_$value.err"
    python3 "$here/step_kernel_times.py" "$out/ncu_$value.csv" || tail -5 "$out/ncu_$value.err"
  done
  exit 0
fi
# At most 8 files come back from $OUT: the test log, the benchmarks' JSON lines (linear, then
# sampling both ways), one JSON per serving run (5) and one file for the servers' logs; everything
# else (memcheck's summary too) goes to stdout.
echo "== 1. GPU model runner tests"
timeout 150 ./quench_gpu_tests --gtest_filter='ModelOpsGpu*:ArgmaxGpu*:RowLogprobsGpu*:ApplyLogitEditsGpu*:LinearSkinny*:*DeviceDecoderModel*:DeviceEngine*' 2>&1 | tee "$out/tests.log" | grep -E "^\[  (FAILED|PASSED|  OK) |Failure|Expected|Which is|rel_l2|error" | tail -40
# ENGINE_KIT_QUICK=1 (~300 s): after these tests, only the logprobs benchmark and an echo
# workload, the step split (2b) and serving at concurrency 1 and 32 (greedy; penalized + logprobs).
if [ -z "${ENGINE_KIT_QUICK:-}" ]; then
# The graphs again under the merges that wait on split arrivals: padding rows must not be waited on.
for merge in kernel auto; do
  echo "-- graphs with QUENCH_DECODE_MERGE=$merge"
  QUENCH_DECODE_MERGE=$merge timeout 60 ./quench_gpu_tests --gtest_filter='DeviceDecoderModelGraphs*' 2>&1 | \
    grep -E "^\[  (FAILED|PASSED|  OK) |Failure|error" | tail -4
done
# ENGINE_KIT_SHORT=1 (a call with little device time left): no memcheck, no eager serving run.
if [ -z "${ENGINE_KIT_SHORT:-}" ]; then
  timeout 90 compute-sanitizer --tool memcheck ./quench_gpu_tests --gtest_filter='DeviceEngine*' > /tmp/memcheck.log 2>&1
  tail -3 /tmp/memcheck.log
fi
echo "== 2. quench generate on the GPU (tiny model)"
timeout 40 ./quench generate --device gpu 2>&1 | tail -12
echo "== 1b. decode-size linear layers: the weight-streaming kernel (QUENCH_LINEAR=skinny)"
QUENCH_LINEAR=skinny timeout 60 ./quench_gpu_tests \
  --gtest_filter='LinearSkinny*:*DeviceDecoderModel*:DeviceEngine.Gen*' 2>&1 | \
  grep -E "^\[  (FAILED|PASSED) |Failure|Expected|Which" | tail -8
timeout 60 ./quench_bench --filter linear --jsonl "$out/bench.jsonl" 2>&1 | tail -34
for linear in cublas auto skinny; do
  echo "-- QUENCH_LINEAR=$linear: 1 prompt, 1024 -> 128"
  QUENCH_LINEAR=$linear timeout 40 ./quench generate --device gpu --builtin llama3.2-1b \
    --max-model-len 2048 --max-num-seqs 64 --num-prompts 1 --input-len 1024 --max-tokens 128 \
    --ignore-eos --no-compare 2>&1 | grep -E "^(steps|error)"
done
echo "== 1c. GPU sampling: the draws' tests and benchmark, cutoffs per CTA (block) and spread (split)"
for cutoffs in block split; do
  echo "-- QUENCH_SAMPLING_CUTOFFS=$cutoffs"
  QUENCH_SAMPLING_CUTOFFS=$cutoffs timeout 90 ./quench_gpu_tests \
    --gtest_filter='SampleRows*:*DeviceDecoderModelGraphs*:DeviceEngine.Draws*' 2>&1 | \
    grep -E "^\[  (FAILED|PASSED) |Failure|Expected|Which" | tail -8
  # The benchmark under the default only (the twenty-fifth session's call 1 has both).
  [ "$cutoffs" = split ] && QUENCH_SAMPLING_CUTOFFS=$cutoffs timeout 90 ./quench_bench \
    --filter sampling --jsonl "$out/bench.jsonl" 2>&1 | tail -26
done
fi  # ENGINE_KIT_QUICK
if [ -n "${ENGINE_KIT_QUICK:-}" ]; then
  # The pick kernels the quick run's serving relies on: logprobs beside the argmax and the host
  # path, then a loglikelihood workload (every prompt row's logprob, nothing generated).
  echo "== logprobs on the GPU beside the host path (quench_bench --filter logprobs)"
  timeout 60 ./quench_bench --filter logprobs --jsonl "$out/bench.jsonl" 2>&1 | tail -10
  echo "== a loglikelihood workload on the 1B shape: 64 echo requests of 2048 tokens, logprobs 1"
  timeout 120 ./quench bench-serve --launch --device gpu --builtin llama3.2-1b --max-model-len 4096 \
    --num-prompts 64 --random-input-len 2048 --random-output-len 1 --logprobs 1 --echo \
    --result-json "$out/serve_echo.json" 2>&1 | grep -E "Successful|Failed|duration|Total Token|error"
fi
echo "== 2b. where a step's time goes: quench generate on the Llama-3.2-1B shape, 1024 -> 128"
for n in 1 32; do
  echo "-- $n prompts"
  timeout 60 ./quench generate --device gpu --builtin llama3.2-1b --max-model-len 2048 --max-num-seqs 64 \
    --num-prompts $n --input-len 1024 --max-tokens 128 --ignore-eos --no-compare 2>&1 | grep -E "^(time|steps|error)"
done
echo "== 3. serving: Llama-3.2-1B shape, random weights, 1024 -> 128 tokens"
# The third word onwards: extra flags (the eager run; the sampled runs, whose rows the GPU draws
# instead of taking their argmax).
runs=("fp8 1" "fp8 1 --enforce-eager" "fp8 1 --temperature 0.8 --top-p 0.95" "fp8 32"
  "fp8 32 --temperature 0.8 --top-p 0.95" "fp8 32 --repetition-penalty 1.1 --logprobs 2")
[ -n "${ENGINE_KIT_SHORT:-}${ENGINE_KIT_QUICK:-}" ] &&
  runs=("fp8 1" "fp8 32" "fp8 32 --repetition-penalty 1.1 --logprobs 2")
for run in "${runs[@]}"; do
  set -- $run
  kv=$1 c=$2
  shift 2
  extra="$*"
  suffix=""
  case "$extra" in
    *--enforce-eager*) suffix=_eager ;;
    *--temperature*) suffix=_sampled ;;
    *--repetition-penalty*) suffix=_penalized_logprobs ;;
  esac
  name="serve_1b_${kv}_c${c}${suffix}"
  echo "-- $name"
  timeout 90 ./quench bench-serve --launch --device gpu --builtin llama3.2-1b --kv-cache-dtype "$kv" \
    --max-model-len 2048 --max-num-seqs 64 --num-prompts $((c * 2 + 2)) --random-input-len 1024 \
    --random-output-len 128 --max-concurrency "$c" $extra --result-json "$out/$name.json" \
    2> >(sed "s/^/[$name] /" >> "$out/servers.err") | \
    grep -E "Successful|Failed|failed|duration|Output token|Mean TTFT|Mean TPOT|Mean ITL"
  grep -E "\[$name\].*(CUDA graphs|KV cache|error|rror)" "$out/servers.err" | tail -4
done
RUN
chmod +x "$kit/run.sh"
ls -la "$kit"
echo "engine_gpu_kit: carry [\"$kit\"] and run: OUT=\$OUT bash $kit/run.sh"
