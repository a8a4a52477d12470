// current_cuda_device_properties: without a GPU it reports why (and the throwing form names its
// caller); with one, the cached properties are plausible and stable from call to call.
#include "quench/core/cuda_device.h"

#include <gtest/gtest.h>

#include <string>

#include "quench/core/error.h"

namespace quench {
namespace {

TEST(CudaDeviceProperties, DeviceOrReason) {
  std::string error;
  const auto first = current_cuda_device_properties(&error);
  if (!first) {
    EXPECT_NE(error.find("no CUDA device"), std::string::npos) << error;
    try {
      require_current_cuda_device_properties("the caller");
      ADD_FAILURE() << "expected quench::Error without a device";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("the caller: no CUDA device"), std::string::npos)
          << e.what();
    }
    return;
  }
  EXPECT_TRUE(error.empty()) << error;
  EXPECT_GE(first->compute_capability_major, 5);
  EXPECT_GE(first->compute_capability_minor, 0);
  EXPECT_GT(first->sm_count, 0);
  const auto second = current_cuda_device_properties();
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->device, first->device);
  EXPECT_EQ(second->compute_capability_major, first->compute_capability_major);
  EXPECT_EQ(second->compute_capability_minor, first->compute_capability_minor);
  EXPECT_EQ(second->sm_count, first->sm_count);
  EXPECT_EQ(require_current_cuda_device_properties("the caller").sm_count, first->sm_count);
}

}  // namespace
}  // namespace quench
