#include "quench/ops/linear/linear_cpu.h"

#include <algorithm>
#include <vector>

#include "quench/core/parallel_for.h"
#include "quench/numerics/bf16.h"
#include "quench/ops/cpu/fp32_dot_tile.h"
#include "quench/ops/linear/linear_reference.h"

namespace quench {
namespace {

// Weight rows and tokens one tile multiplies: kRowTile x kTokenTile accumulator vectors plus
// kRowTile + kTokenTile operand vectors fit the 16 vector registers of AVX2.
constexpr int kRowTile = 4;
constexpr int kTokenTile = 2;
// Weight rows per parallel_for item, widened to fp32 once per call; and tokens per pass over
// them: the block's rows and a chunk's x rows stay in L2 while every tile of both meets.
constexpr int64_t kRowsPerBlock = 32;
constexpr int64_t kTokensPerChunk = 32;

// out[t * out_features + r] for R widened weight rows (w, `in` floats apart) and `tokens` rows of
// x, kTokenTile tokens at a time.
template <int R>
[[gnu::always_inline]] inline void rows_times_tokens(const float* w, const float* x, int64_t in,
                                                     int64_t tokens, int64_t out_features,
                                                     float* out) {
  float sums[kRowTile * kTokenTile];
  int64_t t = 0;
  for (; t + kTokenTile <= tokens; t += kTokenTile) {
    cpu::dot_tile<R, kTokenTile>(w, x + t * in, in, in, sums);
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < kTokenTile; ++j)
        out[(t + j) * out_features + r] = sums[r * kTokenTile + j];
  }
  if (t < tokens) {
    cpu::dot_tile<R, 1>(w, x + t * in, in, in, sums);
    for (int r = 0; r < R; ++r)
      out[t * out_features + r] = sums[r];
  }
}

// Rows [row_begin, row_end) (at most kRowsPerBlock) of the weight for every token; `widened`
// holds kRowsPerBlock * in floats.
QUENCH_CPU_CLONES void linear_rows(int64_t row_begin, int64_t row_end, int64_t in, int64_t tokens,
                                   int64_t out_features, const float* x, const uint16_t* weight,
                                   float* out, float* widened) {
  const uint16_t* w = weight + row_begin * in;
  for (int64_t i = 0; i < (row_end - row_begin) * in; ++i)
    widened[i] = bf16_bits_to_float(w[i]);
  for (int64_t t0 = 0; t0 < tokens; t0 += kTokensPerChunk) {
    const int64_t chunk = std::min(kTokensPerChunk, tokens - t0);
    const float* xs = x + t0 * in;
    float* outs = out + t0 * out_features;
    for (int64_t n = row_begin; n < row_end; n += kRowTile) {
      const float* wn = widened + (n - row_begin) * in;
      switch (std::min<int64_t>(kRowTile, row_end - n)) {
        case 4:
          rows_times_tokens<4>(wn, xs, in, chunk, out_features, outs + n);
          break;
        case 3:
          rows_times_tokens<3>(wn, xs, in, chunk, out_features, outs + n);
          break;
        case 2:
          rows_times_tokens<2>(wn, xs, in, chunk, out_features, outs + n);
          break;
        default:
          rows_times_tokens<1>(wn, xs, in, chunk, out_features, outs + n);
          break;
      }
    }
  }
}

}  // namespace

void linear_cpu(int32_t num_tokens, int32_t in_features, int32_t out_features, const float* x,
                const uint16_t* weight, float* out) {
  check_linear_args(num_tokens, in_features, out_features, x, weight, out);
  if (num_tokens == 0) return;
  const int64_t blocks = (out_features + kRowsPerBlock - 1) / kRowsPerBlock;
  parallel_for(blocks, [&](int64_t block) {
    thread_local std::vector<float> widened;
    widened.resize(static_cast<size_t>(kRowsPerBlock) * static_cast<size_t>(in_features));
    const int64_t begin = block * kRowsPerBlock;
    const int64_t end = std::min<int64_t>(out_features, begin + kRowsPerBlock);
    linear_rows(begin, end, in_features, num_tokens, out_features, x, weight, out, widened.data());
  });
}

}  // namespace quench
