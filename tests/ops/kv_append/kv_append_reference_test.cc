#include "quench/ops/kv_append/kv_append_reference.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "harness/expect_error.h"
#include "harness/random_inputs.h"
#include "quench/numerics/bf16.h"
#include "quench/numerics/fp8.h"

namespace quench {
namespace {

constexpr uint8_t kPoison = 0xA5;

// Byte offset of (page, token, head, dim), written out independently of KvCacheLayout::offset.
size_t byte_offset(const KvCacheLayout& kv, int64_t page, int64_t token, int64_t head,
                   int64_t dim) {
  const int64_t P = kv.page_size, H = kv.num_kv_heads, D = kv.head_dim;
  const int64_t element = kv.layout == KvLayout::kNHD ? ((page * P + token) * H + head) * D + dim
                                                      : ((page * H + head) * P + token) * D + dim;
  return static_cast<size_t>(element) * (kv.dtype == DType::kBF16 ? 2 : 1);
}

// Writes the expected bytes of one element into `cache`.
void expect_element(const KvCacheLayout& kv, float x, float scale, size_t at,
                    std::vector<uint8_t>* cache) {
  if (kv.dtype == DType::kBF16) {
    const uint16_t bits = float_to_bf16_bits(x);
    std::memcpy(cache->data() + at, &bits, 2);
  } else {
    (*cache)[at] = float_to_fp8(x / scale, fp8_format_of(kv.dtype));
  }
}

using AppendCase = std::tuple<KvLayout, int32_t, DType>;

class KvAppendReference : public ::testing::TestWithParam<AppendCase> {};

TEST_P(KvAppendReference, WritesExactlyTheMappedSlots) {
  KvCacheLayout kv;
  kv.layout = std::get<0>(GetParam());
  kv.page_size = std::get<1>(GetParam());
  kv.dtype = std::get<2>(GetParam());
  kv.num_pages = 5;
  kv.num_kv_heads = 3;
  kv.head_dim = 64;
  const bool fp8 = is_fp8(kv.dtype);
  const float k_heads[3] = {0.5f, 0.031f, 3.0f};
  HeadScales k_scale, v_scale;
  if (fp8) {
    k_scale.per_head = k_heads;
    v_scale.per_tensor = 0.07f;
  }
  const int32_t P = kv.page_size;
  // Tokens into the middle of page 2, the end of page 1, page 4's first slot and the last slot
  // overall, with padding tokens in between; page 0 and page 3 stay untouched.
  const std::vector<int64_t> slots = {2 * P + 5, -1, P - 1, 4 * P, -1, 5 * P - 1, 2 * P + 6};
  const int32_t T = static_cast<int32_t>(slots.size());
  testing_support::RandomInputs rng(23);
  const std::vector<float> k = rng.uniform(static_cast<size_t>(T * 3 * 64), -4, 4);
  const std::vector<float> v = rng.uniform(static_cast<size_t>(T * 3 * 64), -0.5f, 0.5f);

  const size_t bytes = static_cast<size_t>(kv.tensor_bytes());
  std::vector<uint8_t> k_cache(bytes, kPoison), v_cache(bytes, kPoison);
  std::vector<uint8_t> k_expected = k_cache, v_expected = v_cache;
  for (int32_t t = 0; t < T; ++t) {
    if (slots[t] < 0) continue;
    for (int32_t h = 0; h < 3; ++h) {
      for (int32_t d = 0; d < 64; ++d) {
        const size_t at = byte_offset(kv, slots[t] / P, slots[t] % P, h, d);
        const size_t src = static_cast<size_t>((t * 3 + h) * 64 + d);
        expect_element(kv, k[src], k_scale.at(h), at, &k_expected);
        expect_element(kv, v[src], v_scale.at(h), at, &v_expected);
      }
    }
  }
  kv_append_reference(kv, T, k.data(), v.data(), slots.data(), k_scale, v_scale, k_cache.data(),
                      v_cache.data());
  size_t k_mismatches = 0, v_mismatches = 0;
  for (size_t i = 0; i < bytes; ++i) {
    k_mismatches += k_cache[i] != k_expected[i];
    v_mismatches += v_cache[i] != v_expected[i];
  }
  EXPECT_EQ(k_mismatches, 0u) << kv.describe();
  EXPECT_EQ(v_mismatches, 0u) << kv.describe();
  // The written area is what the test thinks it is: 5 tokens x 3 heads x 64 dims.
  size_t changed = 0;
  for (size_t i = 0; i < bytes; ++i)
    changed += k_expected[i] != kPoison;
  EXPECT_GT(changed, (fp8 ? 1u : 2u) * 5 * 3 * 64 * 9 / 10);
}

INSTANTIATE_TEST_SUITE_P(LayoutsPagesDtypes, KvAppendReference,
                         ::testing::Combine(::testing::Values(KvLayout::kNHD, KvLayout::kHND),
                                            ::testing::Values(16, 32, 64),
                                            ::testing::Values(DType::kBF16, DType::kFP8E4M3,
                                                              DType::kFP8E5M2)),
                         [](const ::testing::TestParamInfo<AppendCase>& case_info) {
                           return std::string(kv_layout_name(std::get<0>(case_info.param))) +
                                  "_page" + std::to_string(std::get<1>(case_info.param)) + "_" +
                                  dtype_name(std::get<2>(case_info.param));
                         });

KvCacheLayout small_fp8_layout() {
  KvCacheLayout kv;
  kv.num_pages = 2;
  kv.page_size = 16;
  kv.num_kv_heads = 1;
  kv.head_dim = 64;
  kv.dtype = DType::kFP8E4M3;
  return kv;
}

// stored = fp8(x / scale): x = 8 with k_scale 4 stores 2.0 (0x40), x = 8 with v_scale 0.5 stores
// 16.0 (0x58); a multiplying implementation would store 32 and 4.
TEST(KvAppendReferenceHand, ScalesDivide) {
  const KvCacheLayout kv = small_fp8_layout();
  const std::vector<float> x(64, 8.0f);
  const int64_t slot = 17;  // page 1, token 1
  std::vector<uint8_t> k_cache(static_cast<size_t>(kv.tensor_bytes()), kPoison);
  std::vector<uint8_t> v_cache = k_cache;
  HeadScales k_scale{4.0f, nullptr}, v_scale{0.5f, nullptr};
  kv_append_reference(kv, 1, x.data(), x.data(), &slot, k_scale, v_scale, k_cache.data(),
                      v_cache.data());
  EXPECT_EQ(k_cache[17 * 64], 0x40);
  EXPECT_EQ(v_cache[17 * 64 + 63], 0x58);
  EXPECT_EQ(k_cache[16 * 64 + 63], kPoison);
  EXPECT_EQ(k_cache[18 * 64], kPoison);
}

TEST(KvAppendReferenceHand, PaddingOnlyWritesNothing) {
  const KvCacheLayout kv = small_fp8_layout();
  const std::vector<float> x(3 * 64, 1.0f);
  const int64_t slots[3] = {-1, -1, -1};
  std::vector<uint8_t> k_cache(static_cast<size_t>(kv.tensor_bytes()), kPoison);
  std::vector<uint8_t> v_cache = k_cache;
  kv_append_reference(kv, 3, x.data(), x.data(), slots, HeadScales{}, HeadScales{}, k_cache.data(),
                      v_cache.data());
  EXPECT_EQ(k_cache, std::vector<uint8_t>(k_cache.size(), kPoison));
  EXPECT_EQ(v_cache, std::vector<uint8_t>(v_cache.size(), kPoison));
}

TEST(KvAppendReferenceHand, Errors) {
  KvCacheLayout kv = small_fp8_layout();
  const std::vector<float> x(3 * 64, 1.0f);
  std::vector<uint8_t> k_cache(static_cast<size_t>(kv.tensor_bytes()) * 2, kPoison);
  std::vector<uint8_t> v_cache = k_cache;
  auto append = [&](const KvCacheLayout& layout, std::vector<int64_t> slots, HeadScales ks,
                    HeadScales vs) {
    kv_append_reference(layout, static_cast<int32_t>(slots.size()), x.data(), x.data(),
                        slots.data(), ks, vs, k_cache.data(), v_cache.data());
  };
  EXPECT_QUENCH_ERROR(append(kv, {0, 5, 32}, {}, {}),
                      {"slot_mapping[2]=32", "-1 (padding) or [0, 32)"});
  EXPECT_QUENCH_ERROR(append(kv, {-2}, {}, {}), {"slot_mapping[0]=-2", "[0, 32)"});
  EXPECT_QUENCH_ERROR(append(kv, {3, -1, 3}, {}, {}),
                      {"slot_mapping[0]", "slot_mapping[2]", "slot 3"});
  EXPECT_QUENCH_ERROR(append(kv, {1}, HeadScales{0.0f, nullptr}, {}), {"k_scale 0"});
  const float bad[1] = {-2.0f};
  EXPECT_QUENCH_ERROR(append(kv, {1}, {}, HeadScales{1.0f, bad}), {"v_scale[head 0] -2"});
  // Nothing was written by the failed calls.
  EXPECT_EQ(k_cache, std::vector<uint8_t>(k_cache.size(), kPoison));
  KvCacheLayout bf16 = kv;
  bf16.dtype = DType::kBF16;
  EXPECT_QUENCH_ERROR(append(bf16, {1}, HeadScales{2.0f, nullptr}, {}),
                      {"k_scale[head 0] 2", "bf16", "allowed: 1"});
  const float per_head[1] = {0.5f};
  EXPECT_QUENCH_ERROR(append(bf16, {1}, {}, HeadScales{1.0f, per_head}), {"v_scale", "0.5"});
  KvCacheLayout bad_page = kv;
  bad_page.page_size = 8;
  EXPECT_QUENCH_ERROR(append(bad_page, {1}, {}, {}), {"page_size 8", "16, 32, 64"});
}

// A null array is an error naming it, not a crash; with no tokens nothing is read or written.
TEST(KvAppendReferenceHand, NullArraysAreRejectedByName) {
  const KvCacheLayout kv = small_fp8_layout();
  const std::vector<float> x(64, 1.0f);
  const int64_t slot = 17;
  std::vector<uint8_t> k_cache(static_cast<size_t>(kv.tensor_bytes()), kPoison);
  std::vector<uint8_t> v_cache = k_cache;
  const float* k = x.data();
  const float* v = x.data();
  const int64_t* slots = &slot;
  void* k_out = k_cache.data();
  void* v_out = v_cache.data();
  auto append = [&] {
    kv_append_reference(kv, 1, k, v, slots, HeadScales{}, HeadScales{}, k_out, v_out);
  };
  k = nullptr;
  EXPECT_QUENCH_ERROR(append(), {"KV append k is null", "1 tokens need it"});
  k = x.data();
  v = nullptr;
  EXPECT_QUENCH_ERROR(append(), {"KV append v is null"});
  v = x.data();
  slots = nullptr;
  EXPECT_QUENCH_ERROR(append(), {"KV append slot_mapping is null"});
  slots = &slot;
  k_out = nullptr;
  EXPECT_QUENCH_ERROR(append(), {"KV append k_cache is null"});
  k_out = k_cache.data();
  v_out = nullptr;
  EXPECT_QUENCH_ERROR(append(), {"KV append v_cache is null"});
  EXPECT_EQ(k_cache, std::vector<uint8_t>(k_cache.size(), kPoison));
  EXPECT_NO_THROW(kv_append_reference(kv, 0, nullptr, nullptr, nullptr, HeadScales{}, HeadScales{},
                                      nullptr, nullptr));
}

}  // namespace
}  // namespace quench
