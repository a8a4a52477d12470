// Host side of decode attention: validation, launch shape (pipeline depth, KV splits), dispatch
// to the instantiation for (head dim, KV dtype, query dtype), and the split-KV merge.
#include "quench/ops/attention/decode/decode_attention.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>

#include "quench/core/error.h"
#include "quench/ops/attention/decode/decode_kernel_args.h"

namespace quench {
namespace {

using decode::DecodeKernelArgs;
using decode::DecodeKernelInfo;

// Pipeline buffers per CTA: ~108 KiB keeps two CTAs per SM (227 KiB) with 2-7 tiles in
// flight each (fp8 hd128: 5 stages of 18 KiB; bf16 hd128: 3 of 34 KiB).
constexpr int kStageBudgetBytes = 108 * 1024;
constexpr int kMaxStages = 8;
// A split covers at least this many 64-token tiles, so the merge stays cheap.
constexpr int kMinTilesPerSplit = 2;
constexpr int kMaxSplits = 64;

void check_cuda(cudaError_t status, const char* what) {
  QUENCH_REQUIRE(status == cudaSuccess, "decode attention: ", what,
                 " failed: ", cudaGetErrorString(status));
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

DecodeKernelInfo kernel_info(const AttentionParams& p) {
  switch (p.kv.dtype) {
    case DType::kFP8E4M3:
      return decode::decode_kernel_info_kv_e4m3(p.kv.head_dim, p.q_dtype);
    case DType::kFP8E5M2:
      return decode::decode_kernel_info_kv_e5m2(p.kv.head_dim, p.q_dtype);
    default:
      return decode::decode_kernel_info_kv_bf16(p.kv.head_dim, p.q_dtype);
  }
}

struct DeviceLimits {
  int sm_count = 0;
  int ctas_per_sm = 0;
};

// Opts the kernel into its shared memory and asks how many CTAs fit on an SM, once per
// (kernel, device, smem size): later calls (and CUDA graph captures) make no runtime calls.
DeviceLimits device_limits(const void* fn, int32_t smem_bytes) {
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  static std::mutex mutex;
  static std::map<std::tuple<const void*, int, int32_t>, DeviceLimits> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_tuple(fn, device, smem_bytes);
  if (const auto it = cache.find(key); it != cache.end()) return it->second;
  DeviceLimits limits;
  check_cuda(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes),
             "cudaFuncSetAttribute(max dynamic shared memory)");
  check_cuda(cudaDeviceGetAttribute(&limits.sm_count, cudaDevAttrMultiProcessorCount, device),
             "cudaDeviceGetAttribute(SM count)");
  check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&limits.ctas_per_sm, fn,
                                                           decode::kThreads, smem_bytes),
             "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  cache.emplace(key, limits);
  return limits;
}

struct LaunchShape {
  DecodeKernelInfo info;
  DecodeKernelArgs args;
  int32_t smem_bytes = 0;
  dim3 grid;
};

LaunchShape launch_shape(const AttentionParams& p) {
  LaunchShape shape;
  shape.info = kernel_info(p);
  DecodeKernelArgs& args = shape.args;
  args.p = p;
  args.group = p.num_q_heads / p.kv.num_kv_heads;
  args.row_groups =
      std::max(1, (p.max_q_len * args.group + decode::kRowsPerCta - 1) / decode::kRowsPerCta);
  args.num_stages = std::clamp(kStageBudgetBytes / shape.info.stage_bytes, 2, kMaxStages);
  shape.smem_bytes = shape.info.fixed_bytes +
                     std::max(args.num_stages * shape.info.stage_bytes, shape.info.combine_bytes);
  const DeviceLimits limits = device_limits(shape.info.fn, shape.smem_bytes);
  const int64_t slots = static_cast<int64_t>(limits.sm_count) * std::max(limits.ctas_per_sm, 1);
  const int64_t base = static_cast<int64_t>(p.num_seqs) * p.kv.num_kv_heads * args.row_groups;
  // KV tokens one CTA may visit: the whole sequence, or the window (+1 tile of misalignment).
  int64_t visible = p.max_seq_len;
  if (p.window_left >= 0) {
    visible = std::min<int64_t>(
        visible, static_cast<int64_t>(p.window_left) + p.max_q_len + decode::kTileTokens);
  }
  const int64_t tiles = (visible + decode::kTileTokens - 1) / decode::kTileTokens;
  int64_t splits = 1;
  if (base > 0 && base < slots) {
    splits = std::min({slots / base, std::max<int64_t>(1, tiles / kMinTilesPerSplit),
                       static_cast<int64_t>(kMaxSplits)});
  }
  args.num_splits = static_cast<int32_t>(std::max<int64_t>(splits, 1));
  shape.grid =
      dim3(static_cast<unsigned>(args.num_splits), static_cast<unsigned>(p.kv.num_kv_heads),
           static_cast<unsigned>(p.num_seqs * args.row_groups));
  return shape;
}

size_t workspace_bytes_for(const AttentionParams& p, int32_t num_splits) {
  if (num_splits <= 1) return 0;
  const size_t rows = static_cast<size_t>(num_splits) * static_cast<size_t>(p.num_tokens) *
                      static_cast<size_t>(p.num_q_heads);
  return rows * (static_cast<size_t>(p.kv.head_dim) + 1) * sizeof(float);
}

}  // namespace

