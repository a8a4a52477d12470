#include "quench/core/error.h"
#include "quench/ops/sampling/apply_logit_edits.h"

namespace quench {
namespace {

constexpr int kThreads = 256;

__global__ void apply_logit_edits_kernel(LogitEditsArgs a) {
  const int r = blockIdx.x;
  float* row = a.logits + static_cast<int64_t>(a.rows[r]) * a.vocab;
  for (int32_t k = a.edit_offsets[r] + static_cast<int32_t>(threadIdx.x); k < a.edit_offsets[r + 1];
       k += kThreads) {
    const LogitEdit e = a.edits[k];
    row[e.token] = edited_logit(row[e.token], e);
  }
  const int32_t mask = a.allowed_offsets[r];
  if (mask < 0) return;
  __syncthreads();  // the mask wins over an edit of the same token
  const uint32_t* bits = a.allowed_bits + mask;
  for (int32_t t = static_cast<int32_t>(threadIdx.x); t < a.vocab; t += kThreads)
    if (!logit_allowed(bits, a.allowed_words, t)) row[t] = kMaskedLogit;
}

}  // namespace

void apply_logit_edits_cuda(const LogitEditsArgs& a, cudaStream_t stream) {
  QUENCH_REQUIRE(a.n >= 0 && a.vocab >= 1 && a.allowed_words >= 0, "logit edits: n ", a.n,
                 ", vocab ", a.vocab, " and allowed words ", a.allowed_words,
                 " must be >= 0, >= 1 and >= 0");
  if (a.n == 0) return;
  QUENCH_REQUIRE(a.logits != nullptr && a.rows != nullptr && a.edit_offsets != nullptr &&
                     a.allowed_offsets != nullptr,
                 "logit edits: a device array is null");
  apply_logit_edits_kernel<<<static_cast<unsigned>(a.n), kThreads, 0, stream>>>(a);
  const cudaError_t status = cudaGetLastError();
  QUENCH_REQUIRE(status == cudaSuccess, "logit edits launch failed: ", cudaGetErrorString(status));
}

}  // namespace quench
