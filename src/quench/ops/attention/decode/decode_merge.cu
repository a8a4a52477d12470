// Split-KV merge kernel: one CTA per output row (query token, q head), each merging its row with
// RowMerge::merge_row (decode_row_merge.cuh, compact code: every CTA fetches it cold). The host
// launches it where the main kernel's last split CTAs do not merge (see decode_attention.cu), as
// a programmatic dependent of the main kernel on sm_90+. Without counters (the default) it waits
// for the main grid's completion; launched early (DecodeKernelArgs::early_merge_launch) it is
// resident while the main kernel runs and warms its code up meanwhile. With args.merge_counters
// its CTAs are resident while the main kernel runs and merge a row as soon as its splits have
// counted in.
#include <cuda_runtime.h>

#include "quench/core/dependent_launch.cuh"
#include "quench/core/env_switch.h"
#include "quench/core/error.h"
#include "quench/ops/attention/decode/decode_kernel_args.h"
#include "quench/ops/attention/decode/decode_row_merge.cuh"

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

// warm_up (a programmatic dependent launch without counters): before waiting for the main
// grid, each CTA runs its first row once dry (RowMerge::merge_row over no splits: it reads
// nothing the main kernel writes; the zeros it writes are overwritten by the real pass, and
// nothing reads the output before this grid completes). That fetches the merge's code, the
// output dtype's epilogue included, into the SM's instruction cache before the partials are
// ready; with the early launch this happens while the main kernel streams, and the real pass
// runs warm (H200, B1 x 1k: 7.5 -> 7.1 us per call, B1 x 32k 24.3 -> 23.7; bench/LOG.md).
// Launched from the end of the main CTAs' tile loops instead, the pass ran after the main grid
// had ended and only added itself (7.5 -> 7.7 us). The loop below holds the one copy of
// merge_row's code that both passes run (`#pragma unroll 1`: no peeled copy for the dry pass).
template <int kHeadDim>
__global__ void __launch_bounds__(kMergeThreads)
    decode_merge_kernel(const __grid_constant__ DecodeKernelArgs args, bool warm_up) {
  using Merge = RowMerge<kHeadDim>;
  __shared__ typename Merge::Scratch scratch;
  const bool counters = args.merge_counters != nullptr;
  bool dry = warm_up && !counters;
  // Without counters: the partials are complete and visible past this point.
  if (!counters && !dry) wait_for_primary_grid();
  // The next kernel (the next decode step's) may launch once all these CTAs are resident: it
  // waits for this grid's completion before touching anything this grid reads or writes.
  allow_dependent_launch();
  // The rows of the launch's sequences. Rows past them (a CUDA graph's padding tokens, which no
  // sequence owns) get no split partials and no arrivals: they are skipped, never waited on (the
  // wait would trap), and their output is left as it was.
  const int64_t rows = static_cast<int64_t>(args.p.q_offsets[args.p.num_seqs]) * args.p.num_q_heads;
  const int tid = static_cast<int>(threadIdx.x);
#pragma unroll 1
  for (int64_t row = blockIdx.x; row < rows;) {
    const int64_t token = row / args.p.num_q_heads;
    const int32_t kv_head = static_cast<int32_t>(row % args.p.num_q_heads) / args.group;
    uint32_t* counter =
        counters ? args.merge_counters + token * args.p.kv.num_kv_heads + kv_head : nullptr;
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
    Merge::merge_row(
        args, row, scratch, tid, [] { __syncthreads(); }, dry);
    if (dry) {  // the same row again, for real, once the partials are complete and visible
      wait_for_primary_grid();
      dry = false;
      continue;
    }
    // The group-th merge of the (token, KV head) wraps its counter back to 0.
    if (counter != nullptr && tid == 0)
      atomicInc(counter, static_cast<uint32_t>(args.num_splits + args.group - 1));
    row += gridDim.x;
  }
}

// QUENCH_DECODE_MERGE_WARMUP=0: no warm-up pass (see decode_merge_kernel).
bool merge_warm_up_enabled() {
  static const bool enabled = env_switch("QUENCH_DECODE_MERGE_WARMUP", {"1", "0"}) != "0";
  return enabled;
}

}  // namespace

void launch_decode_merge(const DecodeKernelArgs& args, bool dependent, cudaStream_t stream) {
  const int64_t rows = static_cast<int64_t>(args.p.num_tokens) * args.p.num_q_heads;
  if (rows == 0) return;
  QUENCH_REQUIRE(args.num_splits <= kMaxSplits, "decode merge: num_splits ", args.num_splits,
                 " exceeds ", kMaxSplits);
  const int64_t blocks = rows;
  void (*kernel)(DecodeKernelArgs, bool) = nullptr;
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
  // The warm-up pass runs where it overlaps the main kernel: an early dependent launch
  // (QUENCH_DECODE_MERGE_WARMUP=0 turns it off, an A/B switch).
  const bool warm_up = dependent && args.early_merge_launch && merge_warm_up_enabled();
  const cudaError_t status = cudaLaunchKernelEx(&config, kernel, args, warm_up);
  QUENCH_REQUIRE(status == cudaSuccess, "decode merge launch failed: ", cudaGetErrorString(status));
}

}  // namespace quench::decode
