// rope_cuda's host-side checks, on host buffers that are never launched on: every case is
// rejected before the kernel would read a row (a device fault there would poison the CUDA
// context for every later call).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "harness/expect_error.h"
#include "quench/ops/rope/rope.h"

namespace quench {
namespace {

// uint4 storage keeps every buffer 16-byte aligned (8 bf16 elements per uint4).
uint16_t* bf16s(std::vector<uint4>& storage) {
  return reinterpret_cast<uint16_t*>(storage.data());
}

// Two tokens of 4 q heads and 2 KV heads x 64 bf16 elements, dense, 16-byte aligned buffers.
class RopeValidation : public ::testing::Test {
 protected:
  RopeValidation() {
    p_.num_tokens = 2;
    p_.num_q_heads = 4;
    p_.num_kv_heads = 2;
    p_.head_dim = 64;
    p_.rope.rotary_dim = 64;
    p_.q = bf16s(q_);
    p_.k = bf16s(k_);
    p_.q_row_stride = 4 * 64;
    p_.k_row_stride = 2 * 64;
    p_.positions = positions_;
    p_.q_out = bf16s(q_out_);
    p_.k_out = bf16s(k_out_);
  }

  int32_t positions_[2] = {0, 1};
  std::vector<uint4> q_ = std::vector<uint4>(2 * 4 * 64 / 8);
  std::vector<uint4> k_ = std::vector<uint4>(2 * 2 * 64 / 8);
  std::vector<uint4> q_out_ = std::vector<uint4>(2 * 4 * 64 / 8);
  std::vector<uint4> k_out_ = std::vector<uint4>(2 * 2 * 64 / 8);
  RopeParams p_;
};

TEST_F(RopeValidation, RowStridesShorterThanARowAreRejected) {
  p_.q_row_stride = -256;  // a multiple of 8, but reads before q
  EXPECT_QUENCH_ERROR(rope_cuda(p_, nullptr),
                      {"q_row_stride -256", "must be >= 256 (num_q_heads * head_dim)"});
  p_.q_row_stride = 256;
  p_.k_row_stride = 64;  // rows overlap: token 1 would read token 0's second head
  EXPECT_QUENCH_ERROR(rope_cuda(p_, nullptr),
                      {"k_row_stride 64", "must be >= 128 (num_kv_heads * head_dim)"});
}

// The kernel numbers head rows in int32, one block past the last: a batch whose rows sit within a
// block of 2^31 is refused before any array is read.
TEST_F(RopeValidation, HeadRowsNearTheInt32LimitAreRejected) {
  p_.num_tokens = (INT32_MAX - 10) / 6;  // 6 heads: 2147483634 head rows
  EXPECT_QUENCH_ERROR(rope_cuda(p_, nullptr), {"rope: 2147483634 head rows", "at most 2^31 - 1"});
}

TEST_F(RopeValidation, RowStridesOffSixteenByteRowsAreRejected) {
  p_.q_row_stride = 260;  // bf16: 520 bytes, rows off the 16-byte grid
  EXPECT_QUENCH_ERROR(rope_cuda(p_, nullptr),
                      {"rope: q_row_stride 260", "a multiple of 8 elements (16-byte rows)"});
}

TEST_F(RopeValidation, NullOrMisalignedArraysAreRejectedByName) {
  p_.positions = nullptr;
  EXPECT_QUENCH_ERROR(rope_cuda(p_, nullptr), {"positions is null", "2 tokens"});
  p_.positions = positions_;
  p_.k = nullptr;
  EXPECT_QUENCH_ERROR(rope_cuda(p_, nullptr), {"rope: k (", "non-null, 16-byte aligned"});
  p_.k = bf16s(k_);
  p_.q_out = bf16s(q_out_) + 4;  // 8 bytes past an aligned start
  EXPECT_QUENCH_ERROR(rope_cuda(p_, nullptr), {"rope: q_out (", "16-byte aligned"});
  p_.q_out = bf16s(q_out_);
  p_.k_out = nullptr;
  EXPECT_QUENCH_ERROR(rope_cuda(p_, nullptr), {"rope: k_out (", "non-null"});
}

}  // namespace
}  // namespace quench
