#include "quench/ops/rope_quant_append/rope_quant_append_reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "harness/expect_error.h"
#include "harness/random_inputs.h"
#include "quench/numerics/bf16.h"
#include "quench/numerics/fp8.h"
#include "quench/ops/kv_append/kv_append_reference.h"
#include "quench/ops/qk_norm/qk_norm_reference.h"
#include "quench/ops/quantize/fp8_quantize_reference.h"
#include "quench/ops/rope/rope_reference.h"

namespace quench {
namespace {

constexpr uint8_t kPoison = 0xA5;
constexpr int32_t kTokens = 9, kQHeads = 4, kKvHeads = 2, kHeadDim = 64, kCachePositions = 256;
constexpr int64_t kQRow = kQHeads * kHeadDim, kKvRow = kKvHeads * kHeadDim;
// One fused qkv tensor [T, (Hq + 2 Hkv) * D + 8]: q/k/v are strided views with a gap per row.
constexpr int64_t kQkvRow = kQRow + 2 * kKvRow + 8;

enum class RopeVariant { kNeoxFull, kGptjPartial, kNeoxPartialLlama3 };

// Inputs and poisoned outputs of one case; params() points into them.
struct Case {
  RopeConfig rope;
  KvCacheLayout kv;
  bool use_cache = false;
  bool use_norm = false;
  std::vector<uint16_t> qkv;
  std::vector<int32_t> positions;
  std::vector<int64_t> slots;
  std::vector<float> cos_sin;
  std::vector<uint16_t> q_norm_weight, k_norm_weight;
  std::vector<float> k_head_scales;
  std::vector<uint16_t> q_out_bf16;
  std::vector<uint8_t> q_out_fp8, k_cache, v_cache;

  Case(RopeVariant variant, bool cache, bool norm, DType kv_dtype, KvLayout layout)
      : use_cache(cache), use_norm(norm) {
    rope.style = variant == RopeVariant::kGptjPartial ? RopeStyle::kGptj : RopeStyle::kNeox;
    rope.rotary_dim = variant == RopeVariant::kNeoxFull ? kHeadDim : 32;
    rope.theta = variant == RopeVariant::kNeoxPartialLlama3 ? 500000.0f : 10000.0f;
    if (variant == RopeVariant::kNeoxPartialLlama3) {
      rope.llama3_factor = 8.0f;
      rope.llama3_original_max_position = 64;  // so that positions below 256 reach all regimes
    }
    kv.num_pages = 6;
    kv.page_size = layout == KvLayout::kNHD ? 16 : 64;
    kv.num_kv_heads = kKvHeads;
    kv.head_dim = kHeadDim;
    kv.dtype = kv_dtype;
    kv.layout = layout;

    testing_support::RandomInputs rng(41);
    for (float x : rng.normal(static_cast<size_t>(kTokens * kQkvRow), 0.0f, 3.0f)) {
      qkv.push_back(float_to_bf16_bits(x));
    }
    for (int32_t t = 0; t < kTokens; ++t)
      positions.push_back(rng.uniform_int(0, kCachePositions - 1));
    // Distinct slots outside the null page; tokens 2 (a bf16 q row) and 6 (an fp8 q row) pad.
    std::vector<int64_t> all_slots;
    for (int64_t s = kv.page_size; s < int64_t{kv.num_pages} * kv.page_size; ++s)
      all_slots.push_back(s);
    std::shuffle(all_slots.begin(), all_slots.end(), rng.engine());
    slots.assign(all_slots.begin(), all_slots.begin() + kTokens);
    slots[2] = -1;
    slots[6] = -1;
    if (use_cache) cos_sin = build_rope_cos_sin_cache(rope, kCachePositions);
    if (use_norm) {
      for (int32_t d = 0; d < kHeadDim; ++d) {
        q_norm_weight.push_back(float_to_bf16_bits(rng.uniform_float(0.5f, 1.5f)));
        k_norm_weight.push_back(float_to_bf16_bits(rng.uniform_float(0.5f, 1.5f)));
      }
    }
    k_head_scales = {0.02f, 0.05f};
    q_out_bf16.assign(static_cast<size_t>(kTokens * kQRow), 0xA5A5);
    q_out_fp8.assign(static_cast<size_t>(kTokens * kQRow), kPoison);
    k_cache.assign(static_cast<size_t>(kv.tensor_bytes()), kPoison);
    v_cache = k_cache;
  }

