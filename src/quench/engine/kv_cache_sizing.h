// How many KV pages the GPU runner gets: vLLM's --gpu-memory-utilization. The engine may take
// that share of the device's total memory; the weights, the per-step buffers at the largest step
// and a reserve for workspaces come out of it, and the rest becomes KV pages. Asking for more than
// is free (another process holds the GPU) or leaving room for less than one max_model_len
// request is an error that names the figures, never a silently smaller cache.
#pragma once

#include <cstdint>

namespace quench {

struct KvMemoryBudget {
  int64_t device_total_bytes = 0;
  int64_t device_free_bytes = 0;  // before the engine allocates anything
  double utilization = 0.9;       // (0, 1]
  int64_t weight_bytes = 0;       // what the runner uploads
  int64_t step_bytes = 0;         // per-step buffers and workspaces at the largest step
  int64_t page_bytes = 0;         // one page of K and V across all layers
  int32_t page_size = 16;         // tokens per page
  int32_t max_model_len = 0;
};

// The number of pages, page 0 (the null page) included. Throws quench::Error naming the flag to
// change when the budget cannot hold one max_model_len request.
int32_t kv_pages_for_memory_budget(const KvMemoryBudget& budget);

}  // namespace quench
