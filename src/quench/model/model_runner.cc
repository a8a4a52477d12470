#include "quench/model/model_runner.h"

#include <cmath>

#include "quench/core/error.h"
#include "quench/ops/argmax/argmax_reference.h"
#include "quench/ops/logprobs/row_logprobs_reference.h"
#include "quench/ops/sampling/logit_edits.h"
#include "quench/ops/sampling/sample_rows_reference.h"

namespace quench {

void check_forward_inputs(int32_t vocab_size, int32_t max_model_len, int32_t page_size,
                          std::span<const int32_t> token_ids, const AttentionMetadata& metadata,
                          std::span<const int32_t> logit_rows) {
  const int32_t t = metadata.num_tokens;
  QUENCH_REQUIRE(static_cast<int64_t>(token_ids.size()) == t, "forward: ", token_ids.size(),
                 " token ids for ", t, " metadata rows");
  QUENCH_REQUIRE(metadata.page_size == page_size, "forward: metadata page size ",
                 metadata.page_size, " != the cache's ", page_size);
  for (int32_t r = 0; r < t; ++r) {
    const int32_t id = token_ids[static_cast<size_t>(r)];
    QUENCH_REQUIRE(id >= 0 && id < vocab_size, "forward: token id ", id, " at row ", r,
                   " is outside the vocabulary [0, ", vocab_size, ")");
    QUENCH_REQUIRE(metadata.positions[static_cast<size_t>(r)] < max_model_len, "forward: position ",
                   metadata.positions[static_cast<size_t>(r)], " at row ", r,
                   " is >= max_model_len ", max_model_len);
  }
  for (int32_t row : logit_rows) {
    QUENCH_REQUIRE(row >= 0 && row < t, "forward: logit row ", row, " outside [0, ", t, ")");
  }
}

void check_row_picks(std::span<const RowPick> picks, size_t logit_rows, int32_t vocab_size) {
  QUENCH_REQUIRE(picks.size() == logit_rows, "forward: ", picks.size(), " picks for ", logit_rows,
                 " logit rows");
  for (size_t i = 0; i < picks.size(); ++i) {
    const RowPick& p = picks[i];
    if (p.kind == RowPick::Kind::kDraw) check_row_sampler(p.sampler);
    if (p.kind == RowPick::Kind::kLogprobs) {
      QUENCH_REQUIRE(p.token >= 0 && p.token < vocab_size, "forward: logprobs row ", i,
                     " asks for token ", p.token, ", outside the vocabulary [0, ", vocab_size, ")");
      QUENCH_REQUIRE(p.top >= 0 && p.top <= kMaxTopLogprobs, "forward: logprobs row ", i,
                     " asks for ", p.top, " top entries; allowed [0, ", kMaxTopLogprobs, "]");
    } else if (p.kind != RowPick::Kind::kLogits) {
      QUENCH_REQUIRE(p.top >= -1 && p.top <= kMaxTopLogprobs, "forward: row ", i, " asks for ",
                     p.top, " top entries; allowed [0, ", kMaxTopLogprobs, "], or -1 for none");
    }
    QUENCH_REQUIRE(
        p.edits == nullptr || p.kind == RowPick::Kind::kArgmax || p.kind == RowPick::Kind::kDraw,
        "forward: row ", i, " has logit edits but is not an argmax or a draw");
  }
}

void check_row_edits(std::span<const RowPick> picks, int32_t vocab_size) {
  for (size_t i = 0; i < picks.size(); ++i) {
    const RowPick& p = picks[i];
    if (p.edits == nullptr) continue;
    for (const LogitEdit& e : p.edits->edits)
      QUENCH_REQUIRE(e.token >= 0 && e.token < vocab_size, "forward: row ", i,
                     " edits the logit of token ", e.token, ", outside the vocabulary [0, ",
                     vocab_size, ")");
  }
}

StepLogits ModelRunner::forward_for_sampling(std::span<const int32_t> token_ids,
                                             const AttentionMetadata& metadata,
                                             std::span<const int32_t> logit_rows,
                                             std::span<const RowPick> picks,
                                             const std::function<void()>& fill_edits) {
  check_row_picks(picks, logit_rows.size(), vocab_size());
  const std::vector<float> all = forward(token_ids, metadata, logit_rows);
  if (fill_edits) fill_edits();
  check_row_edits(picks, vocab_size());
  const auto vocab = static_cast<size_t>(vocab_size());
  StepLogits step;
  step.picked.assign(logit_rows.size(), -1);
  std::vector<float> edited;  // an edited row's logits
  for (size_t i = 0; i < logit_rows.size(); ++i) {
    const float* row = all.data() + i * vocab;
    switch (picks[i].kind) {
      case RowPick::Kind::kArgmax:
      case RowPick::Kind::kDraw: {
        const std::span<const float> logits(row, vocab);
        // The pick from the edited row, the logprobs from the model's.
        std::span<const float> pick_from = logits;
        if (picks[i].edits != nullptr) {
          edited.assign(row, row + vocab);
          apply_logit_edits_reference(edited, *picks[i].edits);
          pick_from = edited;
        }
        if (picks[i].kind == RowPick::Kind::kArgmax) {
          argmax_rows_reference(pick_from.data(), 1, static_cast<int32_t>(vocab), &step.picked[i]);
        } else {
          step.picked[i] = sample_row_reference(pick_from, picks[i].sampler);
        }
        if (picks[i].top >= 0) {
          // -1: a non-finite logit, where the reference's row has no softmax either.
          step.logprobs.push_back(
              step.picked[i] < 0 ? TokenLogprobs{std::nanf(""), {}}
                                 : row_logprobs_reference(logits, step.picked[i], picks[i].top));
        }
        break;
      }
      case RowPick::Kind::kLogits:
        step.logits.insert(step.logits.end(), row, row + vocab);
        break;
      case RowPick::Kind::kLogprobs:
        step.logprobs.push_back(row_logprobs_reference(std::span<const float>(row, vocab),
                                                       picks[i].token, picks[i].top));
        break;
    }
  }
  return step;
}

}  // namespace quench
