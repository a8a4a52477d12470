// Split-KV merge kernel: one CTA per output row (query token, q head), each merging its row with
// RowMerge::merge_row (decode_row_merge.cuh, compact code: every CTA fetches it cold). The host
// launches it where the main kernel's last split CTAs do not merge (see decode_attention.cu), as
// a programmatic dependent of the main kernel on sm_90+. Without counters (the default) it waits
// for the main grid's completion; with args.merge_counters its CTAs are resident while the main
// kernel runs and merge a row as soon as its splits have counted in.
#include <cuda_runtime.h>

#include "quench/core/error.h"
#include "quench/ops/attention/decode/decode_kernel_args.h"
#include "quench/ops/attention/decode/decode_row_merge.cuh"
#include "quench/ops/attention/decode/dependent_launch.cuh"

namespace quench::decode {
namespace {

// A GPU-scope acquire load: the loads after it see what was written before the counts it saw.
__device__ __forceinline__ uint32_t load_acquire(const uint32_t* address) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  uint32_t value;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(value) : "l"(address) : "memory");
  return value;
#else
  return *reinterpret_cast<const volatile uint32_t*>(address);
#endif
}

template <int kHeadDim>
__global__ void __launch_bounds__(kMergeThreads)
    decode_merge_kernel(const __grid_constant__ DecodeKernelArgs args) {
  using Merge = RowMerge<kHeadDim>;
  __shared__ typename Merge::Scratch scratch;
  // Without counters: the partials are complete and visible past this point.
  if (args.merge_counters == nullptr) wait_for_primary_grid();
  // The next kernel (the next decode step's) may launch once all these CTAs are resident: it
  // waits for this grid's completion before touching anything this grid reads or writes.
  allow_dependent_launch();
  const int64_t rows = static_cast<int64_t>(args.p.num_tokens) * args.p.num_q_heads;
  const int tid = static_cast<int>(threadIdx.x);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t token = row / args.p.num_q_heads;
    const int32_t kv_head = static_cast<int32_t>(row % args.p.num_q_heads) / args.group;
    uint32_t* counter = args.merge_counters == nullptr
                            ? nullptr
                            : args.merge_counters + token * args.p.kv.num_kv_heads + kv_head;
    if (counter != nullptr) {
      if (tid == 0) {
        // Every split CTA counts in within one main kernel's run (microseconds to
        // milliseconds). A count that never arrives is a bug: fail the launch (a CUDA error at
        // the next check) after ~seconds instead of hanging the stream.
        for (uint32_t polls = 0; load_acquire(counter) < static_cast<uint32_t>(args.num_splits);
             ++polls) {
          if (polls == (1u << 27)) __trap();
          __nanosleep(32);
        }
      }
      __syncthreads();
      __threadfence();  // the splits' partials (fenced before their counts) are read after
    }
    Merge::merge_row(args, row, scratch, tid, [] { __syncthreads(); });
    // The group-th merge of the (token, KV head) wraps its counter back to 0.
    if (counter != nullptr && tid == 0)
      atomicInc(counter, static_cast<uint32_t>(args.num_splits + args.group - 1));
  }
}

}  // namespace

void launch_decode_merge(const DecodeKernelArgs& args, bool dependent, cudaStream_t stream) {
  const int64_t rows = static_cast<int64_t>(args.p.num_tokens) * args.p.num_q_heads;
  if (rows == 0) return;
  QUENCH_REQUIRE(args.num_splits <= kMaxSplits, "decode merge: num_splits ", args.num_splits,
                 " exceeds ", kMaxSplits);
  const int64_t blocks = rows;
  void (*kernel)(DecodeKernelArgs) = nullptr;
  switch (args.p.kv.head_dim) {
    case 64:
      kernel = decode_merge_kernel<64>;
      break;
    case 128:
      kernel = decode_merge_kernel<128>;
      break;
    default:
      QUENCH_REQUIRE(args.p.kv.head_dim == 256, "decode merge: head_dim ", args.p.kv.head_dim,
                     " is not supported; allowed: 64, 128, 256");
      kernel = decode_merge_kernel<256>;
      break;
  }
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(blocks < 1048576 ? blocks : 1048576));
  config.blockDim = dim3(kMergeThreads);
  config.stream = stream;
  cudaLaunchAttribute attribute = {};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = dependent ? 1 : 0;  // older GPUs: launched after the kernel
  const cudaError_t status = cudaLaunchKernelEx(&config, kernel, args);
  QUENCH_REQUIRE(status == cudaSuccess, "decode merge launch failed: ", cudaGetErrorString(status));
}

}  // namespace quench::decode
