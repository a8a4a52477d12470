// The device picks' layout (plan_row_picks) executed on the CPU with the references, launch by
// launch as DeviceRowPicks runs it (rows kept aside, edits in place, argmax into the pool, draws
// after them, logprobs reading their tokens through the pool), against ModelRunner's host picks
// of the same logits: every pick kind, edits with and without masks, logprobs on argmax / draw /
// prompt rows, steps of several lm_head passes (the last one short) and a graph's single pass
// over rows picked out of order. What the GPU adds is only the kernels, each tested against the
// same references.
#include "quench/model/row_picks_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "quench/core/error.h"
#include "quench/ops/argmax/argmax_reference.h"
#include "quench/ops/logprobs/row_logprobs_reference.h"
#include "quench/ops/sampling/sample_rows_reference.h"

namespace quench {
namespace {

constexpr int32_t kVocab = 97;

// A runner whose logits are a fixed table: logit row i gets table row logit_rows[i].
class TableRunner : public ModelRunner {
 public:
  explicit TableRunner(std::vector<float> table) : table_(std::move(table)) {}
  std::vector<float> forward(std::span<const int32_t>, const AttentionMetadata&,
                             std::span<const int32_t> logit_rows) override {
    std::vector<float> out;
    for (int32_t r : logit_rows)
      out.insert(out.end(), table_.begin() + static_cast<ptrdiff_t>(r) * kVocab,
                 table_.begin() + static_cast<ptrdiff_t>(r + 1) * kVocab);
    return out;
  }
  int64_t kv_cache_bytes() const override { return 0; }
  const AttentionBackendSelection& attention_selection() const override {
    fail("the table runner has no attention");
  }
  const char* device_name() const override { return "table"; }
  int32_t vocab_size() const override { return kVocab; }

