#include "quench/core/dtype.h"

#include <gtest/gtest.h>

#include "quench/core/error.h"

namespace quench {
namespace {

TEST(DType, NamesRoundTrip) {
  for (DType d : {DType::kF32, DType::kBF16, DType::kF16, DType::kFP8E4M3, DType::kFP8E5M2,
                  DType::kNVFP4, DType::kI32, DType::kU8}) {
    EXPECT_EQ(parse_dtype(dtype_name(d)), d);
  }
  EXPECT_EQ(parse_dtype("fp8"), DType::kFP8E4M3);
}

TEST(DType, UnknownNameListsAllowedValues) {
  try {
    parse_dtype("fp9");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'fp9'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("fp8_e5m2"), std::string::npos);
  }
}

TEST(DType, Bytes) {
  EXPECT_EQ(dtype_bytes(DType::kNVFP4, 3), 2u);
  EXPECT_EQ(dtype_bytes(DType::kBF16, 3), 6u);
  EXPECT_EQ(dtype_bytes(DType::kFP8E4M3, 3), 3u);
}

}  // namespace
}  // namespace quench
