#include "quench/kv_cache/kv_cache_layout.h"

#include <gtest/gtest.h>

#include <set>

#include "harness/expect_error.h"

namespace quench {
namespace {

KvCacheLayout small_layout(KvLayout layout) {
  KvCacheLayout l;
  l.num_pages = 3;
  l.page_size = 16;
  l.num_kv_heads = 2;
  l.head_dim = 64;
  l.dtype = DType::kFP8E4M3;
  l.layout = layout;
  return l;
}

TEST(KvCacheLayout, NhdOffsetsByHand) {
  const KvCacheLayout l = small_layout(KvLayout::kNHD);
  // [page][token][head][dim]: page = 16*2*64 = 2048 elements, token = 128, head = 64.
  EXPECT_EQ(l.offset(0, 0, 0, 0), 0);
  EXPECT_EQ(l.offset(0, 0, 0, 5), 5);
  EXPECT_EQ(l.offset(0, 0, 1, 0), 64);
  EXPECT_EQ(l.offset(0, 1, 0, 0), 128);
  EXPECT_EQ(l.offset(1, 0, 0, 0), 2048);
  EXPECT_EQ(l.offset(2, 15, 1, 63), 2 * 2048 + 15 * 128 + 64 + 63);
  EXPECT_EQ(l.token_stride(), 128);
  EXPECT_EQ(l.head_stride(), 64);
  EXPECT_EQ(l.page_elems(), 2048);
  EXPECT_EQ(l.tensor_elems(), 3 * 2048);
  EXPECT_EQ(l.tensor_bytes(), 3 * 2048);
}

TEST(KvCacheLayout, HndOffsetsByHand) {
  KvCacheLayout l = small_layout(KvLayout::kHND);
  l.dtype = DType::kBF16;
  // [page][head][token][dim]: head = 16*64 = 1024 elements, token = 64.
  EXPECT_EQ(l.offset(0, 0, 0, 5), 5);
  EXPECT_EQ(l.offset(0, 1, 0, 0), 64);
  EXPECT_EQ(l.offset(0, 0, 1, 0), 1024);
  EXPECT_EQ(l.offset(1, 0, 0, 0), 2048);
  EXPECT_EQ(l.offset(2, 15, 1, 63), 2 * 2048 + 1024 + 15 * 64 + 63);
  EXPECT_EQ(l.token_stride(), 64);
  EXPECT_EQ(l.head_stride(), 1024);
  EXPECT_EQ(l.tensor_bytes(), 2 * 3 * 2048);
}

TEST(KvCacheLayout, OffsetsCoverTheTensorOnce) {
  for (KvLayout layout : {KvLayout::kNHD, KvLayout::kHND}) {
    const KvCacheLayout l = small_layout(layout);
    std::set<int64_t> seen;
    for (int p = 0; p < l.num_pages; ++p)
      for (int t = 0; t < l.page_size; ++t)
        for (int h = 0; h < l.num_kv_heads; ++h)
          for (int d = 0; d < l.head_dim; ++d)
            seen.insert(l.offset(p, t, h, d));
    EXPECT_EQ(static_cast<int64_t>(seen.size()), l.tensor_elems());
    EXPECT_EQ(*seen.rbegin(), l.tensor_elems() - 1);
  }
}

TEST(KvCacheLayout, ValidateNamesTheBadFieldAndTheAllowedValues) {
  EXPECT_NO_THROW(small_layout(KvLayout::kNHD).validate());
  KvCacheLayout l = small_layout(KvLayout::kNHD);
  l.page_size = 8;
  EXPECT_QUENCH_ERROR(l.validate(), {"page_size 8", "16, 32, 64"});
  l = small_layout(KvLayout::kNHD);
  l.head_dim = 96;
  EXPECT_QUENCH_ERROR(l.validate(), {"head_dim 96", "64, 128, 256"});
  l = small_layout(KvLayout::kNHD);
  l.num_kv_heads = 0;
  EXPECT_QUENCH_ERROR(l.validate(), {"num_kv_heads 0", ">= 1"});
  l = small_layout(KvLayout::kNHD);
  l.num_pages = 1;
  EXPECT_QUENCH_ERROR(l.validate(), {"num_pages 1", ">= 2", "null page"});
  l = small_layout(KvLayout::kNHD);
  l.dtype = DType::kF16;
  EXPECT_QUENCH_ERROR(l.validate(), {"f16", "bf16, fp8_e4m3, fp8_e5m2"});
}

// Kernels index bytes within one page of one tensor in 32 bits: a page of 2^31 bytes (65536 bf16
// kv heads of 64 x 256) is named, half of it (the same heads in FP8) is accepted.
TEST(KvCacheLayout, ValidateBoundsOnePagesBytes) {
  KvCacheLayout l = small_layout(KvLayout::kNHD);
  l.num_kv_heads = 65536;
  l.page_size = 64;
  l.head_dim = 256;
  l.dtype = DType::kBF16;
  EXPECT_QUENCH_ERROR(l.validate(), {"KV page of 2147483648 bytes", "65536 kv heads",
                                     "at most 2^31 - 1 bytes per page"});
  l.dtype = DType::kFP8E4M3;
  EXPECT_NO_THROW(l.validate());
}

// offset() reads every value but kNHD as HND; validate names a corrupt one instead.
TEST(KvCacheLayout, ValidateRejectsALayoutOutsideTheEnum) {
  KvCacheLayout l = small_layout(KvLayout::kHND);
  EXPECT_NO_THROW(l.validate());
  l.layout = static_cast<KvLayout>(2);
  EXPECT_QUENCH_ERROR(l.validate(), {"KV layout 2", "allowed: NHD (0), HND (1)"});
}

TEST(KvCacheLayout, ParseAndDescribe) {
  EXPECT_EQ(parse_kv_layout("nhd"), KvLayout::kNHD);
  EXPECT_EQ(parse_kv_layout("HND"), KvLayout::kHND);
  EXPECT_QUENCH_ERROR(parse_kv_layout("NDH"), {"'NDH'", "NHD, HND"});
  EXPECT_EQ(small_layout(KvLayout::kHND).describe(),
            "HND pages=3 page_size=16 kv_heads=2 head_dim=64 dtype=fp8_e4m3");
}

}  // namespace
}  // namespace quench
