// `quench generate` on the built-in tiny model: the startup lines users look for, one line per
// request with the asked-for number of tokens, a summary for scripts; bad flags exit 2 naming the
// allowed values, a bad checkpoint exits 1 naming it.
#include "quench/engine/generate_command.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "harness/command_run.h"
#include "quench/core/error.h"
#include "quench/model/device_decoder_model.h"
#include "quench/tokenizer/tiny_tokenizer.h"
#include "quench/tokenizer/tokenizer.h"

namespace quench {
namespace {

using testing_support::CommandRun;

CommandRun run_generate(std::vector<std::string> args) {
  return testing_support::run_command(run_generate_command, "generate", std::move(args));
}

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1))
    ++n;
  return n;
}

TEST(GenerateCommand, BuiltInModelReportsStartupRequestsAndSummary) {
  const CommandRun run = run_generate({"--num-prompts", "3", "--input-len", "20", "--max-tokens",
                                       "5", "--max-num-batched-tokens", "32"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("model      LlamaForCausalLM, 2 layers"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("KV cache   fp8_e4m3"), std::string::npos);
  EXPECT_NE(run.out.find("max concurrency"), std::string::npos);
  EXPECT_NE(run.out.find("prefill  cpu"), std::string::npos);
  EXPECT_EQ(count(run.out, "finish length  output: \""), 3u);
  EXPECT_NE(run.out.find("summary: device=cpu kv=fp8_e4m3 requests=3 prompt_tokens=60 "
                         "output_tokens=15"),
            std::string::npos)
      << run.out;
  // The FP8 run is compared with a bf16-cache run of the same requests.
  EXPECT_NE(run.out.find("vs bf16 KV "), std::string::npos);
  EXPECT_NE(run.out.find(" identical_vs_bf16="), std::string::npos);
  // The FP8 cache without checkpoint scales says so.
  EXPECT_NE(run.err.find("no k_scale"), std::string::npos);
}

TEST(GenerateCommand, PromptIdsAndBf16Cache) {
  const CommandRun run =
      run_generate({"--prompt-ids", "5,6,7;8", "--max-tokens", "2", "--kv-cache-dtype", "bf16"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("request 0  prompt 3 tokens"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("request 1  prompt 1 tokens"), std::string::npos);
  EXPECT_EQ(run.out.find("vs bf16 KV"), std::string::npos);  // nothing to compare a bf16 cache with
  EXPECT_NE(run.out.find("summary: device=cpu kv=bf16 requests=2 prompt_tokens=4 output_tokens=4"),
            std::string::npos);
}

TEST(GenerateCommand, TextPromptGoesThroughTheTokenizer) {
  const CommandRun run = run_generate({"--prompt", "the cache", "--max-tokens", "3"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const size_t tokens =
      Tokenizer::from_json(tiny_tokenizer_json(512), "tiny").encode("the cache").size();
  EXPECT_NE(run.out.find(str_cat("request 0  prompt ", tokens, " tokens  finish ")),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("output: \""), std::string::npos);
  EXPECT_EQ(run_generate({"--prompt", "x", "--prompt-ids", "1"}).exit_code, 2);
}

TEST(GenerateCommand, BadFlagsExit2AndBadModelsExit1) {
  CommandRun run = run_generate({"--kv-cache-dtype", "int4"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("fp8_e5m2"), std::string::npos) << run.err;
  run = run_generate({"--prompt-ids", "1,,2"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("empty token id"), std::string::npos) << run.err;
  run = run_generate({"--block-size", "24"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("16, 32, 64"), std::string::npos) << run.err;
  for (const char* bad : {"0", "1.5", "-1", "nan", "most"}) {
    run = run_generate({"--gpu-memory-utilization", bad});
    EXPECT_EQ(run.exit_code, 2) << bad;
    EXPECT_NE(run.err.find("--gpu-memory-utilization"), std::string::npos) << run.err;
  }
  run = run_generate({"--device", "tpu"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("auto, cpu, gpu"), std::string::npos) << run.err;
  if (!cuda_device_available()) {  // asked for a GPU where there is none: a clear run failure
    run = run_generate({"--device", "gpu"});
    EXPECT_EQ(run.exit_code, 1);
    EXPECT_NE(run.err.find("GPU model runner"), std::string::npos) << run.err;
  }
  run = run_generate({"--prompt-ids", "1,9999"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("9999"), std::string::npos) << run.err;
  run = run_generate({"--model", "/nonexistent/model"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("/nonexistent/model"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace quench
