// n-gram speculative decoding: the proposer finds the most recent earlier occurrence of the
// longest suffix it can; the engine's greedy tokens with drafts verified in multi-token decode
// rows equal those without, bit for bit (the CPU decoder computes each query row alone), while
// drafts are actually accepted; through preemption, max_tokens and max_model_len; and the flag's
// JSON is checked field by field.
#include <gtest/gtest.h>

#include <vector>

#include "harness/expect_error.h"
#include "harness/tiny_engine.h"
#include "quench/engine/engine_flags.h"
#include "quench/engine/llm_engine.h"
#include "quench/engine/ngram_proposer.h"
#include "quench/model/tiny_model.h"

namespace quench {
namespace {

NgramSpeculation lookup(int32_t k, int32_t min_n, int32_t max_n) {
  NgramSpeculation s;
  s.num_speculative_tokens = k;
  s.prompt_lookup_min = min_n;
  s.prompt_lookup_max = max_n;
  return s;
}

TEST(NgramProposer, LongestSuffixFirstMostRecentOccurrence) {
  // "7 8 9" occurs twice before the end; the later one is followed by 4 4.
  const std::vector<int32_t> t = {7, 8, 9, 1, 2, 7, 8, 9, 4, 4, 5, 7, 8, 9};
  EXPECT_EQ(propose_ngram_drafts(t, lookup(3, 1, 3), 3), (std::vector<int32_t>{4, 4, 5}));
  // Drafts stop at the end of the tokens and at max_drafts.
  EXPECT_EQ(propose_ngram_drafts(t, lookup(3, 1, 3), 1), (std::vector<int32_t>{4}));
  const std::vector<int32_t> short_tail = {5, 6, 1, 5, 6};
  EXPECT_EQ(propose_ngram_drafts(short_tail, lookup(4, 1, 2), 4), (std::vector<int32_t>{1, 5, 6}));
  // Only a shorter suffix matches: n falls back to it; below prompt_lookup_min nothing.
  const std::vector<int32_t> one = {3, 9, 2, 1, 0, 9};
  EXPECT_EQ(propose_ngram_drafts(one, lookup(2, 1, 3), 2), (std::vector<int32_t>{2, 1}));
  EXPECT_TRUE(propose_ngram_drafts(one, lookup(2, 2, 3), 2).empty());
  EXPECT_TRUE(propose_ngram_drafts(std::vector<int32_t>{1}, lookup(2, 1, 3), 2).empty());
  EXPECT_TRUE(propose_ngram_drafts(t, lookup(3, 1, 3), 0).empty());
}

TEST(NgramProposer, ConfigOutOfRangeIsAnError) {
  EXPECT_QUENCH_ERROR(lookup(8, 1, 4).validate(), {"num_speculative_tokens 8", "[0, 7]"});
  EXPECT_QUENCH_ERROR(lookup(2, 3, 2).validate(), {"prompt_lookup_min 3"});
  EXPECT_QUENCH_ERROR(lookup(2, 0, 2).validate(), {"1 <= min <= max"});
}

TEST(NgramProposer, SpeculativeConfigJsonAsVllmSpellsIt) {
  const NgramSpeculation s = parse_speculative_config(
      R"({"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 3})");
  EXPECT_EQ(s.num_speculative_tokens, 5);
  EXPECT_EQ(s.prompt_lookup_max, 3);
  EXPECT_EQ(s.prompt_lookup_min, 1);
  EXPECT_QUENCH_ERROR(
      parse_speculative_config(R"({"method": "eagle", "num_speculative_tokens": 2})"),
      {"eagle", "allowed: ngram"});
  EXPECT_QUENCH_ERROR(parse_speculative_config(R"({"method": "ngram"})"),
                      {"num_speculative_tokens is required"});
  EXPECT_QUENCH_ERROR(parse_speculative_config(R"({"method": "ngram", "k": 2})"),
                      {"unknown field 'k'"});
  EXPECT_QUENCH_ERROR(
      parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": "4"})"),
      {"must be an integer"});
  EXPECT_QUENCH_ERROR(parse_speculative_config("{method"), {"not JSON"});
}

using testing_support::greedy;

EngineOptions tiny_options(const std::string& name) {
  EngineOptions o = testing_support::tiny_engine_options(
      testing_support::tiny_model_dir("quench_ngram_speculation_test", name));
  o.max_model_len = 200;
  return o;
}

