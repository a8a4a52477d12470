// Logit adjustments against values worked by hand (vLLM's definitions): logit_bias adds; the
// repetition penalty divides positive and multiplies negative logits of prompt and output tokens
// once each; frequency and presence penalties subtract per output occurrence and once per output
// token; min_tokens masks the end ids and stop ids, after the penalties; and on the engine:
// a biased token is what greedy picks, stop_token_ids end a request even with ignore_eos, and
// min_tokens holds them off.
#include "quench/engine/logits_processors.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "harness/expect_error.h"
#include "harness/tiny_engine.h"
#include "quench/engine/llm_engine.h"

namespace quench {
namespace {

// A request's adjustments applied to one row as the runner applies them: compiled to edits, then
// the reference's arithmetic.
void apply_logits_processors(std::span<float> logits, const SamplingParams& params,
                             std::span<const int32_t> prompt, std::span<const int32_t> output,
                             std::span<const int32_t> end_ids) {
  apply_logit_edits_reference(logits, logit_edits(params, prompt, output, end_ids));
}

TEST(LogitsProcessors, NothingAskedLeavesTheLogits) {
  SamplingParams p;
  EXPECT_FALSE(adjusts_logits(p));
  std::vector<float> logits = {1.0f, -2.0f, 3.0f};
  apply_logits_processors(logits, p, std::vector<int32_t>{0, 1}, std::vector<int32_t>{2}, {});
  EXPECT_EQ(logits, (std::vector<float>{1.0f, -2.0f, 3.0f}));
}

TEST(LogitsProcessors, BiasThenPenaltiesAsVllmDefinesThem) {
  SamplingParams p;
  p.logit_bias = {{4, 2.5f}};
  p.repetition_penalty = 2.0f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  EXPECT_TRUE(adjusts_logits(p));
  std::vector<float> logits = {4.0f, -1.0f, 6.0f, 8.0f, 1.0f, -3.0f};
  // Prompt tokens 0, 1 (1 twice: penalised once); output tokens 2, 2, 5.
  apply_logits_processors(logits, p, std::vector<int32_t>{0, 1, 1}, std::vector<int32_t>{2, 2, 5},
                          {});
  EXPECT_FLOAT_EQ(logits[0], 2.0f);                         // 4 / 2
  EXPECT_FLOAT_EQ(logits[1], -2.0f);                        // -1 * 2
  EXPECT_FLOAT_EQ(logits[2], 6.0f / 2 - 2 * 0.5f - 0.25f);  // repetition, then 2 x frequency
  EXPECT_FLOAT_EQ(logits[3], 8.0f);                         // not seen
  EXPECT_FLOAT_EQ(logits[4], 3.5f);                         // bias only
  EXPECT_FLOAT_EQ(logits[5], -3.0f * 2 - 0.5f - 0.25f);
}

TEST(LogitsProcessors, MinTokensMasksEndAndStopIdsUntilReached) {
  SamplingParams p;
  p.min_tokens = 2;
  p.stop_token_ids = {1};
  p.repetition_penalty = 3.0f;  // applied before the mask: the masked logit stays finite
  constexpr float kLowest = std::numeric_limits<float>::lowest();
  std::vector<float> logits = {1.0f, 9.0f, 9.0f, 0.5f};
  apply_logits_processors(logits, p, std::vector<int32_t>{1}, std::vector<int32_t>{3},
                          std::vector<int32_t>{2});
  EXPECT_EQ(logits[1], kLowest);
  EXPECT_EQ(logits[2], kLowest);
  EXPECT_FLOAT_EQ(logits[0], 1.0f);
  std::vector<float> later = {1.0f, 9.0f, 9.0f, 0.5f};
  apply_logits_processors(later, p, std::vector<int32_t>{1}, std::vector<int32_t>{3, 0},
                          std::vector<int32_t>{2});
  EXPECT_FLOAT_EQ(later[1], 3.0f);  // two tokens out: no mask, the repetition penalty only
  EXPECT_FLOAT_EQ(later[2], 9.0f);
}

TEST(LogitsProcessors, BadParametersNameTheField) {
  const auto with = [](auto change) {
    SamplingParams p;
    change(p);
    return p;
  };
  EXPECT_QUENCH_ERROR(with([](SamplingParams& p) { p.repetition_penalty = 0.0f; }).validate(),
                      {"repetition_penalty 0", "> 0"});
  EXPECT_QUENCH_ERROR(with([](SamplingParams& p) { p.frequency_penalty = 2.5f; }).validate(),
                      {"frequency_penalty 2.5", "[-2, 2]"});
  EXPECT_QUENCH_ERROR(with([](SamplingParams& p) { p.presence_penalty = -3.0f; }).validate(),
                      {"presence_penalty -3", "[-2, 2]"});
  EXPECT_QUENCH_ERROR(with([](SamplingParams& p) {
                        p.logit_bias = {{5, 101.0f}};
                      }).validate(),
                      {"logit_bias of token 5", "-100 to 100"});
  EXPECT_QUENCH_ERROR(with([](SamplingParams& p) { p.min_tokens = 17; }).validate(),
                      {"min_tokens 17", "max_tokens = 16"});
}

std::string tiny_model_dir(const std::string& name) {
  return testing_support::tiny_model_dir("quench_logits_processors_test", name);
}

TEST(LogitsProcessorsEngine, BiasStopIdsAndMinTokensOnTheEngine) {
  const EngineOptions o = testing_support::tiny_engine_options(tiny_model_dir("engine"));
  LlmEngine engine(o);
  const std::vector<int32_t> prompt = {5, 6, 7, 8};
  SamplingParams s = testing_support::greedy(6);
  s.ignore_eos = true;
  const std::vector<int32_t> free_run = engine.generate({prompt}, s)[0].output;
  // A token the free run never picks, biased to the top: greedy picks it every time.
  int32_t biased = 3;
  while (std::find(free_run.begin(), free_run.end(), biased) != free_run.end())
    ++biased;
  s.logit_bias = {{biased, 100.0f}};
  EXPECT_EQ(engine.generate({prompt}, s)[0].output, std::vector<int32_t>(6, biased));
  // The same token as a stop id ends the request at once, ignore_eos or not.
  s.stop_token_ids = {biased};
  const RequestOutput stopped = engine.generate({prompt}, s)[0];
  EXPECT_EQ(stopped.output, std::vector<int32_t>{biased});
  EXPECT_EQ(stopped.finish_reason, FinishReason::kStop);
  // min_tokens 3 masks it for the first three tokens, which are then the free run's.
  s.min_tokens = 3;
  const RequestOutput held = engine.generate({prompt}, s)[0];
  ASSERT_EQ(held.output.size(), 4u);
  EXPECT_EQ(std::vector<int32_t>(held.output.begin(), held.output.begin() + 3),
            std::vector<int32_t>(free_run.begin(), free_run.begin() + 3));
  EXPECT_EQ(held.output[3], biased);
  EXPECT_EQ(held.finish_reason, FinishReason::kStop);
  // Ids outside the vocabulary are refused.
  s.stop_token_ids = {engine.config().vocab_size};
  EXPECT_QUENCH_ERROR(engine.add_request(prompt, s), {"stop_token_ids holds", "vocabulary"});
}

}  // namespace
}  // namespace quench
