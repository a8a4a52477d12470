#include "quench/ops/attention/prefill/prefill_launch.h"

#include <cstdint>

#include "quench/core/error.h"

namespace quench::prefill_common {

cudaError_t reserve_shared_memory(const void* kernel, int smem_bytes, bool max_carveout) {
  cudaError_t status =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
  if (status == cudaSuccess && max_carveout) {
    status = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                  cudaSharedmemCarveoutMaxShared);
  }
  return status;
}

int64_t query_tile_count(const AttentionParams& params, int block_m) {
  const int group = params.num_q_heads / params.kv.num_kv_heads;
  const int64_t rows = static_cast<int64_t>(params.max_q_len) * group;
  return (rows + block_m - 1) / block_m;
}

void launch_on_query_tiles(const void* kernel, void** kernel_args, const char* kernel_name,
                           cudaError_t reserve_status, int block_m, int threads, int smem_bytes,
                           const AttentionParams& params, cudaStream_t stream,
                           QueryTileGrid layout) {
  QUENCH_REQUIRE(reserve_status == cudaSuccess, kernel_name, ": cannot reserve ", smem_bytes,
                 " bytes of shared memory: ", cudaGetErrorString(reserve_status));
  const auto tiles = static_cast<unsigned>(query_tile_count(params, block_m));
  const auto heads = static_cast<unsigned>(params.kv.num_kv_heads);
  const bool heads_first = layout == QueryTileGrid::kHeadsFirst;
  const dim3 grid(heads_first ? heads : tiles, heads_first ? tiles : heads,
                  static_cast<unsigned>(params.num_seqs));
  const cudaError_t status = cudaLaunchKernel(kernel, grid, dim3(static_cast<unsigned>(threads)),
                                              kernel_args, static_cast<size_t>(smem_bytes), stream);
  QUENCH_REQUIRE(status == cudaSuccess, kernel_name,
                 ": launch failed: ", cudaGetErrorString(status));
}

void launch_on_query_tiles(PrefillKernelFn kernel, const char* kernel_name,
                           cudaError_t reserve_status, int block_m, int threads, int smem_bytes,
                           const AttentionParams& params, cudaStream_t stream) {
  AttentionParams args = params;
  void* kernel_args[] = {&args};
  launch_on_query_tiles(reinterpret_cast<const void*>(kernel), kernel_args, kernel_name,
                        reserve_status, block_m, threads, smem_bytes, params, stream);
}

}  // namespace quench::prefill_common
