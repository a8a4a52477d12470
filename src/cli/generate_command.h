// `quench generate`: loads a HuggingFace checkpoint (or writes and loads the built-in tiny model)
// and generates tokens for a batch of prompts through the engine (continuous batching, chunked
// prefill, paged FP8 KV cache), printing the startup lines, each request's tokens and the
// throughput. Prompts are token ids until the tokenizer lands.
#pragma once

namespace quench::cli {

// argv[0] is "generate". Returns the exit code: 0 done, 1 the run failed, 2 bad flags.
int run_generate_command(int argc, char** argv);

}  // namespace quench::cli
