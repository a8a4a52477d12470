// Entry point of quench_gpu_tests. Without a visible CUDA GPU it prints why and exits 77, which
// ctest reports as "skipped": GPU tests never count as passed on a machine that cannot run them.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdio>

int main(int argc, char** argv) {
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess || devices == 0) {
    std::printf("SKIPPED: no CUDA GPU visible (%s); the GPU tests did not run\n",
                status == cudaSuccess ? "0 devices" : cudaGetErrorString(status));
    return 77;
  }
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
