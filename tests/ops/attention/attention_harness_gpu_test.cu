// The attention harness on a GPU: a problem uploaded by AttentionDeviceProblem is readable by a
// kernel through params(), and downloaded outputs compare against the reference. Also checks
// that the harness headers compile under nvcc.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "harness/attention_device_problem.h"
#include "harness/attention_problem.h"
#include "harness/compare.h"
#include "harness/device_buffer.h"

namespace quench::testing_support {
namespace {

// out[b] = seq_lens[b] * 1000 + block_table[b][0]: reads params' device pointers.
__global__ void read_params_kernel(AttentionParams params, int32_t* out) {
  const int b = static_cast<int>(threadIdx.x);
  if (b < params.num_seqs) {
    out[b] = params.seq_lens[b] * 1000 + params.block_table[b * params.block_table_stride];
  }
}

AttentionProblemConfig fp8_config() {
  AttentionProblemConfig c;
  c.seqs = {{5, 37}, {1, 16}, {0, 0}};
  c.q_dtype = c.kv_dtype = DType::kFP8E4M3;
  c.q_scale = 0.05f;
  c.k_scale = 0.03f;
  c.v_scale = 0.02f;
  c.per_head_kv_scales = true;
  c.out_dtype = DType::kNVFP4;
  c.sinks = true;
  return c;
}

TEST(AttentionHarnessGpu, KernelReadsParamsFromDevice) {
  const AttentionProblem problem(fp8_config());
  const AttentionDeviceProblem device(problem);
  DeviceBuffer out(sizeof(int32_t) * 3);
  read_params_kernel<<<1, 32>>>(device.params(), out.as<int32_t>());
  QUENCH_CUDA_CHECK(cudaGetLastError());
  QUENCH_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<int32_t> got = out.to_host<int32_t>();
  for (int b = 0; b < 3; ++b) {
    EXPECT_EQ(got[b], problem.seq_lens()[b] * 1000 +
                          problem.block_table()[b * problem.block_table_stride()])
        << "seq " << b;
  }
}

TEST(AttentionHarnessGpu, DownloadedOutputsCompareWithTheReference) {
  AttentionProblem problem(fp8_config());
  problem.compute_reference();
  AttentionDeviceProblem device(problem);
  const Tolerance tolerance =
      attention_tolerance(false, DType::kFP8E4M3, DType::kFP8E4M3, DType::kNVFP4);
  EXPECT_EQ(device.download_out(), problem.poisoned_out());
  EXPECT_FALSE(device.compare_output(tolerance).ok);

  const AttentionParams& p = device.params();
  QUENCH_CUDA_CHECK(cudaMemcpy(p.out, problem.expected_out().data(), problem.expected_out().size(),
                               cudaMemcpyHostToDevice));
  QUENCH_CUDA_CHECK(cudaMemcpy(p.out_block_scales, problem.expected_block_scales().data(),
                               problem.expected_block_scales().size(), cudaMemcpyHostToDevice));
  QUENCH_CUDA_CHECK(cudaMemcpy(p.lse, problem.expected_lse().data(),
                               problem.expected_lse().size() * sizeof(float),
                               cudaMemcpyHostToDevice));
  const CompareResult out = device.compare_output({0, 0});
  EXPECT_TRUE(out.ok) << out.summary();
  const CompareResult lse = device.compare_lse({0, 0});
  EXPECT_TRUE(lse.ok) << lse.summary();

  device.poison_outputs();
  EXPECT_EQ(device.download_out(), problem.poisoned_out());
  EXPECT_EQ(device.download_block_scales(), problem.poisoned_block_scales());
}

TEST(AttentionHarnessGpu, CudaCheckNamesTheCallAndTheError) {
  try {
    QUENCH_CUDA_CHECK(cudaSetDevice(-1));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("cudaSetDevice(-1)"), std::string::npos) << message;
    EXPECT_NE(message.find("cudaErrorInvalidDevice"), std::string::npos) << message;
  }
  // The failed call left its error for the next cudaGetLastError: clear it, or the next test's
  // launch check reports it (a LinearFp8Cublaslt test did, in a filtered run's order).
  (void)cudaGetLastError();
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

}  // namespace
}  // namespace quench::testing_support
