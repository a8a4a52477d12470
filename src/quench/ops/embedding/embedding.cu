#include "quench/ops/embedding/embedding.h"

#include "quench/core/error.h"

namespace quench {
namespace {

__global__ void embedding_kernel(int32_t width, const int32_t* ids, const uint16_t* table,
                                 uint16_t* out) {
  const int64_t row = blockIdx.x;
  const uint16_t* src = table + int64_t{ids[row]} * width;
  for (int i = threadIdx.x; i < width; i += blockDim.x)
    out[row * width + i] = src[i];
}

}  // namespace

void embedding_lookup_cuda(int32_t rows, int32_t width, const int32_t* ids, const uint16_t* table,
                           uint16_t* out, cudaStream_t stream) {
  QUENCH_REQUIRE(rows >= 0 && width >= 1, "embedding rows ", rows, " width ", width,
                 " out of range");
  if (rows == 0) return;
  embedding_kernel<<<rows, 256, 0, stream>>>(width, ids, table, out);
  const cudaError_t status = cudaGetLastError();
  QUENCH_REQUIRE(status == cudaSuccess, "embedding launch failed: ", cudaGetErrorString(status));
}

}  // namespace quench
