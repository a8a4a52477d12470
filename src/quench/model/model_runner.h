// What the engine asks of a model: one forward step over the rows of a batch, whatever runs it.
// DecoderModel runs it on the CPU (the reference path), DeviceDecoderModel on the GPU.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "quench/attention/attention_kernel_selection.h"
#include "quench/attention/attention_metadata.h"
#include "quench/ops/logprobs/token_logprobs.h"
#include "quench/ops/sampling/logit_edits.h"
#include "quench/ops/sampling/row_sampling.h"

namespace quench {

// What the engine needs of one logit row: its logits (the host adjusts or samples them), only its
// largest logit's id (greedy), a draw (row_sampling.h) made where the logits are, or a known
// token's log-probability with the row's top entries (a prompt row's prompt_logprobs). An argmax
// or a draw may ask for its token's log-probability and top entries too (a request's
// `logprobs`). All but the first send a few numbers to the host instead of a vocabulary of
// floats.
struct RowPick {
  enum class Kind : uint8_t { kLogits, kArgmax, kDraw, kLogprobs };
  Kind kind = Kind::kLogits;
  RowSampler sampler;  // kDraw: the draw's parameters and key
  int32_t token = 0;   // kLogprobs: the token whose log-probability is asked, in [0, vocab)
  // kLogprobs (>= 0), kArgmax and kDraw (-1: no logprobs): the top entries wanted, in
  // [0, kMaxTopLogprobs]. Ignored for kLogits.
  int32_t top = -1;
  // kArgmax and kDraw: the request's logit adjustments, applied before the pick (the logprobs
  // stay those of the model's logits); null for none. Must outlive the forward.
  const RowLogitEdits* edits = nullptr;
  bool wants_logprobs() const {
    return kind == Kind::kLogprobs || (kind != Kind::kLogits && top >= 0);
  }
};

// A step's logits as the engine samples from them.
struct StepLogits {
  // [kLogits rows, vocab_size] fp32: the full logits of those rows, in logit-row order.
  std::vector<float> logits;
  // [logit rows]: for a kArgmax row the id of its largest logit (the lowest among equals), for a
  // kDraw row the drawn id; -1 where the row holds a non-finite logit, and for kLogits and
  // kLogprobs rows.
  std::vector<int32_t> picked;
  // [rows that want logprobs (RowPick::wants_logprobs)], in logit-row order: as
  // row_logprobs_reference gives them for the row's token (a kArgmax or kDraw row's picked one;
  // a NaN logprob and no top entries where the row holds a non-finite logit).
  std::vector<TokenLogprobs> logprobs;
  // The step's time on the GPU's stream, from its inputs' upload to the last copy back (ms); 0
  // on the CPU. Beside the step's wall time it says how much of a step the host keeps the GPU
  // waiting.
  double device_ms = 0.0;
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;
  // token_ids[r] is row r's token at metadata.positions[r], stored at metadata.slot_mapping[r];
  // returns fp32 logits [logit_rows.size(), vocab_size] on the host.
  virtual std::vector<float> forward(std::span<const int32_t> token_ids,
                                     const AttentionMetadata& metadata,
                                     std::span<const int32_t> logit_rows) = 0;
  // forward(), except that each logit row comes back as its pick asks (one pick per logit row).
  // This default picks on the host (argmax_rows_reference, sample_row_reference,
  // row_logprobs_reference); the GPU runner picks on the device, with the same results (logprobs
  // to fp32 rounding of their sums).
  // `fill_edits`, where given, writes the picks' logit edits (what their `edits` point to): the
  // runner calls it once the forward is under way and reads the edits only after it returns, so
  // that on the GPU the host builds a batch's edits (a penalized row's thousand prompt tokens,
  // JSON mode's masks) while the device runs the layers, not before it starts them.
  virtual StepLogits forward_for_sampling(std::span<const int32_t> token_ids,
                                          const AttentionMetadata& metadata,
                                          std::span<const int32_t> logit_rows,
                                          std::span<const RowPick> picks,
                                          const std::function<void()>& fill_edits = {});
  virtual int64_t kv_cache_bytes() const = 0;  // K and V of every layer
  virtual const AttentionBackendSelection& attention_selection() const = 0;
  virtual const char* device_name() const = 0;  // "cpu" or "gpu"
  virtual int32_t vocab_size() const = 0;
};

// The checks every runner makes before a step: one token id per metadata row, ids inside the
// vocabulary, positions below max_model_len, the cache's page size, logit rows inside the batch.
// Throws quench::Error naming the row and the limit.
void check_forward_inputs(int32_t vocab_size, int32_t max_model_len, int32_t page_size,
                          std::span<const int32_t> token_ids, const AttentionMetadata& metadata,
                          std::span<const int32_t> logit_rows);

// The picks' own checks: one per logit row, draws' samplers (check_row_sampler), logprobs rows'
// token inside the vocabulary and top in [0, kMaxTopLogprobs] (argmax and draw rows: -1 too),
// edits only on argmax and draw rows. Throws quench::Error naming the row.
void check_row_picks(std::span<const RowPick> picks, size_t logit_rows, int32_t vocab_size);

// The edits' tokens inside the vocabulary (once they are filled). Throws quench::Error naming
// the row and the token.
void check_row_edits(std::span<const RowPick> picks, int32_t vocab_size);

}  // namespace quench
