#include "quench/ops/linear/linear_cpu.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "quench/core/parallel_for.h"
#include "quench/numerics/bf16.h"
#include "quench/ops/linear/linear_reference.h"

// x86-64: one clone of the block loop for AVX2 + FMA machines, one for the baseline, chosen at
// load time (the build targets the baseline; the GPU hosts and CI run either).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define QUENCH_CPU_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define QUENCH_CPU_CLONES
#endif

namespace quench {
namespace {

// Partial sums per dot product (a 256-bit vector of fp32).
constexpr int kLanes = 8;
// Weight rows and tokens one tile multiplies: kRowTile x kTokenTile accumulator vectors plus
// kRowTile + kTokenTile operand vectors fit the 16 vector registers of AVX2.
constexpr int kRowTile = 4;
constexpr int kTokenTile = 2;
// Weight rows per parallel_for item, widened to fp32 once per call; and tokens per pass over
// them: the block's rows and a chunk's x rows stay in L2 while every tile of both meets.
constexpr int64_t kRowsPerBlock = 32;
constexpr int64_t kTokensPerChunk = 32;

// kLanes fp32 partial sums in one vector (GCC's vector extension: one 256-bit register where the
// clone has AVX2, two 128-bit ones in the baseline).
using Lanes = float __attribute__((vector_size(kLanes * sizeof(float))));

// The same vector at 4-byte alignment: how rows of floats are loaded.
using UnalignedLanes = float __attribute__((vector_size(kLanes * sizeof(float)), aligned(4)));

// sums[r][t] = dot(w row r, x row t) over `in` elements, element k in partial k % kLanes, the
// partials added pairwise at the end.
template <int R, int T>
[[gnu::always_inline]] inline void dot_tile(const float* w, const float* x, int64_t in,
                                            float (&sums)[kRowTile][kTokenTile]) {
  Lanes acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t)
      acc[r][t] = Lanes{};
  int64_t k = 0;
  for (; k + kLanes <= in; k += kLanes) {
    Lanes wv[R], xv[T];
    for (int r = 0; r < R; ++r)
      wv[r] = *reinterpret_cast<const UnalignedLanes*>(w + r * in + k);
    for (int t = 0; t < T; ++t)
      xv[t] = *reinterpret_cast<const UnalignedLanes*>(x + t * in + k);
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t)
        acc[r][t] += wv[r] * xv[t];
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) {
      float a[kLanes];
      std::memcpy(a, &acc[r][t], sizeof(a));
      for (int l = 0; k + l < in; ++l)  // the tail: elements k + l join partial l
        a[l] += w[r * in + k + l] * x[t * in + k + l];
      sums[r][t] = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
    }
  }
}

// out[t * out_features + r] for R widened weight rows (w, `in` floats apart) and `tokens` rows of
// x, kTokenTile tokens at a time.
template <int R>
[[gnu::always_inline]] inline void rows_times_tokens(const float* w, const float* x, int64_t in,
                                                     int64_t tokens, int64_t out_features,
                                                     float* out) {
  float sums[kRowTile][kTokenTile];
  int64_t t = 0;
  for (; t + kTokenTile <= tokens; t += kTokenTile) {
    dot_tile<R, kTokenTile>(w, x + t * in, in, sums);
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < kTokenTile; ++j)
        out[(t + j) * out_features + r] = sums[r][j];
  }
  if (t < tokens) {
    dot_tile<R, 1>(w, x + t * in, in, sums);
    for (int r = 0; r < R; ++r)
      out[t * out_features + r] = sums[r][0];
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