  RopeQuantAppendParams params() {
    RopeQuantAppendParams p;
    p.num_tokens = kTokens;
    p.num_q_heads = kQHeads;
    p.num_kv_heads = kKvHeads;
    p.head_dim = kHeadDim;
    p.q = qkv.data();
    p.k = qkv.data() + kQRow;
    p.v = qkv.data() + kQRow + kKvRow;
    p.q_row_stride = p.k_row_stride = p.v_row_stride = kQkvRow;
    p.positions = positions.data();
    p.rope = rope;
    p.cos_sin_cache = use_cache ? cos_sin.data() : nullptr;
    p.cos_sin_cache_positions = use_cache ? kCachePositions : 0;
    p.q_norm_weight = use_norm ? q_norm_weight.data() : nullptr;
    p.k_norm_weight = use_norm ? k_norm_weight.data() : nullptr;
    p.norm_eps = 1e-5f;
    p.q_bf16_rows = 4;
    p.q_out_bf16 = q_out_bf16.data();
    p.q_out_fp8 = q_out_fp8.data();
    p.q_fp8_dtype = DType::kFP8E4M3;
    p.q_scale = 0.043f;
    p.k_cache = k_cache.data();
    p.v_cache = v_cache.data();
    p.kv = kv;
    if (is_fp8(kv.dtype)) {
      p.k_scale.per_head = k_head_scales.data();
      p.v_scale.per_tensor = 0.011f;
    }
    p.slot_mapping = slots.data();
    return p;
  }
};

// The same step, one token at a time, from the single-op references.
void run_pieces(const RopeQuantAppendParams& p, std::vector<uint16_t>* q_bf16,
                std::vector<uint8_t>* q_fp8, std::vector<uint8_t>* k_cache,
                std::vector<uint8_t>* v_cache) {
  for (int32_t t = 0; t < p.num_tokens; ++t) {
    if (p.slot_mapping[t] < 0) continue;
    std::vector<float> q(kQRow), k(kKvRow), v(kKvRow);
    for (int64_t e = 0; e < kQRow; ++e)
      q[e] = bf16_bits_to_float(p.q[t * p.q_row_stride + e]);
    for (int64_t e = 0; e < kKvRow; ++e) {
      k[e] = bf16_bits_to_float(p.k[t * p.k_row_stride + e]);
      v[e] = bf16_bits_to_float(p.v[t * p.v_row_stride + e]);
    }
    if (p.q_norm_weight) {
      qk_rms_norm_reference(1, kQHeads, kHeadDim, p.q_norm_weight, p.norm_eps, q.data());
      qk_rms_norm_reference(1, kKvHeads, kHeadDim, p.k_norm_weight, p.norm_eps, k.data());
    }
    apply_rope_reference(p.rope, 1, kQHeads, kHeadDim, &p.positions[t], p.cos_sin_cache,
                         p.cos_sin_cache_positions, q.data());
    apply_rope_reference(p.rope, 1, kKvHeads, kHeadDim, &p.positions[t], p.cos_sin_cache,
                         p.cos_sin_cache_positions, k.data());
    if (t < p.q_bf16_rows) {
      for (int64_t e = 0; e < kQRow; ++e)
        (*q_bf16)[t * kQRow + e] = float_to_bf16_bits(q[e]);
    } else {
      quantize_fp8_per_tensor_reference(q.data(), kQRow, p.q_scale, p.q_fp8_dtype,
                                        q_fp8->data() + t * kQRow);
    }
    kv_append_reference(p.kv, 1, k.data(), v.data(), &p.slot_mapping[t], p.k_scale, p.v_scale,
                        k_cache->data(), v_cache->data());
  }
}

template <typename T>
size_t count_mismatches(const std::vector<T>& a, const std::vector<T>& b) {
  size_t n = 0;
  for (size_t i = 0; i < a.size(); ++i)
    n += a[i] != b[i];
  return n;
}

using ComposeCase = std::tuple<RopeVariant, bool, bool, DType, KvLayout>;

class RopeQuantAppendReference : public ::testing::TestWithParam<ComposeCase> {};

TEST_P(RopeQuantAppendReference, EqualsTheSingleOpsComposed) {
  Case c(std::get<0>(GetParam()), std::get<1>(GetParam()), std::get<2>(GetParam()),
         std::get<3>(GetParam()), std::get<4>(GetParam()));
  const RopeQuantAppendParams p = c.params();
  std::vector<uint16_t> q_bf16 = c.q_out_bf16;
  std::vector<uint8_t> q_fp8 = c.q_out_fp8, k_cache = c.k_cache, v_cache = c.v_cache;
  run_pieces(p, &q_bf16, &q_fp8, &k_cache, &v_cache);
  rope_quant_append_reference(p);
  EXPECT_EQ(count_mismatches(c.q_out_bf16, q_bf16), 0u);
  EXPECT_EQ(count_mismatches(c.q_out_fp8, q_fp8), 0u);
  EXPECT_EQ(count_mismatches(c.k_cache, k_cache), 0u);
  EXPECT_EQ(count_mismatches(c.v_cache, v_cache), 0u);
  // Padding tokens 2 and 6 wrote no query row; bf16 rows left the fp8 buffer alone and back.
  EXPECT_EQ(c.q_out_bf16[2 * kQRow], 0xA5A5);
  EXPECT_EQ(c.q_out_fp8[6 * kQRow + kQRow - 1], kPoison);
  EXPECT_EQ(c.q_out_fp8[0], kPoison);
  EXPECT_EQ(c.q_out_bf16[5 * kQRow], 0xA5A5);
  EXPECT_NE(c.q_out_bf16[0], 0xA5A5);
}

std::string compose_case_name(const ::testing::TestParamInfo<ComposeCase>& case_info) {
  static const char* const kVariantNames[] = {"neox_full", "gptj_partial", "neox_partial_llama3"};
  return std::string(kVariantNames[static_cast<int>(std::get<0>(case_info.param))]) +
         (std::get<1>(case_info.param) ? "_cache" : "_sincos") +
         (std::get<2>(case_info.param) ? "_norm" : "_nonorm") + "_" +
         dtype_name(std::get<3>(case_info.param)) + "_" +
         kv_layout_name(std::get<4>(case_info.param));
}

INSTANTIATE_TEST_SUITE_P(
    Variants, RopeQuantAppendReference,
    ::testing::Combine(::testing::Values(RopeVariant::kNeoxFull, RopeVariant::kGptjPartial,
                                         RopeVariant::kNeoxPartialLlama3),
                       ::testing::Bool(), ::testing::Bool(),
                       ::testing::Values(DType::kBF16, DType::kFP8E4M3, DType::kFP8E5M2),
                       ::testing::Values(KvLayout::kNHD, KvLayout::kHND)),
    compose_case_name);

// At position 0 without norm the rotation is the identity, so outputs are the inputs rounded
// once: bf16 rows unchanged bit for bit, fp8 q = fp8(q / q_scale), cache = fp8(k / k_scale(h)).
TEST(RopeQuantAppendReferenceHand, PositionZeroIsPlainQuantization) {
  Case c(RopeVariant::kNeoxFull, false, false, DType::kFP8E4M3, KvLayout::kNHD);
  std::fill(c.positions.begin(), c.positions.end(), 0);
  const RopeQuantAppendParams p = c.params();
  rope_quant_append_reference(p);
  EXPECT_EQ(c.q_out_bf16[1 * kQRow + 7], c.qkv[1 * kQkvRow + 7]);
  const float q = bf16_bits_to_float(c.qkv[5 * kQkvRow + 3]);
  EXPECT_EQ(c.q_out_fp8[5 * kQRow + 3], float_to_fp8_e4m3(q / 0.043f));
  const int64_t slot = c.slots[0];
  const float k_head1 = bf16_bits_to_float(c.qkv[kQRow + kHeadDim + 9]);
  const int64_t at = c.kv.offset(slot / c.kv.page_size, slot % c.kv.page_size, 1, 9);
  EXPECT_EQ(c.k_cache[static_cast<size_t>(at)], float_to_fp8_e4m3(k_head1 / 0.05f));
  const float v_head0 = bf16_bits_to_float(c.qkv[kQRow + kKvRow + 4]);
  const int64_t v_at = c.kv.offset(slot / c.kv.page_size, slot % c.kv.page_size, 0, 4);
  EXPECT_EQ(c.v_cache[static_cast<size_t>(v_at)], float_to_fp8_e4m3(v_head0 / 0.011f));
}

TEST(RopeQuantAppendReferenceHand, AllPaddingWritesNothing) {
  Case c(RopeVariant::kGptjPartial, true, true, DType::kFP8E5M2, KvLayout::kHND);
  std::fill(c.slots.begin(), c.slots.end(), -1);
  const std::vector<uint16_t> q_bf16 = c.q_out_bf16;
  const std::vector<uint8_t> q_fp8 = c.q_out_fp8, k_cache = c.k_cache, v_cache = c.v_cache;
  rope_quant_append_reference(c.params());
  EXPECT_EQ(c.q_out_bf16, q_bf16);
  EXPECT_EQ(c.q_out_fp8, q_fp8);
  EXPECT_EQ(c.k_cache, k_cache);
  EXPECT_EQ(c.v_cache, v_cache);
}

TEST(RopeQuantAppendReferenceHand, Errors) {
  Case c(RopeVariant::kNeoxFull, true, true, DType::kFP8E4M3, KvLayout::kNHD);
  const auto run = [&](const std::function<void(RopeQuantAppendParams&)>& change) {
    RopeQuantAppendParams p = c.params();
    change(p);
    rope_quant_append_reference(p);
  };
  const float zero_head[2] = {0.3f, 0.0f};
  EXPECT_QUENCH_ERROR(run([](auto& p) { p.num_tokens = -1; }), {"num_tokens -1"});
  EXPECT_QUENCH_ERROR(run([](auto& p) { p.num_q_heads = 0; }), {"num_q_heads 0"});
  EXPECT_QUENCH_ERROR(run([](auto& p) { p.num_kv_heads = 3; }), {"num_kv_heads 3", "2"});
  EXPECT_QUENCH_ERROR(run([](auto& p) { p.head_dim = 128; }), {"head_dim 128", "64"});
  EXPECT_QUENCH_ERROR(run([](auto& p) { p.kv.page_size = 24; }), {"page_size 24"});
  EXPECT_QUENCH_ERROR(run([](auto& p) { p.rope.rotary_dim = 66; }), {"rotary_dim 66"});
  EXPECT_QUENCH_ERROR(run([](auto& p) { p.q_row_stride = kQRow - 1; }),
                      {"q_row_stride 255", ">= 256"});
  EXPECT_QUENCH_ERROR(run([](auto& p) { p.k_row_stride = 0; }), {"k_row_stride 0", ">= 128"});
  EXPECT_QUENCH_ERROR(run([](auto& p) { p.v_row_stride = 0; }), {"v_row_stride 0", ">= 128"});
  EXPECT_QUENCH_ERROR(run([](auto& p) { p.q_bf16_rows = 10; }),
                      {"q_bf16_rows 10", "[0, num_tokens=9]"});
  EXPECT_QUENCH_ERROR(run([](auto& p) { p.k = nullptr; }), {"q, k and v"});
  EXPECT_QUENCH_ERROR(run([](auto& p) { p.positions = nullptr; }), {"positions must be set"});
  EXPECT_QUENCH_ERROR(run([](auto& p) { p.slot_mapping = nullptr; }), {"slot_mapping must be set"});
  EXPECT_QUENCH_ERROR(run([](auto& p) { p.v_cache = nullptr; }), {"k_cache and v_cache"});
  EXPECT_QUENCH_ERROR(run([](auto& p) { p.cos_sin_cache_positions = 0; }),
                      {"cos_sin_cache_positions 0"});
  EXPECT_QUENCH_ERROR(run([](auto& p) { p.k_norm_weight = nullptr; }),
                      {"q_norm_weight and k_norm_weight"});
  EXPECT_QUENCH_ERROR(run([](auto& p) { p.norm_eps = 0.0f; }), {"norm_eps 0"});
  EXPECT_QUENCH_ERROR(run([](auto& p) { p.q_out_bf16 = nullptr; }),
                      {"q_out_bf16", "q_bf16_rows=4"});
  EXPECT_QUENCH_ERROR(run([](auto& p) { p.q_out_fp8 = nullptr; }), {"q_out_fp8", "q_bf16_rows=4"});
  EXPECT_QUENCH_ERROR(run([](auto& p) { p.q_fp8_dtype = DType::kBF16; }),
                      {"q_fp8_dtype bf16", "fp8_e4m3, fp8_e5m2"});
  EXPECT_QUENCH_ERROR(run([](auto& p) { p.q_scale = -0.5f; }), {"q_scale -0.5"});
  EXPECT_QUENCH_ERROR(run([](auto& p) { p.v_scale.per_tensor = 0.0f; }), {"v_scale 0"});
  EXPECT_QUENCH_ERROR(run([&](auto& p) { p.k_scale.per_head = zero_head; }), {"k_scale[head 1] 0"});
  EXPECT_QUENCH_ERROR(run([&](auto&) { c.positions[3] = -4; }), {"positions[3]=-4"});
  EXPECT_QUENCH_ERROR(run([&](auto&) { c.positions[3] = kCachePositions; }),
                      {"positions[3]=256", "[0, 256)"});
  c.positions[3] = 1;
  EXPECT_QUENCH_ERROR(run([&](auto&) { c.slots[5] = 6 * 16; }), {"slot_mapping[5]=96", "[0, 96)"});
  EXPECT_QUENCH_ERROR(run([&](auto&) { c.slots[5] = -3; }), {"slot_mapping[5]=-3"});
  c.slots[5] = c.slots[4];
  EXPECT_QUENCH_ERROR(run([](auto&) {}), {"slot_mapping[4]", "slot_mapping[5]"});
  // A bf16 cache takes no scale: per tensor or per head, anything but 1 is refused.
  Case b(RopeVariant::kNeoxFull, false, false, DType::kBF16, KvLayout::kHND);
  const auto run_bf16 = [&](const std::function<void(RopeQuantAppendParams&)>& change) {
    RopeQuantAppendParams p = b.params();
    change(p);
    rope_quant_append_reference(p);
  };
  const float half[2] = {1.0f, 0.5f};
  EXPECT_QUENCH_ERROR(run_bf16([](auto& p) { p.k_scale.per_tensor = 2.0f; }),
                      {"k_scale[head 0] 2", "bf16", "allowed: 1"});
  EXPECT_QUENCH_ERROR(run_bf16([&](auto& p) { p.v_scale.per_head = half; }),
                      {"v_scale[head 1] 0.5", "bf16"});
  // Nothing was written by any of the failed calls.
  EXPECT_EQ(b.k_cache, std::vector<uint8_t>(b.k_cache.size(), kPoison));
  EXPECT_EQ(c.k_cache, std::vector<uint8_t>(c.k_cache.size(), kPoison));
  EXPECT_EQ(c.q_out_fp8, std::vector<uint8_t>(c.q_out_fp8.size(), kPoison));
}

}  // namespace
}  // namespace quench
