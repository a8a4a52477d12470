// The picks of one step's logit rows on the GPU (RowPick): argmax rows, draws (each after its
// request's logit edits, with the model's logits kept aside first where its logprobs are asked),
// and log-probability rows (prompt rows' known tokens, and argmax or draw rows that ask for their
// picked token's), computed from the lm_head's logits where they are, pass by pass: a step with
// more logit rows than the logits buffer holds runs the lm_head in passes of per_pass rows over it
// (DeviceDecoderModel::logit_rows_per_pass). Only the results cross to the host, and kLogits rows'
// logits. Internal to the GPU model runner (device_decoder_model.cc).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "quench/model/device_step_memory.h"
#include "quench/model/model_runner.h"

namespace quench {

class DeviceRowPicks {
 public:
  DeviceRowPicks() = default;
  DeviceRowPicks(const DeviceRowPicks&) = delete;
  DeviceRowPicks& operator=(const DeviceRowPicks&) = delete;

  // Plans a step: picks[i] for logit row i, whose logits are row device_rows[i] - first of its
  // pass's buffer, pass p holding rows [p * per_pass, (p + 1) * per_pass). Sizes the device
  // scratch for the largest pass now (a buffer that grows frees the old one, which a pass before
  // may still be reading). The spans must outlive finish().
  void begin_step(std::span<const RowPick> picks, std::span<const int32_t> device_rows,
                  int32_t per_pass, int32_t vocab);
  int32_t passes() const { return static_cast<int32_t>(plans_.size()); }
  // Enqueues pass p's picks over its logits (after its lm_head, on the same stream) and the copies
  // of their results to the host.
  // The edits change the buffer's rows in place.
  void enqueue_pass(int32_t pass, float* logits, cudaStream_t stream);
  // After the stream's synchronize: the step's picks, logprobs and kLogits rows.
  StepLogits finish();

 private:
  struct Plan {
    size_t first = 0, end = 0;  // its logit rows
    int32_t argmax_rows = 0;    // buffer rows [0, argmax_rows) take an argmax
    std::vector<int32_t> draw_rows;
    std::vector<RowSampler> draw_samplers;
    // Rows wanting logprobs: their buffer rows, then their tokens' places in the pool (one
    // upload); prompt rows' tokens; the most top entries any of them asks.
    std::vector<int32_t> logprobs_rows_and_tokens;
    std::vector<int32_t> known_tokens;
    int32_t logprobs_top = 0;
    // Edited rows: [their buffer rows | edit offsets (n + 1) | allowed-mask offsets (-1: none)],
    // the edits and the masks' words, and for each logprobs row its saved copy (-1: none: the
    // buffer row is read).
    std::vector<int32_t> edit_ints;
    std::vector<LogitEdit> edits;
    std::vector<uint32_t> allowed_bits;
    int32_t edit_rows = 0, allowed_words = 0;
    std::vector<int32_t> saved_rows;  // buffer rows kept aside, in logprobs-row order of use
    std::vector<int32_t> logprobs_saved;
    std::vector<const float*> logprobs_row_logits;  // uploaded at enqueue time
    // Results, filled by the copies back.
    std::vector<int32_t> argmax_ids, drawn, top_ids;
    std::vector<float> logprob, top_logprobs;
  };
  // A vocabulary smaller than the top entries asked has only that many (as in the reference).
  int32_t launch_top(const Plan& plan) const { return std::min(plan.logprobs_top, vocab_); }
  int32_t buffer_row(size_t i, const Plan& plan) const {
    return device_rows_[i] - static_cast<int32_t>(plan.first);
  }

  std::span<const RowPick> picks_;
  std::span<const int32_t> device_rows_;
  int32_t vocab_ = 0;
  std::vector<Plan> plans_;
  StepLogits out_;
  size_t logits_written_ = 0;  // kLogits rows copied so far
  // The pool of tokens a logprobs launch reads: argmax ids [most_argmax_], draws [most_draws_],
  // prompt rows' known tokens.
  size_t most_argmax_ = 0, most_draws_ = 0, most_logprobs_ = 0;
  size_t most_saved_ = 0;   // rows kept aside before their edits (saved_)
  int64_t generation_ = 0;  // growth here concerns no graph: picks run after a replay
  GrowingBuffer pool_{&generation_}, draw_rows_{&generation_}, draw_samplers_{&generation_},
      draw_workspace_{&generation_}, logprobs_upload_{&generation_}, logprob_{&generation_},
      top_ids_{&generation_}, top_logprobs_{&generation_}, row_logits_{&generation_},
      edit_ints_{&generation_}, edits_{&generation_}, allowed_bits_{&generation_},
      saved_{&generation_};
};

}  // namespace quench
