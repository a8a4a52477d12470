// Launching a kernel in thread block clusters (sm_90): a 1-D grid whose consecutive CTAs form
// clusters of `cluster_ctas`, through cudaLaunchKernelEx. The kernels that split a row over a
// cluster (argmax, logprobs) join their parts through distributed shared memory.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "quench/core/cuda_device.h"
#include "quench/core/error.h"

namespace quench {

// Whether `gpu` runs this build's cluster kernels: they are sm_90a machine code; any other GPU
// runs the Ampere PTX, where their bodies are traps.
inline bool runs_cluster_kernels(const CudaDeviceProperties& gpu) {
  return gpu.compute_capability_major == 9 && gpu.compute_capability_minor == 0;
}

// Launches kernel<<<grid_ctas, threads, 0, stream>>>(args...) in clusters of cluster_ctas CTAs
// (grid_ctas a multiple of it). Throws quench::Error naming `who` when the launch fails.
template <typename... Params, typename... Args>
void launch_in_clusters(const char* who, void (*kernel)(Params...), unsigned grid_ctas,
                        unsigned threads, unsigned cluster_ctas, cudaStream_t stream,
                        Args&&... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(grid_ctas);
  config.blockDim = dim3(threads);
  config.stream = stream;
  cudaLaunchAttribute cluster;
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = cluster_ctas;
  cluster.val.clusterDim.y = 1;
  cluster.val.clusterDim.z = 1;
  config.attrs = &cluster;
  config.numAttrs = 1;
  const cudaError_t launched = cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
  QUENCH_REQUIRE(launched == cudaSuccess, who, " launch failed: ", cudaGetErrorString(launched));
}

}  // namespace quench
