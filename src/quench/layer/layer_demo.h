// `quench layer`: the main job on a built-in default. Runs one decoder layer's attention path
// (RoPE + quantize + paged KV append, then attention with the kernels chosen per phase) on a
// mixed decode + prefill step, with an FP8 KV cache by default, and reports what a vLLM or
// TensorRT-LLM user wants to know: which kernels, the cache footprint, the accuracy cost of FP8
// against a bf16 KV cache and an fp32 reference, and the time per stage.
//
// It lives in the library (not src/cli/) so that the CPU tests can run it; src/cli only binds it
// to stdout/stderr.
#pragma once

#include <ostream>

#include "quench/layer/layer_demo_options.h"

namespace quench {

// argv[0] is "layer". Writes the report to `out`, warnings and errors to `err`. Returns the exit
// code: 0 done, 1 a run failed (quench::Error, e.g. no kernel serves the configuration or no
// GPU for --device gpu), 2 bad flags (the message lists the allowed values).
int run_layer_command(int argc, char** argv, std::ostream& out, std::ostream& err);

// The run itself, for parsed options; throws quench::Error.
void run_layer_demo(const LayerDemoOptions& options, std::ostream& out);

}  // namespace quench
