// `quench layer`: runs one decoder layer's attention path on a built-in default (Llama-3-8B
// attention, FP8 KV cache, a mixed decode + prefill step) on the GPU or the CPU, and prints the
// kernels, the accuracy against bf16 and an fp32 reference, and timings. The work lives in
// quench/layer/layer_demo.h; this binds it to the terminal.
#pragma once

namespace quench::cli {

// argv[0] is "layer". Returns the exit code: 0 done, 1 the run failed, 2 bad flags.
int run_layer_command(int argc, char** argv);

}  // namespace quench::cli
