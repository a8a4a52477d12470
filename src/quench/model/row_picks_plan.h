// How a step's picks (RowPick) run where the logits are, pass by pass, as plain data: which
// buffer rows take an argmax, which draw, which rows are edited (and kept aside first where their
// logprobs are asked), where each logprobs row reads its logits and its token, and the pool of
// token ids the launches share. Host-only, so that the layout is tested on the CPU
// (tests/model/row_picks_plan_test.cc executes a plan with the CPU references); DeviceRowPicks
// launches it on the GPU.
//
// A step's logit rows are split into passes of per_pass rows (the lm_head's logits buffer holds
// one pass); logit row i of pass p sits at buffer row device_rows[i] - p x per_pass.
// The pool of int32 token ids: [argmax ids of buffer rows 0 .. most_argmax) | draws, in order
// (most_draws) | known tokens of kLogprobs rows, in order (most_known).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "quench/model/model_runner.h"

namespace quench {

struct RowPicksPass {
  size_t first = 0, end = 0;       // its logit rows
  int32_t argmax_rows = 0;         // buffer rows [0, argmax_rows) take an argmax, into the pool
  std::vector<int32_t> draw_rows;  // buffer rows drawn, in order
  std::vector<RowSampler> draw_samplers;
  // Edited rows: [their buffer rows | edit offsets (edit_rows + 1) | allowed-mask offsets into
  // allowed_bits (-1: none)], the edits, and the masks (each allowed_words long, zero-padded).
  std::vector<int32_t> edit_ints;
  std::vector<LogitEdit> edits;
  std::vector<uint32_t> allowed_bits;
  int32_t edit_rows = 0, allowed_words = 0;
  size_t edit_offsets_at() const { return static_cast<size_t>(edit_rows); }
  size_t allowed_offsets_at() const { return 2 * static_cast<size_t>(edit_rows) + 1; }
  // Buffer rows copied aside before the edits (edited rows whose logprobs are asked).
  std::vector<int32_t> saved_rows;
  // Rows wanting logprobs, in logit-row order: [their buffer rows | their tokens' places in the
  // pool]; each one's saved copy (-1: the buffer row itself); the prompt rows' known tokens; the
  // most top entries any of them asks.
  std::vector<int32_t> logprobs_rows_and_tokens;
  std::vector<int32_t> logprobs_saved;
  std::vector<int32_t> known_tokens;
  int32_t logprobs_top = 0;
};

// One pass's results as the launches return them: argmax ids of buffer rows [0, argmax_rows),
// the draws in order, and per logprobs row its logprob and launch_top() top entries.
struct RowPicksPassResults {
  std::vector<int32_t> argmax_ids, drawn, top_ids;
  std::vector<float> logprob, top_logprobs;
};

struct RowPicksPlan {
  std::vector<RowPicksPass> passes;
  std::vector<int32_t> device_rows;
  int32_t vocab = 0;
  // The largest pass's needs (the device scratch is sized for them before the first pass).
  size_t most_argmax = 0, most_draws = 0, most_known = 0, most_logprobs = 0, most_saved = 0,
         most_edit_ints = 0, most_edits = 0, most_words = 0;
  size_t full_rows = 0;  // kLogits rows, all passes

  int32_t buffer_row(size_t i, const RowPicksPass& pass) const {
    return device_rows[i] - static_cast<int32_t>(pass.first);
  }
  // A vocabulary smaller than the top entries asked has only that many (as in the reference).
  int32_t launch_top(const RowPicksPass& pass) const { return std::min(pass.logprobs_top, vocab); }
};

RowPicksPlan plan_row_picks(std::span<const RowPick> picks, std::span<const int32_t> device_rows,
                            int32_t per_pass, int32_t vocab);

// The step's picked ids and logprobs (in logit-row order; a row without a softmax, top id -1, has
// no top list) from each pass's results, into `out` (whose picked is sized here; its kLogits
// rows' logits are the caller's).
void collect_row_picks(const RowPicksPlan& plan, std::span<const RowPick> picks,
                       std::span<const RowPicksPassResults> results, StepLogits& out);

}  // namespace quench