void validate_decode_attention_params(const AttentionParams& p) {
  p.kv.validate();
  QUENCH_REQUIRE(p.q_dtype == DType::kBF16 || p.q_dtype == DType::kF16,
                 "decode attention: query dtype ", dtype_name(p.q_dtype),
                 " is not supported; allowed: bf16, f16 (decode never takes an FP8 query)");
  QUENCH_REQUIRE(p.num_q_heads >= 1 && p.num_q_heads % p.kv.num_kv_heads == 0,
                 "decode attention: num_q_heads ", p.num_q_heads,
                 " must be a positive multiple of num_kv_heads ", p.kv.num_kv_heads);
  QUENCH_REQUIRE(p.out_dtype == DType::kBF16 || p.out_dtype == DType::kFP8E4M3 ||
                     p.out_dtype == DType::kFP8E5M2 || p.out_dtype == DType::kNVFP4,
                 "decode attention: output dtype ", dtype_name(p.out_dtype),
                 " is not supported; allowed: bf16, fp8_e4m3, fp8_e5m2, nvfp4");
  QUENCH_REQUIRE(p.num_seqs >= 0 && p.num_tokens >= 0 && p.max_q_len >= 0 && p.max_seq_len >= 0,
                 "decode attention: negative size (num_seqs ", p.num_seqs, ", num_tokens ",
                 p.num_tokens, ", max_q_len ", p.max_q_len, ", max_seq_len ", p.max_seq_len, ")");
  QUENCH_REQUIRE(!is_fp8(p.out_dtype) || p.o_scale > 0.0f, "decode attention: o_scale ", p.o_scale,
                 " must be > 0 for an FP8 output");
  if (p.out_dtype == DType::kNVFP4) {
    QUENCH_REQUIRE(p.out_block_scales != nullptr,
                   "decode attention: NVFP4 output needs out_block_scales");
    QUENCH_REQUIRE(
        p.out_scale_row_offset >= 0 && p.out_scale_row_offset + p.num_tokens <= p.out_scale_rows,
        "decode attention: NVFP4 scale rows [", p.out_scale_row_offset, ", ",
        p.out_scale_row_offset + p.num_tokens, ") exceed out_scale_rows ", p.out_scale_rows);
  }
  if (p.num_seqs == 0) return;
  QUENCH_REQUIRE(p.q != nullptr && p.k_cache != nullptr && p.v_cache != nullptr &&
                     p.out != nullptr && p.q_offsets != nullptr && p.seq_lens != nullptr &&
                     p.block_table != nullptr,
                 "decode attention: q, k_cache, v_cache, out, q_offsets, seq_lens and "
                 "block_table must all be device pointers (one is null)");
  QUENCH_REQUIRE(aligned16(p.q) && aligned16(p.k_cache) && aligned16(p.v_cache) && aligned16(p.out),
                 "decode attention: q, k_cache, v_cache and out must be 16-byte aligned");
  QUENCH_REQUIRE(p.block_table_stride >= 1, "decode attention: block_table_stride ",
                 p.block_table_stride, " must be >= 1");
  const int64_t row_groups =
      (static_cast<int64_t>(p.max_q_len) * (p.num_q_heads / p.kv.num_kv_heads) +
       decode::kRowsPerCta - 1) /
      decode::kRowsPerCta;
  QUENCH_REQUIRE(p.num_seqs * std::max<int64_t>(row_groups, 1) <= 65535,
                 "decode attention: num_seqs ", p.num_seqs, " x query-row groups ", row_groups,
                 " exceeds the grid limit 65535");
}

int decode_attention_num_splits(const AttentionParams& params) {
  validate_decode_attention_params(params);
  if (params.num_seqs == 0) return 1;
  return launch_shape(params).args.num_splits;
}

size_t decode_attention_workspace_bytes(const AttentionParams& params) {
  return workspace_bytes_for(params, decode_attention_num_splits(params));
}

void decode_attention(const AttentionParams& params, void* workspace, size_t workspace_bytes,
                      cudaStream_t stream) {
  validate_decode_attention_params(params);
  if (params.num_seqs == 0 || params.num_tokens == 0) return;
  LaunchShape shape = launch_shape(params);
  DecodeKernelArgs& args = shape.args;
  if (workspace == nullptr) {
    args.num_splits = 1;
    shape.grid.x = 1;
  } else if (args.num_splits > 1) {
    const size_t needed = workspace_bytes_for(params, args.num_splits);
    QUENCH_REQUIRE(workspace_bytes >= needed, "decode attention: workspace of ", workspace_bytes,
                   " bytes is too small; ", needed, " needed for ", args.num_splits,
                   " KV splits (see decode_attention_workspace_bytes)");
    QUENCH_REQUIRE(aligned16(workspace), "decode attention: workspace must be 16-byte aligned");
    args.partial_o = static_cast<float*>(workspace);
    args.partial_lse = args.partial_o + static_cast<size_t>(args.num_splits) *
                                            static_cast<size_t>(params.num_tokens) *
                                            static_cast<size_t>(params.num_q_heads) *
                                            static_cast<size_t>(params.kv.head_dim);
  }
  void* kernel_args[] = {&args};
  check_cuda(cudaLaunchKernel(shape.info.fn, shape.grid, dim3(decode::kThreads), kernel_args,
                              static_cast<size_t>(shape.smem_bytes), stream),
             "decode kernel launch");
  if (args.num_splits > 1) decode::launch_decode_merge(args, stream);
}

}  // namespace quench