// Prompts with repeated spans (drafts find matches at once) and without.
std::vector<std::vector<int32_t>> prompts() {
  std::vector<std::vector<int32_t>> p;
  std::vector<int32_t> repeated;
  for (int32_t r = 0; r < 6; ++r)
    for (int32_t t : {40, 41, 42, 43, 44, 45, 46})
      repeated.push_back(t);
  p.push_back(repeated);
  for (int32_t len : {5, 70, 1, 33}) {
    std::vector<int32_t> ids;
    for (int32_t i = 0; i < len; ++i)
      ids.push_back(6 + (i * 37 + len * 11) % 500);
    p.push_back(ids);
  }
  return p;
}

void expect_same_tokens(EngineOptions o, const SamplingParams& s, int64_t* accepted = nullptr,
                        bool expect_drafts = true) {
  LlmEngine plain(o);
  const std::vector<RequestOutput> want = plain.generate(prompts(), s);
  o.speculation = lookup(4, 1, 3);
  LlmEngine spec(o);
  const std::vector<RequestOutput> got = spec.generate(prompts(), s);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].output, want[i].output) << "prompt " << i;
    EXPECT_EQ(got[i].finish_reason, want[i].finish_reason) << "prompt " << i;
    // Logprobs, where asked, come from each verified row: those of the plain engine's rows.
    ASSERT_EQ(got[i].output_logprobs.size(), want[i].output_logprobs.size()) << "prompt " << i;
    for (size_t t = 0; t < got[i].output_logprobs.size(); ++t) {
      EXPECT_EQ(got[i].output_logprobs[t].logprob, want[i].output_logprobs[t].logprob)
          << "prompt " << i << " token " << t;
      EXPECT_EQ(got[i].output_logprobs[t].top, want[i].output_logprobs[t].top)
          << "prompt " << i << " token " << t;
    }
  }
  if (expect_drafts) {
    EXPECT_GT(spec.spec_drafted_tokens(), 0);
  }
  EXPECT_LE(spec.spec_accepted_tokens(), spec.spec_drafted_tokens());
  if (accepted != nullptr) *accepted = spec.spec_accepted_tokens();
}

TEST(NgramSpeculation, GreedyTokensAreBitForBitThoseWithoutDrafts) {
  int64_t accepted = 0;
  expect_same_tokens(tiny_options("same"), greedy(60), &accepted);
  // The test's power: drafts were taken, not only proposed (a greedy random model loops).
  EXPECT_GT(accepted, 20);
}

TEST(NgramSpeculation, MaxTokensAndMaxModelLenCutDraftsShort) {
  EngineOptions o = tiny_options("limits");
  {
    // Few tokens: drafts, if any come, must stop at max_tokens.
    SCOPED_TRACE("max_tokens 9");
    expect_same_tokens(o, greedy(9), nullptr, false);
  }
  o.max_model_len = 80;  // the 70-token prompt reaches it after 10 tokens
  SCOPED_TRACE("max_model_len 80");
  expect_same_tokens(o, greedy(60));
}

TEST(NgramSpeculation, PreemptionAndAnOddBudgetChangeNothing) {
  EngineOptions o = tiny_options("preempt");
  o.num_kv_pages = 17;  // 256 tokens: less than the batch needs at its peak
  o.max_num_batched_tokens = 13;
  expect_same_tokens(o, greedy(50));
}

TEST(NgramSpeculation, GreedyRequestsWithLogprobsAreDraftedAndScoredRowByRow) {
  SamplingParams s = greedy(40);
  s.logprobs = 3;
  int64_t accepted = 0;
  expect_same_tokens(tiny_options("logprobs"), s, &accepted);
  EXPECT_GT(accepted, 10);
}

TEST(NgramSpeculation, SampledAndAdjustedRequestsAreNotDrafted) {
  EngineOptions o = tiny_options("sampled");
  o.speculation = lookup(4, 1, 3);
  LlmEngine engine(o);
  SamplingParams s = greedy(20);
  s.temperature = 0.8f;
  s.seed = 3;
  engine.generate(prompts(), s);
  s = greedy(20);
  s.logit_bias = {{7, 0.5f}};
  engine.generate(prompts(), s);
  EXPECT_EQ(engine.spec_drafted_tokens(), 0);
}

}  // namespace
}  // namespace quench
