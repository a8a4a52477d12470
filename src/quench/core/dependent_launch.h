// The host side of programmatic dependent launch for the decode step's small kernels and linear
// layers (core/dependent_launch.cuh is the device side): a kernel launched as a programmatic
// dependent may start while the kernel before it still runs, up to its wait_for_primary_grid. In
// a one-token step most kernels last a few microseconds, so each launch's latency and each
// linear layer's first weight reads would otherwise sit between two kernels.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "quench/core/error.h"

namespace quench {

// True where the step's kernels launch as programmatic dependents: the current device is sm_90+
// and QUENCH_PDL is not 0 (an A/B switch; the decode attention kernels have their own). Read once.
bool step_dependent_launch_enabled();

// kernel<<<grid, block, shared_bytes, stream>>>(args...), as a programmatic dependent of the
// stream's previous kernel when `dependent` (the kernel must call wait_for_primary_grid before it
// touches what earlier kernels write). Throws quench::Error naming `what` when the launch fails.
template <typename... Params, typename... Args>
void launch_kernel(const char* what, void (*kernel)(Params...), dim3 grid, dim3 block,
                   size_t shared_bytes, cudaStream_t stream, bool dependent, Args&&... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  cudaLaunchAttribute attribute = {};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = dependent ? 1 : 0;
  const cudaError_t status = cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
  QUENCH_REQUIRE(status == cudaSuccess, what, " launch failed: ", cudaGetErrorString(status));
}

}  // namespace quench
