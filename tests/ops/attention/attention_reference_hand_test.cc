// Tiny attention cases whose answers are written down by hand: one query head, one KV head,
// head_dim 64 with only dimension 0 (and 1) non-zero, two or three keys in page 1.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "quench/numerics/bf16.h"
#include "quench/numerics/fp8.h"
#include "quench/ops/attention/attention_reference.h"

namespace quench {
namespace {

constexpr int kHeadDim = 64;
constexpr int kPageSize = 16;

// One sequence of `keys` cached tokens in page 1, queried by its last token (a decode step).
struct TinyCase {
  DType q_dtype;
  DType kv_dtype;
  int keys;
  std::vector<uint8_t> q, k, v, out;
  std::vector<int32_t> q_offsets{0, 1}, seq_lens, block_table{1};
  float lse = NAN;

  TinyCase(DType q_type, DType kv_type, int num_keys)
      : q_dtype(q_type),
        kv_dtype(kv_type),
        keys(num_keys),
        q(dtype_bytes(q_type, kHeadDim), 0),
        k(dtype_bytes(kv_type, 2 * kPageSize * kHeadDim), 0),
        v(dtype_bytes(kv_type, 2 * kPageSize * kHeadDim), 0),
        out(2 * kHeadDim, 0xff),
        seq_lens{num_keys} {}

  static void put(std::vector<uint8_t>& bytes, DType dtype, int64_t index, float value) {
    if (is_fp8(dtype)) {
      bytes[index] = float_to_fp8(value, fp8_format_of(dtype));
    } else {
      const uint16_t bits = float_to_bf16_bits(value);
      std::memcpy(&bytes[index * 2], &bits, 2);
    }
  }
  // Stored (not dequantized) values; key j lives at page 1, slot j.
  void set_q(int dim, float value) { put(q, q_dtype, dim, value); }
  void set_k(int j, int dim, float value) {
    put(k, kv_dtype, (kPageSize + j) * kHeadDim + dim, value);
  }
  void set_v(int j, int dim, float value) {
    put(v, kv_dtype, (kPageSize + j) * kHeadDim + dim, value);
  }

