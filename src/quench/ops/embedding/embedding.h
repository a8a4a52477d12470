// GPU embedding lookup: out[r] = table[ids[r]], bf16 rows of `width`. Ids are checked on the host
// before the step (the model refuses ids outside the vocabulary), so the kernel does not.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace quench {

//   ids: device int32 [rows]; table: bf16 [vocab, width]; out: bf16 [rows, width].
void embedding_lookup_cuda(int32_t rows, int32_t width, const int32_t* ids, const uint16_t* table,
                           uint16_t* out, cudaStream_t stream);

}  // namespace quench
