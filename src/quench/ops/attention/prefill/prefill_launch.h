// The host side every prefill kernel shares: reserving its dynamic shared memory and launching
// it on one CTA per (tile of packed query rows, KV head, sequence).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "quench/ops/attention/attention_params.h"

namespace quench::prefill_common {

using PrefillKernelFn = void (*)(AttentionParams);

// Raises `kernel`'s dynamic shared-memory limit to `smem_bytes` (and, with max_carveout, gives
// all of the unified L1/shared storage to shared memory so more CTAs fit). Returns the first
// failing status. Callers keep the result in a function-local static: once per kernel.
cudaError_t reserve_shared_memory(const void* kernel, int smem_bytes, bool max_carveout);
inline cudaError_t reserve_shared_memory(PrefillKernelFn kernel, int smem_bytes,
                                         bool max_carveout) {
  return reserve_shared_memory(reinterpret_cast<const void*>(kernel), smem_bytes, max_carveout);
}

// Launches `kernel` with `threads` threads and `smem_bytes` of dynamic shared memory on a grid of
// ceil(max_q_len * group / block_m) x num_kv_heads x num_seqs CTAs. `reserve_status` is what
// reserve_shared_memory returned; `kernel_name` names the kernel in errors.
void launch_on_query_tiles(PrefillKernelFn kernel, const char* kernel_name,
                           cudaError_t reserve_status, int block_m, int threads, int smem_bytes,
                           const AttentionParams& params, cudaStream_t stream);

// Which of a query-tile grid's first two dimensions holds the query tiles. The hardware starts
// CTAs x-fastest: tiles first starts every (KV head, sequence)'s tiles in turn, heads first a
// sequence's tiles rank by rank over its KV heads. y holds at most 65535.
enum class QueryTileGrid { kTilesFirst, kHeadsFirst };

// Query tiles of the longest chunk: ceil(max_q_len * group / block_m).
int64_t query_tile_count(const AttentionParams& params, int block_m);

// The same grid for a kernel with more parameters than `params`: `kernel_args` is
// cudaLaunchKernel's array of pointers to every argument (params' copy among them); `layout`
// orders the grid's first two dimensions (num_kv_heads x tiles x num_seqs for kHeadsFirst).
void launch_on_query_tiles(const void* kernel, void** kernel_args, const char* kernel_name,
                           cudaError_t reserve_status, int block_m, int threads, int smem_bytes,
                           const AttentionParams& params, cudaStream_t stream,
                           QueryTileGrid layout = QueryTileGrid::kTilesFirst);

}  // namespace quench::prefill_common