  AttentionParams params() {
    AttentionParams p;
    p.q = q.data();
    p.q_dtype = q_dtype;
    p.k_cache = k.data();
    p.v_cache = v.data();
    p.kv.num_pages = 2;
    p.kv.page_size = kPageSize;
    p.kv.num_kv_heads = 1;
    p.kv.head_dim = kHeadDim;
    p.kv.dtype = kv_dtype;
    p.num_q_heads = 1;
    p.num_seqs = 1;
    p.num_tokens = 1;
    p.q_offsets = q_offsets.data();
    p.seq_lens = seq_lens.data();
    p.block_table = block_table.data();
    p.block_table_stride = 1;
    p.max_q_len = 1;
    p.max_seq_len = keys;
    p.sm_scale = 1.0f;
    p.out = out.data();
    p.lse = &lse;
    return p;
  }
  float out_bf16(int dim) const {
    uint16_t bits;
    std::memcpy(&bits, &out[dim * 2], 2);
    return bf16_bits_to_float(bits);
  }
};

const double kE = std::exp(1.0);

// q = e0, k0 = 0, k1 = e0: scores {0, 1}, weights {1, e} / (1 + e). v0 = 1, v1 = 2 in dim 0 and
// v0 = -4, v1 = 4 in dim 1, so o = ((1 + 2e), (-4 + 4e)) / (1 + e) and lse = log(1 + e).
TEST(AttentionReferenceHand, OneTokenTwoKeysBf16) {
  TinyCase c(DType::kBF16, DType::kBF16, 2);
  c.set_q(0, 1.0f);
  c.set_k(1, 0, 1.0f);
  c.set_v(0, 0, 1.0f);
  c.set_v(1, 0, 2.0f);
  c.set_v(0, 1, -4.0f);
  c.set_v(1, 1, 4.0f);
  attention_reference(c.params());
  EXPECT_EQ(c.out_bf16(0), to_float(to_bf16(static_cast<float>((1 + 2 * kE) / (1 + kE)))));
  EXPECT_EQ(c.out_bf16(1), to_float(to_bf16(static_cast<float>((-4 + 4 * kE) / (1 + kE)))));
  for (int d = 2; d < kHeadDim; ++d)
    EXPECT_EQ(c.out_bf16(d), 0.0f) << "dim " << d;
  EXPECT_NEAR(c.lse, std::log(1 + kE), 1e-6);
}

// The same scores reached through FP8 values and scales: q stored 2 * q_scale 0.5 = 1,
// k1 stored 4 * k_scale 0.25 = 1, v stored {2, 4} * v_scale 0.5 = {1, 2}; sm_scale 2 doubles
// the scores to {0, 2}. A sink logit 0 adds exp(0) to the denominator:
// o = (1 + 2 e^2) / (1 + e^2 + 1), lse = log(2 + e^2).
TEST(AttentionReferenceHand, Fp8ScalesAndSink) {
  TinyCase c(DType::kFP8E4M3, DType::kFP8E4M3, 2);
  c.set_q(0, 2.0f);
  c.set_k(1, 0, 4.0f);
  c.set_v(0, 0, 2.0f);
  c.set_v(1, 0, 4.0f);
  const float sink = 0.0f;
  AttentionParams p = c.params();
  p.q_scale = 0.5f;
  p.k_scale.per_tensor = 0.25f;
  p.v_scale.per_tensor = 0.5f;
  p.sm_scale = 2.0f;
  p.sinks = &sink;
  attention_reference(p);
  const double e2 = kE * kE;
  EXPECT_EQ(c.out_bf16(0), to_float(to_bf16(static_cast<float>((1 + 2 * e2) / (2 + e2)))));
  EXPECT_NEAR(c.lse, std::log(2 + e2), 1e-6);
}

// A bf16 query ignores q_scale (vllm#53754 applied it): the same case with q_scale 7 gives
// exactly the q_scale 1 answer, o = (1 + 2e) / (1 + e).
TEST(AttentionReferenceHand, Bf16QueryIgnoresQScale) {
  TinyCase c(DType::kBF16, DType::kFP8E4M3, 2);
  c.set_q(0, 1.0f);
  c.set_k(1, 0, 1.0f);
  c.set_v(0, 0, 1.0f);
  c.set_v(1, 0, 2.0f);
  AttentionParams p = c.params();
  p.q_scale = 7.0f;
  attention_reference(p);
  EXPECT_EQ(c.out_bf16(0), to_float(to_bf16(static_cast<float>((1 + 2 * kE) / (1 + kE)))));
}

// Soft-cap 2: scores {0, 4} become {0, 2 tanh(2)}; o = (1 + 2 t) / (1 + t) with t = e^(2 tanh(2)).
TEST(AttentionReferenceHand, SoftCap) {
  TinyCase c(DType::kBF16, DType::kBF16, 2);
  c.set_q(0, 2.0f);
  c.set_k(1, 0, 2.0f);
  c.set_v(0, 0, 1.0f);
  c.set_v(1, 0, 2.0f);
  AttentionParams p = c.params();
  // Not 1: cap * tanh(s / cap) and tanh(s / cap) would agree there.
  p.logit_soft_cap = 2.0f;
  attention_reference(p);
  const double t = std::exp(2.0 * std::tanh(4.0 / 2.0));
  EXPECT_EQ(c.out_bf16(0), to_float(to_bf16(static_cast<float>((1 + 2 * t) / (1 + t)))));
  EXPECT_NEAR(c.lse, std::log(1 + t), 1e-6);
}

// Three keys with window_left 1: the query at position 2 sees keys 1 and 2 only. Key 0 would
// dominate (score 10) if it were visible; keys 1, 2 have scores {0, 1} and values {1, 2}.
TEST(AttentionReferenceHand, SlidingWindowHidesOldKeys) {
  TinyCase c(DType::kBF16, DType::kBF16, 3);
  c.set_q(0, 1.0f);
  c.set_k(0, 0, 10.0f);
  c.set_k(2, 0, 1.0f);
  c.set_v(0, 0, 100.0f);
  c.set_v(1, 0, 1.0f);
  c.set_v(2, 0, 2.0f);
  AttentionParams p = c.params();
  p.window_left = 1;
  attention_reference(p);
  EXPECT_EQ(c.out_bf16(0), to_float(to_bf16(static_cast<float>((1 + 2 * kE) / (1 + kE)))));
}

// FP8 output divides by o_scale: o = (1 + 2e) / (1 + e) = 1.7311 is stored as
// e4m3(1.7311 / 0.25) = e4m3(6.92) = 7.0 (step 0.5 in [4, 8)).
TEST(AttentionReferenceHand, Fp8OutputDividesByOScale) {
  TinyCase c(DType::kBF16, DType::kBF16, 2);
  c.set_q(0, 1.0f);
  c.set_k(1, 0, 1.0f);
  c.set_v(0, 0, 1.0f);
  c.set_v(1, 0, 2.0f);
  AttentionParams p = c.params();
  p.out_dtype = DType::kFP8E4M3;
  p.o_scale = 0.25f;
  attention_reference(p);
  EXPECT_EQ(fp8_e4m3_to_float(c.out[0]), 7.0f);
  EXPECT_EQ(fp8_e4m3_to_float(c.out[1]), 0.0f);
}

}  // namespace
}  // namespace quench
