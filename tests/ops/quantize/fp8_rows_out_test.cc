// check_fp8_rows_out (fp8_rows_out.h), the host check that rms_norm and swiglu run before they
// write FP8 rows (their kernels are tested in fp8_rows_out_gpu_test.cu): what it takes, and an
// error naming the bad value and the allowed ones for each thing it refuses.
#include "quench/ops/quantize/fp8_rows_out.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "harness/expect_error.h"

namespace quench {
namespace {

struct Fp8RowsOutFixture {
  std::vector<uint64_t> codes = std::vector<uint64_t>(1024);  // 8-byte aligned
  std::vector<float> scales = std::vector<float>(256);
  Fp8RowsOut out(int32_t group, int32_t padded_rows = 0) {
    Fp8RowsOut o;
    o.data = reinterpret_cast<uint8_t*>(codes.data());
    o.scales = scales.data();
    o.group = group;
    o.layout.padded_rows = padded_rows;
    return o;
  }
};

TEST(Fp8RowsOut, TakesRowsAndGroupsOf128) {
  Fp8RowsOutFixture f;
  EXPECT_NO_THROW(check_fp8_rows_out("op", f.out(264), 3, 264));
  EXPECT_NO_THROW(check_fp8_rows_out("op", f.out(128), 3, 384));
  EXPECT_NO_THROW(check_fp8_rows_out("op", f.out(128, 8), 5, 2048));
  EXPECT_NO_THROW(check_fp8_rows_out("op", f.out(2048, 5), 5, 2048));
  EXPECT_FALSE(Fp8RowsOut{}.requested());
  EXPECT_TRUE(f.out(128).requested());
  EXPECT_EQ(f.out(128).padded_rows(5), 5);
  EXPECT_EQ(f.out(128, 8).padded_rows(5), 8);
}

TEST(Fp8RowsOut, NamesWhatItRefuses) {
  Fp8RowsOutFixture f;
  EXPECT_QUENCH_ERROR(check_fp8_rows_out("rms_norm", f.out(196), 2, 196),
                      {"rms_norm", "width 196", "a positive multiple of 8"});
  EXPECT_QUENCH_ERROR(check_fp8_rows_out("swiglu", f.out(64), 2, 192),
                      {"swiglu", "group 64 over 192", "the whole row (192)", "or 128 where"});
  EXPECT_QUENCH_ERROR(check_fp8_rows_out("op", f.out(128), 2, 264),
                      {"group 128 over 264", "a multiple of 128"});
  EXPECT_QUENCH_ERROR(check_fp8_rows_out("op", f.out(128, 4), 5, 256),
                      {"padded_rows 4", "fewer than the 5 rows", ">= rows"});
  Fp8RowsOut no_scales = f.out(256);
  no_scales.scales = nullptr;
  EXPECT_QUENCH_ERROR(check_fp8_rows_out("op", no_scales, 2, 256), {"scales must not be null"});
  Fp8RowsOut unaligned = f.out(256);
  unaligned.data += 4;
  EXPECT_QUENCH_ERROR(check_fp8_rows_out("op", unaligned, 2, 256), {"8-byte aligned"});
}

}  // namespace
}  // namespace quench
