// PenaltyTokenSets against sets rebuilt from scratch over random histories (outputs that grow,
// shrink as rejected drafts do, and change mid-way), and logit_edits over them against the
// per-token map the engine used before (the oracle below): the same edits, field for field and
// bit for bit, in token order.
#include "quench/engine/penalty_token_sets.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <map>
#include <random>
#include <unordered_map>
#include <vector>

#include "quench/engine/logits_processors.h"

namespace quench {
namespace {

// The edits as built before the sets: one ordered-map entry per touched token.
RowLogitEdits oracle_edits(const SamplingParams& params, std::span<const int32_t> prompt,
                           std::span<const int32_t> output, std::span<const int32_t> end_ids) {
  std::map<int32_t, LogitEdit> by_token;
  const auto edit = [&](int32_t token) -> LogitEdit& {
    LogitEdit& e = by_token[token];
    e.token = token;
    return e;
  };
  for (const auto& [token, bias] : params.logit_bias)
    edit(token).bias += bias;
  if (params.repetition_penalty != 1.0f) {
    for (int32_t token : prompt)
      edit(token).repetition = params.repetition_penalty;
    for (int32_t token : output)
      edit(token).repetition = params.repetition_penalty;
  }
  if (params.frequency_penalty != 0.0f || params.presence_penalty != 0.0f) {
    std::unordered_map<int32_t, int32_t> counts;
    for (int32_t token : output)
      ++counts[token];
    for (const auto& [token, count] : counts)
      edit(token).subtract =
          params.frequency_penalty * static_cast<float>(count) + params.presence_penalty;
  }
  if (static_cast<int32_t>(output.size()) < params.min_tokens) {
    for (int32_t token : end_ids)
      edit(token).masked = 1;
    for (int32_t token : params.stop_token_ids)
      edit(token).masked = 1;
  }
  RowLogitEdits e;
  for (const auto& [token, one] : by_token)
    e.edits.push_back(one);
  return e;
}

void expect_same_edits(const RowLogitEdits& got, const RowLogitEdits& want) {
  ASSERT_EQ(got.edits.size(), want.edits.size());
  for (size_t i = 0; i < got.edits.size(); ++i) {
    const LogitEdit& g = got.edits[i];
    const LogitEdit& w = want.edits[i];
    SCOPED_TRACE(testing::Message() << "edit " << i << ", token " << w.token);
    EXPECT_EQ(g.token, w.token);
    EXPECT_EQ(std::bit_cast<uint32_t>(g.bias), std::bit_cast<uint32_t>(w.bias));
    EXPECT_EQ(std::bit_cast<uint32_t>(g.repetition), std::bit_cast<uint32_t>(w.repetition));
    EXPECT_EQ(std::bit_cast<uint32_t>(g.subtract), std::bit_cast<uint32_t>(w.subtract));
    EXPECT_EQ(g.masked, w.masked);
  }
}

void expect_sets_of(const PenaltyTokenSets& sets, std::span<const int32_t> prompt,
                    std::span<const int32_t> output) {
  std::vector<int32_t> want_prompt(prompt.begin(), prompt.end());
  std::ranges::sort(want_prompt);
  want_prompt.erase(std::unique(want_prompt.begin(), want_prompt.end()), want_prompt.end());
  EXPECT_TRUE(std::ranges::equal(sets.prompt_tokens(), want_prompt));
  std::map<int32_t, int32_t> counts;
  for (int32_t token : output)
    ++counts[token];
  ASSERT_EQ(sets.output_tokens().size(), counts.size());
  ASSERT_EQ(sets.output_counts().size(), counts.size());
  size_t i = 0;
  for (const auto& [token, count] : counts) {
    EXPECT_EQ(sets.output_tokens()[i], token);
    EXPECT_EQ(sets.output_counts()[i], count);
    ++i;
  }
  EXPECT_EQ(sets.output_size(), output.size());
  // The merge reads one past each list.
  EXPECT_EQ(sets.prompt_tokens().data()[sets.prompt_tokens().size()], PenaltyTokenSets::kEnd);
  EXPECT_EQ(sets.output_tokens().data()[sets.output_tokens().size()], PenaltyTokenSets::kEnd);
}

TEST(PenaltyTokenSets, FollowOutputsThatGrowShrinkAndChange) {
  std::mt19937 rng(7);
  for (int history = 0; history < 20; ++history) {
    // A small vocabulary, so that tokens repeat and counts go above 1.
    std::uniform_int_distribution<int32_t> token(0, 5 + history * 3);
    std::vector<int32_t> prompt(static_cast<size_t>(history * 7 % 40));
    for (int32_t& t : prompt)
      t = token(rng);
    std::vector<int32_t> output;
    PenaltyTokenSets sets;
    for (int step = 0; step < 60; ++step) {
      switch (rng() % 6) {
        case 0:  // rejected drafts: drop a few
          output.resize(output.size() - std::min<size_t>(output.size(), rng() % 4));
          break;
        case 1:  // a token mid-way replaced (never done by the engine; the sets must follow)
          if (!output.empty()) output[rng() % output.size()] = token(rng);
          break;
        case 2:  // several appended (accepted drafts)
          for (int k = 0; k < 3; ++k)
            output.push_back(token(rng));
          break;
        default:
          output.push_back(token(rng));
      }
      if (step == 30) prompt.push_back(token(rng));  // a changed prompt rebuilds its set
      sets.sync(prompt, output);
      SCOPED_TRACE(testing::Message() << "history " << history << ", step " << step);
      expect_sets_of(sets, prompt, output);
    }
  }
}

TEST(PenaltyTokenSets, EditsMatchThePerTokenMapOverRandomRequests) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  for (int request = 0; request < 200; ++request) {
    std::uniform_int_distribution<int32_t> token(0, 3 + request % 50);
    SamplingParams p;
    const int which = request % 8;
    if (which & 1) p.repetition_penalty = 1.0f + std::abs(uniform(rng));
    if (which & 2) p.frequency_penalty = uniform(rng);
    if (which & 4) p.presence_penalty = uniform(rng);
    for (int k = static_cast<int>(rng() % 4); k > 0; --k)  // repeated tokens add in order
      p.logit_bias.emplace_back(token(rng), uniform(rng));
    p.min_tokens = static_cast<int32_t>(rng() % 6);
    p.stop_token_ids = {token(rng), token(rng)};
    const std::vector<int32_t> end_ids = {token(rng)};
    std::vector<int32_t> prompt(rng() % 30), output;
    for (int32_t& t : prompt)
      t = token(rng);
    PenaltyTokenSets sets;
    for (int step = 0; step < 8; ++step) {
      sets.sync(prompt, output);
      SCOPED_TRACE(testing::Message() << "request " << request << ", step " << step);
      expect_same_edits(logit_edits(p, sets, end_ids), oracle_edits(p, prompt, output, end_ids));
      expect_same_edits(logit_edits(p, prompt, output, end_ids),
                        oracle_edits(p, prompt, output, end_ids));
      output.push_back(token(rng));
      if (step % 3 == 2) output.pop_back();  // a rejected draft
    }
  }
}

}  // namespace
}  // namespace quench
