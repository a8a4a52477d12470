// `quench generate`: loads a HuggingFace checkpoint (or writes and loads the built-in tiny model,
// tiny_model.h) and generates tokens for a batch of prompts through the engine (continuous
// batching, chunked prefill, paged FP8 KV cache), printing the startup lines users look for
// (model, weights, KV cache capacity and concurrency, the attention kernels), each request's
// tokens and the throughput, then a `summary:` line for scripts. Prompts are token ids until the
// tokenizer lands; without them the prompts are random (the serving benchmark's random dataset).
#pragma once

#include <ostream>

namespace quench {

const char* generate_command_usage();

// argv[0] is "generate". Returns the exit code: 0 done, 1 the run failed (load error, ...),
// 2 bad flags. Errors and warnings go to err.
int run_generate_command(int argc, char** argv, std::ostream& out, std::ostream& err);

}  // namespace quench
