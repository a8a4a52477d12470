#include "quench/ops/attention/attention_cpu.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "quench/core/parallel_for.h"
#include "quench/numerics/bf16.h"
#include "quench/numerics/fp8.h"
#include "quench/ops/attention/attention_output.h"
#include "quench/ops/attention/attention_reference.h"
#include "quench/ops/cpu/fp32_dot_tile.h"

namespace quench {
namespace {

using cpu::kLanes;
using cpu::Lanes;

// Query rows of one sequence per work item: with a GQA group of 4, 64 query heads share each
// widened chunk of keys.
constexpr int32_t kRowsPerItem = 16;
// Keys widened to fp32 at a time: a chunk of K and V at head_dim 128 is 128 KiB each, in L2
// while every query head of the item meets it.
constexpr int32_t kKeysPerChunk = 256;
// Keys and query heads per score tile: 4 x 2 accumulators + 6 operands of 16 AVX2 registers.
constexpr int kKeyTile = 4;
constexpr int kQueryTile = 2;
// head_dim floats of the output summed per pass over a chunk's V rows: 4 vectors per query head,
// two query heads at once.
constexpr int kOutVectors = 4;

// One work item: KV head `kv_head` and query rows [row_begin, row_end) of sequence `seq` (row
// indices within the sequence's q_len rows).
struct WorkItem {
  int32_t seq;
  int32_t kv_head;
  int32_t row_begin;
  int32_t row_end;
};

// Stored value -> float for every FP8 byte, one table per format.
const std::array<float, 256>& fp8_table(DType dtype) {
  static const auto make = [](DType d) {
    std::array<float, 256> t{};
    for (int v = 0; v < 256; ++v) {
      const auto b = static_cast<uint8_t>(v);
      t[v] = d == DType::kFP8E4M3 ? fp8_e4m3_to_float(b) : fp8_e5m2_to_float(b);
    }
    return t;
  };
  static const std::array<float, 256> e4m3 = make(DType::kFP8E4M3);
  static const std::array<float, 256> e5m2 = make(DType::kFP8E5M2);
  return dtype == DType::kFP8E4M3 ? e4m3 : e5m2;
}

// count stored elements of `dtype` (bf16, f16 or FP8) starting at element `index` -> floats.
void widen(const void* base, DType dtype, int64_t index, int32_t count, float* dst) {
  switch (dtype) {
    case DType::kBF16: {
      const uint16_t* src = static_cast<const uint16_t*>(base) + index;
      for (int32_t d = 0; d < count; ++d)
        dst[d] = bf16_bits_to_float(src[d]);
      return;
    }
    case DType::kF16: {
      const uint16_t* src = static_cast<const uint16_t*>(base) + index;
      for (int32_t d = 0; d < count; ++d)
        dst[d] = f16_bits_to_float(src[d]);
      return;
    }
    default: {
      const std::array<float, 256>& table = fp8_table(dtype);
      const uint8_t* src = static_cast<const uint8_t*>(base) + index;
      for (int32_t d = 0; d < count; ++d)
        dst[d] = table[src[d]];
      return;
    }
  }
}

// Per-thread buffers, sized for the largest item seen.
struct Scratch {
  std::vector<float> q;                 // [queries, head_dim] stored query values
  std::vector<float> k, v;              // [kKeysPerChunk, head_dim] stored K / V values
  std::vector<float> scores;            // [queries, kKeysPerChunk] scaled scores, then weights
  std::vector<float> acc;               // [queries, head_dim] running sum of weight * stored V
  std::vector<float> max, denominator;  // [queries] running softmax state
};

// scores[(q0 + t) * kKeysPerChunk + j] = dot(K row j, query q0 + t) for keys [0, keys) of the
// chunk and T query heads.
template <int T>
[[gnu::always_inline]] inline void score_keys(const float* k, const float* q, int32_t keys,
                                              int32_t head_dim, float* scores) {
  float sums[kKeyTile * T];
  int32_t j = 0;
  for (; j + kKeyTile <= keys; j += kKeyTile) {
    cpu::dot_tile<kKeyTile, T>(k + static_cast<int64_t>(j) * head_dim, q, head_dim, head_dim, sums);
    for (int r = 0; r < kKeyTile; ++r)
      for (int t = 0; t < T; ++t)
        scores[t * kKeysPerChunk + j + r] = sums[r * T + t];
  }
  for (; j < keys; ++j) {
    cpu::dot_tile<1, T>(k + static_cast<int64_t>(j) * head_dim, q, head_dim, head_dim, sums);
    for (int t = 0; t < T; ++t)
      scores[t * kKeysPerChunk + j] = sums[t];
  }
}

// acc[t] = acc[t] * rescale[t] + sum over keys [lo, hi] of weights[t][j] * V row j, for T query
// heads that share the key range (heads of one query row).
template <int T>
[[gnu::always_inline]] inline void weigh_values(const float* v, const float* weights,
                                                const float* rescale, int32_t lo, int32_t hi,
                                                int32_t head_dim, float* acc) {
  for (int32_t d0 = 0; d0 < head_dim; d0 += kOutVectors * kLanes) {
    Lanes sum[T][kOutVectors];
    for (int t = 0; t < T; ++t)
      for (int c = 0; c < kOutVectors; ++c)
        sum[t][c] = cpu::lanes_at(acc + t * head_dim + d0 + c * kLanes) * rescale[t];
    for (int32_t j = lo; j <= hi; ++j) {
      const float* row = v + static_cast<int64_t>(j) * head_dim + d0;
      Lanes vv[kOutVectors];
      for (int c = 0; c < kOutVectors; ++c)
        vv[c] = cpu::lanes_at(row + c * kLanes);
      for (int t = 0; t < T; ++t) {
        const float w = weights[t * kKeysPerChunk + j];
        for (int c = 0; c < kOutVectors; ++c)
          sum[t][c] += vv[c] * w;
      }
    }
    for (int t = 0; t < T; ++t)
      for (int c = 0; c < kOutVectors; ++c)
        cpu::lanes_at(acc + t * head_dim + d0 + c * kLanes) = sum[t][c];
  }
}

// One work item: its query heads' attention, written as floats to o ([num_tokens, num_q_heads,
// head_dim]) and lse.
QUENCH_CPU_CLONES void attend_item(const AttentionParams& p, const WorkItem& item, Scratch& s,
                                   float* o) {
  const int32_t head_dim = p.kv.head_dim;
  const int32_t group = p.num_q_heads / p.kv.num_kv_heads;
  const int32_t q_len = p.q_offsets[item.seq + 1] - p.q_offsets[item.seq];
  const int32_t seq_len = p.seq_lens[item.seq];
  const int32_t rows = item.row_end - item.row_begin;
  const int32_t queries = rows * group;
  const int32_t* pages = p.block_table + static_cast<int64_t>(item.seq) * p.block_table_stride;
  auto position = [&](int32_t row) { return seq_len - q_len + row; };
  auto first_key = [&](int32_t row) {
    return p.window_left >= 0 ? std::max(0, position(row) - p.window_left) : 0;
  };
  const int32_t key_begin = first_key(item.row_begin);
  const int32_t key_end = position(item.row_end - 1) + 1;

  const size_t q_elems = static_cast<size_t>(queries) * static_cast<size_t>(head_dim);
  const size_t chunk_elems = static_cast<size_t>(kKeysPerChunk) * static_cast<size_t>(head_dim);
  s.q.resize(q_elems);
  s.acc.assign(q_elems, 0.0f);
  s.k.resize(chunk_elems);
  s.v.resize(chunk_elems);
  s.scores.resize(static_cast<size_t>(queries) * kKeysPerChunk);
  s.max.resize(static_cast<size_t>(queries));
  s.denominator.resize(static_cast<size_t>(queries));

  // Query head g of row r is query (r - row_begin) * group + g; its q head is kv_head * group + g.
  const int64_t token_begin = p.q_offsets[item.seq] + item.row_begin;
  for (int32_t r = 0; r < rows; ++r) {
    for (int32_t g = 0; g < group; ++g) {
      const int64_t q_head = static_cast<int64_t>(item.kv_head) * group + g;
      const int64_t src = ((token_begin + r) * p.num_q_heads + q_head) * head_dim;
      widen(p.q, p.q_dtype, src, head_dim, &s.q[static_cast<size_t>(r * group + g) * head_dim]);
    }
  }
  for (int32_t qi = 0; qi < queries; ++qi) {
    const int32_t q_head = item.kv_head * group + qi % group;
    // A sink joins the softmax as one more logit with no value row.
    s.max[qi] = p.sinks != nullptr ? p.sinks[q_head] : -INFINITY;
    s.denominator[qi] = p.sinks != nullptr ? 1.0f : 0.0f;
  }

  const float q_scale_eff = is_fp8(p.q_dtype) ? p.q_scale : 1.0f;
  const float score_scale = p.sm_scale * q_scale_eff * p.k_scale.at(item.kv_head);
  const float cap = p.logit_soft_cap;
  float rescale[kQueryTile];

  for (int32_t chunk_begin = key_begin; chunk_begin < key_end; chunk_begin += kKeysPerChunk) {
    const int32_t keys = std::min(kKeysPerChunk, key_end - chunk_begin);
    for (int32_t j = 0; j < keys; ++j) {
      const int32_t pos = chunk_begin + j;
      const int64_t row =
          p.kv.offset(pages[pos / p.kv.page_size], pos % p.kv.page_size, item.kv_head, 0);
      widen(p.k_cache, p.kv.dtype, row, head_dim, &s.k[static_cast<size_t>(j) * head_dim]);
      widen(p.v_cache, p.kv.dtype, row, head_dim, &s.v[static_cast<size_t>(j) * head_dim]);
    }
    for (int32_t r = 0; r < rows; ++r) {
      const int32_t row = item.row_begin + r;
      // Keys [lo, hi] of this chunk that row sees; none: the chunk leaves its state alone.
      const int32_t lo = std::max(first_key(row), chunk_begin) - chunk_begin;
      const int32_t hi = std::min(position(row), chunk_begin + keys - 1) - chunk_begin;
      if (lo > hi) continue;
      for (int32_t g0 = 0; g0 < group; g0 += kQueryTile) {
        const int32_t tile = std::min(kQueryTile, group - g0);
        const int32_t q0 = r * group + g0;
        float* scores = &s.scores[static_cast<size_t>(q0) * kKeysPerChunk];
        const float* q = &s.q[static_cast<size_t>(q0) * head_dim];
        // Scores from key 0 of the chunk: the keys before lo cost less than a ragged tile start.
        if (tile == kQueryTile) {
          score_keys<kQueryTile>(s.k.data(), q, hi + 1, head_dim, scores);
        } else {
          score_keys<1>(s.k.data(), q, hi + 1, head_dim, scores);
        }
        for (int32_t t = 0; t < tile; ++t) {
          const int32_t qi = q0 + t;
          float* w = scores + static_cast<size_t>(t) * kKeysPerChunk;
          float chunk_max = -INFINITY;
          for (int32_t j = lo; j <= hi; ++j) {
            float x = w[j] * score_scale;
            if (cap > 0.0f) x = cap * std::tanh(x / cap);
            w[j] = x;
            chunk_max = std::max(chunk_max, x);
          }
          const float new_max = std::max(s.max[qi], chunk_max);
          // exp(-inf - finite) = 0: the first chunk of a row without a sink rescales nothing.
          rescale[t] = std::exp(s.max[qi] - new_max);
          float sum = 0.0f;
          for (int32_t j = lo; j <= hi; ++j) {
            w[j] = std::exp(w[j] - new_max);
            sum += w[j];
          }
          s.max[qi] = new_max;
          s.denominator[qi] = s.denominator[qi] * rescale[t] + sum;
        }
        float* acc = &s.acc[static_cast<size_t>(q0) * head_dim];
        if (tile == kQueryTile) {
          weigh_values<kQueryTile>(s.v.data(), scores, rescale, lo, hi, head_dim, acc);
        } else {
          weigh_values<1>(s.v.data(), scores, rescale, lo, hi, head_dim, acc);
        }
      }
    }
  }

  const float v_scale = p.v_scale.at(item.kv_head);
  for (int32_t qi = 0; qi < queries; ++qi) {
    const int64_t token = token_begin + qi / group;
    const int64_t q_head = static_cast<int64_t>(item.kv_head) * group + qi % group;
    const float* acc = &s.acc[static_cast<size_t>(qi) * head_dim];
    float* dst = o + (token * p.num_q_heads + q_head) * head_dim;
    const float norm = v_scale / s.denominator[qi];
    for (int32_t d = 0; d < head_dim; ++d)
      dst[d] = acc[d] * norm;
    if (p.lse != nullptr) {
      p.lse[token * p.num_q_heads + q_head] = std::log(s.denominator[qi]) + s.max[qi];
    }
  }
}

}  // namespace

void attention_cpu(const AttentionParams& p) {
  validate_attention_params(p);
  std::vector<WorkItem> items;
  for (int32_t b = 0; b < p.num_seqs; ++b) {
    const int32_t q_len = p.q_offsets[b + 1] - p.q_offsets[b];
    for (int32_t h = 0; h < p.kv.num_kv_heads; ++h) {
      for (int32_t r = 0; r < q_len; r += kRowsPerItem)
        items.push_back(WorkItem{b, h, r, std::min(q_len, r + kRowsPerItem)});
    }
  }
  const int64_t row_elems = static_cast<int64_t>(p.num_q_heads) * p.kv.head_dim;
  std::vector<float> o(static_cast<size_t>(p.num_tokens * row_elems));
  parallel_for(static_cast<int64_t>(items.size()), [&](int64_t i) {
    thread_local Scratch scratch;
    attend_item(p, items[static_cast<size_t>(i)], scratch, o.data());
  });
  write_attention_outputs(p, o);
}

}  // namespace quench
