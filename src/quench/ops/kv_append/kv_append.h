// Standalone GPU paged KV append of already-quantized rows (SPEC §1.4): the last kernel of the
// unfused rope -> quantize -> append chain. A byte copy of each (token, KV head) row into its
// cache slot; slot -1 (padding) writes nothing.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "quench/kv_cache/kv_cache_layout.h"

namespace quench {

struct KvAppendParams {
  int32_t num_tokens = 0;
  // Rows in the cache's element type (FP8 codes or bf16 bits) [T, Hkv, D]; row t at
  // k + t * k_row_stride elements (multiple of 16 bytes). 16-byte aligned.
  const void* k = nullptr;
  const void* v = nullptr;
  int64_t k_row_stride = 0;
  int64_t v_row_stride = 0;
  const int64_t* slot_mapping = nullptr;  // device [T]; -1 = padding; slots beyond the cache skip
  void* k_cache = nullptr;                // kv.tensor_bytes() each, 16-byte aligned
  void* v_cache = nullptr;
  KvCacheLayout kv;
};

// Launches on `stream`; throws quench::Error for invalid params. Graph-capturable.
void kv_append_cuda(const KvAppendParams& p, cudaStream_t stream);

}  // namespace quench