 private:
  std::vector<float> table_;
};

// One pass run as the device runs it, over `buffer` (the pass's logits rows, edited in place).
RowPicksPassResults execute(const RowPicksPlan& plan, const RowPicksPass& pass,
                            std::vector<float>& buffer) {
  const auto vocab = static_cast<size_t>(plan.vocab);
  const auto row = [&](int32_t r) {
    return std::span<float>(buffer.data() + static_cast<size_t>(r) * vocab, vocab);
  };
  std::vector<std::vector<float>> saved;
  for (int32_t r : pass.saved_rows)
    saved.emplace_back(row(r).begin(), row(r).end());
  const int32_t n_edit = pass.edit_rows;
  for (int32_t k = 0; k < n_edit; ++k) {
    RowLogitEdits e;
    e.edits.assign(
        pass.edits.begin() + pass.edit_ints[pass.edit_offsets_at() + static_cast<size_t>(k)],
        pass.edits.begin() + pass.edit_ints[pass.edit_offsets_at() + static_cast<size_t>(k) + 1]);
    const int32_t mask = pass.edit_ints[pass.allowed_offsets_at() + static_cast<size_t>(k)];
    if (mask >= 0) {
      e.has_allowed = true;
      e.allowed_bits.assign(pass.allowed_bits.begin() + mask,
                            pass.allowed_bits.begin() + mask + pass.allowed_words);
    }
    apply_logit_edits_reference(row(pass.edit_ints[static_cast<size_t>(k)]), e);
  }
  RowPicksPassResults r;
  std::vector<int32_t> pool(plan.most_argmax + plan.most_draws + plan.most_known, -7);
  for (int32_t b = 0; b < pass.argmax_rows; ++b)
    argmax_rows_reference(row(b).data(), 1, plan.vocab, &pool[static_cast<size_t>(b)]);
  r.argmax_ids.assign(pool.begin(), pool.begin() + pass.argmax_rows);
  for (size_t k = 0; k < pass.draw_rows.size(); ++k) {
    pool[plan.most_argmax + k] =
        sample_row_reference(row(pass.draw_rows[k]), pass.draw_samplers[k]);
    r.drawn.push_back(pool[plan.most_argmax + k]);
  }
  for (size_t k = 0; k < pass.known_tokens.size(); ++k)
    pool[plan.most_argmax + plan.most_draws + k] = pass.known_tokens[k];
  const size_t n = pass.logprobs_rows_and_tokens.size() / 2;
  const int32_t top = plan.launch_top(pass);
  for (size_t k = 0; k < n; ++k) {
    const std::span<const float> logits =
        pass.logprobs_saved[k] >= 0
            ? std::span<const float>(saved[static_cast<size_t>(pass.logprobs_saved[k])])
            : row(pass.logprobs_rows_and_tokens[k]);
    const int32_t token = pool[static_cast<size_t>(pass.logprobs_rows_and_tokens[n + k])];
    const TokenLogprobs lp = row_logprobs_reference(logits, std::max(token, 0), top);
    r.logprob.push_back(token < 0 ? std::nanf("") : lp.logprob);
    for (int32_t t = 0; t < top; ++t) {
      const bool has = static_cast<size_t>(t) < lp.top.size();
      r.top_ids.push_back(has ? lp.top[static_cast<size_t>(t)].first : -1);
      r.top_logprobs.push_back(has ? lp.top[static_cast<size_t>(t)].second : std::nanf(""));
    }
  }
  return r;
}

void expect_same(const StepLogits& got, const StepLogits& want) {
  EXPECT_EQ(got.picked, want.picked);
  ASSERT_EQ(got.logprobs.size(), want.logprobs.size());
  for (size_t j = 0; j < want.logprobs.size(); ++j) {
    EXPECT_EQ(got.logprobs[j].logprob, want.logprobs[j].logprob) << "logprobs row " << j;
    EXPECT_EQ(got.logprobs[j].top, want.logprobs[j].top) << "logprobs row " << j;
  }
}

struct Step {
  std::vector<RowPick> picks;
  std::deque<RowLogitEdits> edits;
};

// Random picks of every kind for `rows` logit rows.
void random_picks(Step& step, size_t rows, std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> kind(0, 3), token(0, kVocab - 1), top(-1, 20);
  step.picks.assign(rows, RowPick{});
  for (size_t i = 0; i < rows; ++i) {
    RowPick& p = step.picks[i];
    p.kind = static_cast<RowPick::Kind>(kind(rng));
    if (p.kind == RowPick::Kind::kDraw)
      p.sampler =
          RowSampler{0.8f, i % 2 == 0 ? 5 : 0, 0.9f, 0.0f, 1000u + static_cast<uint32_t>(i)};
    if (p.kind == RowPick::Kind::kLogprobs) {
      p.token = token(rng);
      p.top = std::max(0, top(rng));
    } else if (p.kind != RowPick::Kind::kLogits) {
      p.top = top(rng);
      if (i % 3 != 0) {
        RowLogitEdits& e = step.edits.emplace_back();
        for (int32_t t = static_cast<int32_t>(i % 7); t < kVocab; t += 9)
          e.edits.push_back(
              LogitEdit{t, 0.5f, 1.3f, t % 2 == 0 ? 0.25f : 0.0f, t % 4 == 1 ? 1u : 0u});
        if (i % 2 == 0) {  // a mask of a length of its own: ids 0 .. 31 or 0 .. 63, odd ones
          e.has_allowed = true;
          e.allowed_bits.assign(i % 4 == 0 ? 1 : 2, 0xAAAAAAAAu);
        }
        p.edits = &e;
      }
    }
  }
}

TEST(RowPicksPlan, PassesExecutedLikeTheDeviceGiveTheHostPicks) {
  std::mt19937 rng(17);
  std::normal_distribution<float> logit(0.0f, 2.0f);
  for (const auto& [rows, per_pass] :
       std::vector<std::pair<size_t, int32_t>>{{21, 8}, {5, 512}, {16, 4}}) {
    std::vector<float> table(rows * kVocab);
    for (float& x : table)
      x = logit(rng);
    Step step;
    random_picks(step, rows, rng);
    std::vector<int32_t> logit_rows(rows);
    for (size_t i = 0; i < rows; ++i)
      logit_rows[i] = static_cast<int32_t>(i);
    TableRunner runner(table);
    const StepLogits want =
        runner.forward_for_sampling({}, AttentionMetadata{}, logit_rows, step.picks);

    const RowPicksPlan plan = plan_row_picks(step.picks, logit_rows, per_pass, kVocab);
    std::vector<RowPicksPassResults> results;
    for (const RowPicksPass& pass : plan.passes) {
      // The lm_head's pass: its logit rows in the buffer's first rows.
      std::vector<float> buffer(table.begin() + static_cast<ptrdiff_t>(pass.first * kVocab),
                                table.begin() + static_cast<ptrdiff_t>(pass.end * kVocab));
      results.push_back(execute(plan, pass, buffer));
    }
    StepLogits got;
    collect_row_picks(plan, step.picks, results, got);
    SCOPED_TRACE(testing::Message() << rows << " rows, passes of " << per_pass);
    EXPECT_EQ(plan.passes.size(),
              (rows + static_cast<size_t>(per_pass) - 1) / static_cast<size_t>(per_pass));
    expect_same(got, want);
    EXPECT_FALSE(want.logprobs.empty());  // the test's power: logprobs rows were there
  }
}

TEST(RowPicksPlan, AGraphsPassPicksRowsOutOfOrder) {
  std::mt19937 rng(23);
  std::normal_distribution<float> logit(0.0f, 2.0f);
  const int32_t batch = 12;
  std::vector<float> buffer(static_cast<size_t>(batch) * kVocab);
  for (float& x : buffer)
    x = logit(rng);
  const std::vector<int32_t> device_rows = {7, 2, 11, 0, 5, 9};
  Step step;
  random_picks(step, device_rows.size(), rng);
  TableRunner runner(buffer);
  const StepLogits want =
      runner.forward_for_sampling({}, AttentionMetadata{}, device_rows, step.picks);
  const RowPicksPlan plan = plan_row_picks(step.picks, device_rows, batch, kVocab);
  ASSERT_EQ(plan.passes.size(), 1u);
  const std::vector<RowPicksPassResults> results = {execute(plan, plan.passes[0], buffer)};
  StepLogits got;
  collect_row_picks(plan, step.picks, results, got);
  expect_same(got, want);
}

// Edits written by fill_edits while the forward runs (as the engine builds them) are the ones the
// picks use: the same results as edits written before the call; the fill runs once, its edits'
// tokens are checked after it, and what it throws reaches the caller.
TEST(ModelRunnerPicks, EditsFilledDuringTheForwardAreTheOnesApplied) {
  std::mt19937 rng(31);
  std::normal_distribution<float> logit(0.0f, 2.0f);
  const size_t rows = 24;
  std::vector<float> table(rows * kVocab);
  for (float& x : table)
    x = logit(rng);
  std::vector<int32_t> logit_rows(rows);
  for (size_t i = 0; i < rows; ++i)
    logit_rows[i] = static_cast<int32_t>(i);
  Step step;
  random_picks(step, rows, rng);
  ASSERT_FALSE(step.edits.empty());
  TableRunner runner(table);
  const StepLogits want =
      runner.forward_for_sampling({}, AttentionMetadata{}, logit_rows, step.picks);

  // The same picks pointing at empty edits until the fill.
  std::deque<RowLogitEdits> late(step.edits.size());
  std::vector<RowPick> late_picks = step.picks;
  size_t k = 0;
  for (RowPick& p : late_picks)
    if (p.edits != nullptr) p.edits = &late[k++];
  ASSERT_EQ(k, late.size());
  int fills = 0;
  const StepLogits got =
      runner.forward_for_sampling({}, AttentionMetadata{}, logit_rows, late_picks, [&] {
        ++fills;
        std::copy(step.edits.begin(), step.edits.end(), late.begin());
      });
  EXPECT_EQ(fills, 1);
  expect_same(got, want);
  // Without the fill the empty edits change nothing: the test's power (some edit moved a pick).
  for (RowLogitEdits& e : late)
    e = RowLogitEdits{};
  const StepLogits unedited =
      runner.forward_for_sampling({}, AttentionMetadata{}, logit_rows, late_picks);
  EXPECT_NE(unedited.picked, want.picked);

  const auto bad_token = [&] { late[0].edits = {LogitEdit{kVocab, 1.0f, 1.0f, 0.0f, 0u}}; };
  try {
    runner.forward_for_sampling({}, AttentionMetadata{}, logit_rows, late_picks, bad_token);
    ADD_FAILURE() << "an edit of token " << kVocab << " was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("outside the vocabulary"), std::string::npos) << e.what();
  }
  EXPECT_THROW(runner.forward_for_sampling({}, AttentionMetadata{}, logit_rows, late_picks,
                                           [] { fail("the fill failed"); }),
               Error);
}

}  // namespace
}  // namespace quench
