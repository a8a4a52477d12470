// One run of a `quench layer` step: fill the cached prefixes, then RoPE + quantize + append the
// new tokens and run the attention op, on the host (reference functions, host buffers) or on
// the GPU (CUDA kernels, device buffers). The KV cache dtype and the kernels come from the
// selection, so the same workload runs as the FP8 path, the bf16 baseline and the reference.
#pragma once

#include <vector>

#include "quench/attention/attention_kernel_selection.h"
#include "quench/attention/attention_op.h"
#include "quench/layer/layer_workload.h"
#include "quench/ops/rope_quant_append/rope_quant_append_params.h"

namespace quench {

// Milliseconds per stage: host wall time on the CPU, CUDA events on the GPU (GPU figures are
// the mean over repeated runs after a warm-up run).
struct LayerStepTimings {
  double prefix_fill_ms = 0.0;
  double rope_append_ms = 0.0;
  double attention_ms = 0.0;
};

struct LayerStepResult {
  std::vector<float> out;  // [T, Hq, D] attention output (bf16 values widened to float)
  LayerStepTimings timings;
  size_t attention_workspace_bytes = 0;
  int64_t kv_cache_bytes = 0;  // K and V tensors together
};

// Buffers of one run, all in the kernels' memory space (host or device). Shapes as in
// LayerWorkload; q_bf16 and q_fp8 are [T, Hq, D] (each phase uses its own rows), out is bf16
// [T, Hq, D], prefix_q_scratch bf16 [P, Hkv, D] (the prefix fill computes no query: its k rows
// stand in for q and the rotated copy lands here, unread).
struct LayerStepBuffers {
  const uint16_t* q = nullptr;
  const uint16_t* k = nullptr;
  const uint16_t* v = nullptr;
  const int32_t* positions = nullptr;  // [T]
  const int64_t* slots = nullptr;      // [T]
  const uint16_t* prefix_k = nullptr;
  const uint16_t* prefix_v = nullptr;
  const int32_t* prefix_positions = nullptr;  // [P]
  const int64_t* prefix_slots = nullptr;      // [P]
  const float* cos_sin_cache = nullptr;
  uint16_t* prefix_q_scratch = nullptr;
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  uint16_t* q_bf16 = nullptr;
  uint8_t* q_fp8 = nullptr;
  uint16_t* out = nullptr;
};

// The paged cache of this run: the workload's geometry in the selection's KV dtype.
KvCacheLayout layer_kv_layout(const LayerWorkload& w, const AttentionBackendSelection& selection);

// RoPE + append of the cached prefixes (no query; see LayerStepBuffers::prefix_q_scratch).
RopeQuantAppendParams prefix_fill_params(const LayerWorkload& w,
                                         const AttentionBackendSelection& selection,
                                         const AttentionScales& scales, const LayerStepBuffers& b);

// RoPE + quantize + append of the new tokens. Query rows go out in the dtype each phase's kernel
// takes: bf16 rows for a bf16 phase, FP8 (q / q_scale) for an FP8 phase, decode rows first.
RopeQuantAppendParams step_append_params(const LayerWorkload& w,
                                         const AttentionBackendSelection& selection,
                                         const AttentionScales& scales, const LayerStepBuffers& b);

// The attention op's arguments for buffers b and a metadata view in the same memory space.
AttentionOpArgs layer_attention_args(const LayerWorkload& w,
                                     const AttentionBackendSelection& selection,
                                     const LayerStepBuffers& b, const AttentionMetadataView& m);

// 1 / sqrt(head_dim).
AttentionLayerSettings layer_attention_settings(const LayerWorkload& w);

// Host run: the selection's kernels must be host kernels.
LayerStepResult run_layer_step_host(const LayerWorkload& w,
                                    const AttentionBackendSelection& selection,
                                    const AttentionScales& scales);

// GPU run on the current device: the selection's kernels must be device kernels. Throws
// quench::Error naming the failed CUDA call.
LayerStepResult run_layer_step_device(const LayerWorkload& w,
                                      const AttentionBackendSelection& selection,
                                      const AttentionScales& scales, RopeAppendPath fusion);

}  // namespace quench
