#include "quench/kv_cache/kv_tensor_map.h"

#include <gtest/gtest.h>

#include "harness/expect_error.h"

namespace quench {
namespace {

KvCacheLayout layout_of(KvLayout layout, DType dtype, int32_t page_size, int32_t heads,
                        int32_t head_dim) {
  KvCacheLayout l;
  l.num_pages = 5;
  l.page_size = page_size;
  l.num_kv_heads = heads;
  l.head_dim = head_dim;
  l.dtype = dtype;
  l.layout = layout;
  return l;
}

// bf16 NHD, 8 heads, head_dim 128, pages of 16: a token row of 8 heads is 2048 bytes, a page
// 32 KB; the box is 64 elements (128 bytes) of one head over the page's 16 tokens.
TEST(KvTensorMap, NhdBf16ShapeByHand) {
  const KvTensorMapShape s =
      kv_tensor_map_shape(layout_of(KvLayout::kNHD, DType::kBF16, 16, 8, 128));
  EXPECT_EQ(s.dims[0], 128u);
  EXPECT_EQ(s.dims[1], 8u);
  EXPECT_EQ(s.dims[2], 16u);
  EXPECT_EQ(s.dims[3], 5u);
  EXPECT_EQ(s.strides_bytes[0], 256u);    // head
  EXPECT_EQ(s.strides_bytes[1], 2048u);   // token
  EXPECT_EQ(s.strides_bytes[2], 32768u);  // page
  EXPECT_EQ(s.box[0], 64u);
  EXPECT_EQ(s.box[1], 1u);
  EXPECT_EQ(s.box[2], 16u);
  EXPECT_EQ(s.box[3], 1u);
  EXPECT_EQ(s.box_bytes, 2048u);
}

// FP8 HND, 2 heads, head_dim 64, pages of 64: a head's page block is 64 rows of 64 bytes; the
// box is 128 elements wide (its second half past head_dim, zero-filled) over 64 tokens.
TEST(KvTensorMap, HndFp8ShapeByHand) {
  const KvTensorMapShape s =
      kv_tensor_map_shape(layout_of(KvLayout::kHND, DType::kFP8E4M3, 64, 2, 64));
  EXPECT_EQ(s.dims[0], 64u);
  EXPECT_EQ(s.dims[1], 64u);
  EXPECT_EQ(s.dims[2], 2u);
  EXPECT_EQ(s.dims[3], 5u);
  EXPECT_EQ(s.strides_bytes[0], 64u);    // token
  EXPECT_EQ(s.strides_bytes[1], 4096u);  // head
  EXPECT_EQ(s.strides_bytes[2], 8192u);  // page
  EXPECT_EQ(s.box[0], 128u);
  EXPECT_EQ(s.box[1], 64u);
  EXPECT_EQ(s.box[2], 1u);
  EXPECT_EQ(s.box[3], 1u);
  EXPECT_EQ(s.box_bytes, 8192u);
}

TEST(KvTensorMap, RejectsWhatTmaCannotDescribe) {
  EXPECT_QUENCH_ERROR(kv_tensor_map_shape(layout_of(KvLayout::kNHD, DType::kBF16, 8, 2, 128)),
                      {"page_size=8", "16, 32, 64"});
  EXPECT_QUENCH_ERROR(kv_tensor_map_shape(layout_of(KvLayout::kNHD, DType::kBF16, 16, 2, 96)),
                      {"head_dim=96", "64, 128, 256"});
  EXPECT_QUENCH_ERROR(kv_tensor_map_shape(layout_of(KvLayout::kHND, DType::kF16, 16, 2, 128)),
                      {"f16", "bf16, fp8_e4m3, fp8_e5m2"});
  EXPECT_QUENCH_ERROR(kv_tensor_map_shape(layout_of(KvLayout::kHND, DType::kBF16, 16, 0, 128)),
                      {"num_kv_heads=0"});
}

}  // namespace
}  // namespace quench
