// kv_append_cuda's host-side checks, on host buffers that are never launched on: every case is
// rejected before the kernel would read a row or a slot (a device fault there would poison the
// CUDA context for every later call).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "harness/expect_error.h"
#include "quench/ops/kv_append/kv_append.h"

namespace quench {
namespace {

// Two tokens of 2 KV heads x 64 FP8 elements (row 128 bytes), dense, 16-byte aligned buffers.
class KvAppendValidation : public ::testing::Test {
 protected:
  KvAppendValidation() {
    p_.kv.num_pages = 2;
    p_.kv.page_size = 16;
    p_.kv.num_kv_heads = 2;
    p_.kv.head_dim = 64;
    p_.kv.dtype = DType::kFP8E4M3;
    p_.num_tokens = 2;
    p_.k = rows_.data();
    p_.v = rows_.data();
    p_.k_row_stride = 128;
    p_.v_row_stride = 128;
    p_.slot_mapping = slots_;
    p_.k_cache = cache_.data();
    p_.v_cache = cache_.data();
  }

  alignas(16) int64_t slots_[2] = {16, 17};
  std::vector<uint4> rows_ = std::vector<uint4>(2 * 128 / 16);
  std::vector<uint4> cache_ = std::vector<uint4>(2 * 16 * 128 / 16);
  KvAppendParams p_;
};

TEST_F(KvAppendValidation, RowStridesShorterThanARowAreRejected) {
  p_.k_row_stride = -128;  // a multiple of 16 bytes, but reads before k
  EXPECT_QUENCH_ERROR(kv_append_cuda(p_, nullptr),
                      {"kv_append: k_row_stride -128", "must be >= 128 (num_kv_heads * head_dim)"});
  p_.k_row_stride = 128;
  p_.v_row_stride = 64;  // rows overlap: token 1 would read token 0's second head
  EXPECT_QUENCH_ERROR(kv_append_cuda(p_, nullptr), {"v_row_stride 64", ">= 128"});
}

TEST_F(KvAppendValidation, RowStridesOffSixteenByteRowsAreRejected) {
  p_.v_row_stride = 136;  // FP8: 136 bytes, rows off the 16-byte grid
  EXPECT_QUENCH_ERROR(kv_append_cuda(p_, nullptr),
                      {"kv_append: v_row_stride 136", "a multiple of 16 elements (16-byte rows)"});
}

TEST_F(KvAppendValidation, NullOrMisalignedArraysAreRejectedByName) {
  p_.slot_mapping = nullptr;
  EXPECT_QUENCH_ERROR(kv_append_cuda(p_, nullptr), {"slot_mapping is null", "2 tokens"});
  p_.slot_mapping = slots_;
  p_.v = nullptr;
  EXPECT_QUENCH_ERROR(kv_append_cuda(p_, nullptr), {"kv_append: v (", "non-null, 16-byte aligned"});
  p_.v = rows_.data();
  p_.k_cache = reinterpret_cast<uint8_t*>(cache_.data()) + 8;
  EXPECT_QUENCH_ERROR(kv_append_cuda(p_, nullptr), {"kv_append: k_cache (", "16-byte aligned"});
}

}  // namespace
}  // namespace quench
