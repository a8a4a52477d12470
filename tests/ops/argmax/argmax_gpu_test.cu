// The GPU argmax against argmax_rows_reference, exactly: random rows with many equal maxima (the
// lowest column must win across threads and warps), vocabularies from 1 to Qwen's 151936 columns,
// rows with a NaN or an infinity at random places.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <vector>

#include "quench/core/device_buffer.h"
#include "quench/ops/argmax/argmax.h"
#include "quench/ops/argmax/argmax_reference.h"

namespace quench {
namespace {

TEST(ArgmaxGpu, MatchesTheReferenceExactly) {
  std::mt19937 rng(11);
  // Below and above the width where rows take a cluster of CTAs (parts of 512 to 18992 columns;
  // 4097: the last part one column short).
  for (const int32_t cols : {1, 7, 512, 513, 4095, 4096, 4097, 20001, 128256, 151936}) {
    for (const int32_t rows : {1, 3, 64}) {
      std::uniform_int_distribution<int32_t> levels(-4, 4);  // ties everywhere
      std::uniform_int_distribution<int32_t> column(0, cols - 1);
      std::vector<float> v(static_cast<size_t>(rows) * cols);
      for (float& x : v)
        x = static_cast<float>(levels(rng)) * 0.25f;
      for (int32_t r = 0; r < rows; ++r) {
        float* row = v.data() + static_cast<size_t>(r) * cols;
        // A maximum at a few random columns, so the first one's thread is not always thread 0.
        for (int k = 0; k < 3; ++k)
          row[column(rng)] = 7.0f;
        if (r % 5 == 2) row[column(rng)] = std::numeric_limits<float>::quiet_NaN();
        if (r % 7 == 4) row[column(rng)] = -std::numeric_limits<float>::infinity();
      }
      std::vector<int32_t> want(static_cast<size_t>(rows));
      argmax_rows_reference(v.data(), rows, cols, want.data());
      const DeviceBuffer values = upload(v);
      DeviceBuffer out(static_cast<size_t>(rows) * sizeof(int32_t));
      argmax_rows_cuda(values.as<float>(), rows, cols, out.as<int32_t>(), nullptr);
      std::vector<int32_t> got(static_cast<size_t>(rows));
      check_cuda(cudaMemcpy(got.data(), out.as<void>(), got.size() * sizeof(int32_t),
                            cudaMemcpyDeviceToHost),
                 "download");
      EXPECT_EQ(got, want) << rows << " x " << cols;
    }
  }
}

}  // namespace
}  // namespace quench
