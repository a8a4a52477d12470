// GPU log-probabilities per logit row, as row_logprobs_reference: a token's log-softmax and the
// row's top entries, so that a prompt-logprobs row sends 1 + 2 x top numbers to the host instead
// of a vocabulary of floats (and the host no longer sums a vocabulary of exponentials per row).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace quench {

// Which kernel a launch takes. kAuto: launches of at most kRowLogprobsClusterRows rows of at least
// kRowLogprobsClusterMinColumns columns split each row over a cluster of CTAs on sm_90 (a lone
// row's time is its latency); launches of up to kRowLogprobsFewRows rows read each row twice in
// one CTA (top > 0); more rows take one CTA and one pass per row (they stream at the argmax's
// speed). Tests and the benchmark pin the others.
enum class RowLogprobsKernel : uint8_t { kAuto, kOneCtaPerRow, kClusterPerRow };
inline constexpr int32_t kRowLogprobsFewRows = 128;
// A cluster takes 8 whole SMs, so that an H100 or H200 runs ~14-16 rows' clusters at once; past
// one such wave the CTA per row wins (H100, 128256 columns: 1 and 8 rows 14.3 us top 5, 17.2-17.5
// top 20, against 28.6-30.1 for a CTA per row; 32 rows 51.1 against 29.9 in the first version).
inline constexpr int32_t kRowLogprobsClusterRows = 8;
// Rows narrower than this keep one CTA (as argmax_rows_cuda's clusters): a part of a few hundred
// columns is all barriers and merges.
inline constexpr int32_t kRowLogprobsClusterMinColumns = 4096;

// The device arrays of one launch over n rows: logits fp32 [*, vocab]; rows int32 [n], each row's
// logits row; row i's token is tokens[i], or tokens[token_index[i]] where token_index is set (a
// token picked on the device this step: an argmax or a draw, -1 for a row without a softmax);
// a token outside [0, vocab) gives a NaN logprob; top in
// [0, min(kMaxTopLogprobs, vocab)], the same for every row of the launch (a caller trims shorter
// asks). Out: logprob fp32 [n]; top_ids int32 [n, top] and top_logprobs fp32 [n, top], larger
// first, equal logits by lower id. A row with a NaN or an infinity gets a NaN logprob and top ids
// of -1 (the reference's empty top list).
struct RowLogprobsArgs {
  const float* logits = nullptr;
  int32_t vocab = 0;
  const int32_t* rows = nullptr;
  const int32_t* tokens = nullptr;
  const int32_t* token_index = nullptr;  // optional
  // Optional: row i's logits at row_logits[i] instead of logits + rows[i] x vocab (a row kept
  // aside before its logit edits, say).
  const float* const* row_logits = nullptr;
  int32_t n = 0;
  int32_t top = 0;
  float* logprob = nullptr;
  int32_t* top_ids = nullptr;
  float* top_logprobs = nullptr;
  // kClusterPerRow needs an sm_90 GPU (Error elsewhere); kOneCtaPerRow reads a row twice where
  // n <= kRowLogprobsFewRows and top > 0, once otherwise.
  RowLogprobsKernel kernel = RowLogprobsKernel::kAuto;
};

// Launches on `stream`; throws quench::Error for bad sizes or a failed launch.
void row_logprobs_cuda(const RowLogprobsArgs& args, cudaStream_t stream);

}  // namespace quench
