#include "quench/layer/layer_step.h"

#include <chrono>
#include <cmath>

#include "quench/attention/query_output_split.h"
#include "quench/numerics/bf16.h"
#include "quench/ops/rope_quant_append/rope_quant_append_reference.h"

namespace quench {
namespace {

// A bf16 cache stores values unscaled (rope_quant_append_params.h requires unit scales).
HeadScales store_scale(const HeadScales& scale, DType kv_dtype) {
  return kv_dtype == DType::kBF16 ? HeadScales{} : scale;
}

RopeQuantAppendParams common_params(const LayerWorkload& w,
                                    const AttentionBackendSelection& selection,
                                    const AttentionScales& scales, const LayerStepBuffers& b) {
  RopeQuantAppendParams p;
  p.num_kv_heads = w.num_kv_heads;
  p.head_dim = w.head_dim;
  p.k_row_stride = p.v_row_stride = static_cast<int64_t>(w.num_kv_heads) * w.head_dim;
  p.rope = w.rope;
  p.cos_sin_cache = b.cos_sin_cache;
  p.cos_sin_cache_positions = w.cache_positions;
  p.k_cache = b.k_cache;
  p.v_cache = b.v_cache;
  p.kv = layer_kv_layout(w, selection);
  p.k_scale = store_scale(scales.k_scale(), p.kv.dtype);
  p.v_scale = store_scale(scales.v_scale(), p.kv.dtype);
  return p;
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

KvCacheLayout layer_kv_layout(const LayerWorkload& w, const AttentionBackendSelection& selection) {
  KvCacheLayout kv;
  kv.num_pages = w.num_pages;
  kv.page_size = w.page_size;
  kv.num_kv_heads = w.num_kv_heads;
  kv.head_dim = w.head_dim;
  kv.dtype = selection.config().kv_dtype;
  kv.layout = w.layout;
  return kv;
}

RopeQuantAppendParams prefix_fill_params(const LayerWorkload& w,
                                         const AttentionBackendSelection& selection,
                                         const AttentionScales& scales, const LayerStepBuffers& b) {
  RopeQuantAppendParams p = common_params(w, selection, scales, b);
  p.num_tokens = w.num_prefix_tokens();
  p.num_q_heads = w.num_kv_heads;
  p.q = b.prefix_k;
  p.q_row_stride = p.k_row_stride;
  p.k = b.prefix_k;
  p.v = b.prefix_v;
  p.positions = b.prefix_positions;
  p.slot_mapping = b.prefix_slots;
  p.q_bf16_rows = p.num_tokens;
  p.q_out_bf16 = b.prefix_q_scratch;
  return p;
}

RopeQuantAppendParams step_append_params(const LayerWorkload& w,
                                         const AttentionBackendSelection& selection,
                                         const AttentionScales& scales, const LayerStepBuffers& b) {
  RopeQuantAppendParams p = common_params(w, selection, scales, b);
  p.num_tokens = w.num_tokens();
  p.num_q_heads = w.num_q_heads;
  p.q = b.q;
  p.q_row_stride = static_cast<int64_t>(w.num_q_heads) * w.head_dim;
  p.k = b.k;
  p.v = b.v;
  p.positions = b.positions;
  p.slot_mapping = b.slots;
  p.q_out_bf16 = b.q_bf16;
  p.q_out_fp8 = b.q_fp8;
  p.q_scale = scales.q_scale();
  const QueryOutputSplit split =
      query_output_split(selection, w.metadata.num_decode_tokens, p.num_tokens);
  p.q_bf16_rows = split.bf16_rows;
  p.q_fp8_dtype = split.fp8_dtype;
  return p;
}

AttentionOpArgs layer_attention_args(const LayerWorkload& w,
                                     const AttentionBackendSelection& selection,
                                     const LayerStepBuffers& b, const AttentionMetadataView& m) {
  AttentionOpArgs args;
  args.q = b.q_bf16;
  args.q_fp8 = b.q_fp8;
  // True when step_append_params wrote every FP8 row a kernel reads.
  args.q_fp8_ready =
      query_output_split(selection, w.metadata.num_decode_tokens, w.num_tokens()).fp8_rows_ready;
  args.k_cache = b.k_cache;
  args.v_cache = b.v_cache;
  args.kv = layer_kv_layout(w, selection);
  args.metadata = m;
  args.out = b.out;
  return args;
}

AttentionLayerSettings layer_attention_settings(const LayerWorkload& w) {
  AttentionLayerSettings settings;
  settings.sm_scale = 1.0f / std::sqrt(static_cast<float>(w.head_dim));
  return settings;
}

LayerStepResult run_layer_step_host(const LayerWorkload& w,
                                    const AttentionBackendSelection& selection,
                                    const AttentionScales& scales) {
  const KvCacheLayout kv = layer_kv_layout(w, selection);
  const auto q_elems = static_cast<size_t>(w.num_tokens()) * static_cast<size_t>(w.num_q_heads) *
                       static_cast<size_t>(w.head_dim);
  std::vector<uint8_t> k_cache(static_cast<size_t>(kv.tensor_bytes()));
  std::vector<uint8_t> v_cache(k_cache.size());
  std::vector<uint16_t> prefix_q_scratch(w.prefix_k.size());
  std::vector<uint16_t> q_bf16(q_elems);
  std::vector<uint8_t> q_fp8(q_elems);
  std::vector<uint16_t> out(q_elems, float_to_bf16_bits(NAN));

  LayerStepBuffers b;
  b.q = w.q.data();
  b.k = w.k.data();
  b.v = w.v.data();
  b.positions = w.metadata.positions.data();
  b.slots = w.metadata.slot_mapping.data();
  b.prefix_k = w.prefix_k.data();
  b.prefix_v = w.prefix_v.data();
  b.prefix_positions = w.prefix_positions.data();
  b.prefix_slots = w.prefix_slots.data();
  b.cos_sin_cache = w.cos_sin_cache.data();
  b.prefix_q_scratch = prefix_q_scratch.data();
  b.k_cache = k_cache.data();
  b.v_cache = v_cache.data();
  b.q_bf16 = q_bf16.data();
  b.q_fp8 = q_fp8.data();
  b.out = out.data();

  const AttentionOp op(selection, scales, layer_attention_settings(w));
  LayerStepResult result;
  result.kv_cache_bytes = 2 * kv.tensor_bytes();

  auto start = std::chrono::steady_clock::now();
  if (w.num_prefix_tokens() > 0) {
    rope_quant_append_reference(prefix_fill_params(w, selection, scales, b));
  }
  result.timings.prefix_fill_ms = ms_since(start);

  start = std::chrono::steady_clock::now();
  rope_quant_append_reference(step_append_params(w, selection, scales, b));
  result.timings.rope_append_ms = ms_since(start);

  AttentionOpArgs args = layer_attention_args(w, selection, b, host_metadata_view(w.metadata));
  result.attention_workspace_bytes = op.workspace_bytes(args);
  std::vector<uint8_t> workspace(result.attention_workspace_bytes);
  args.workspace = workspace.data();
  args.workspace_bytes = workspace.size();
  start = std::chrono::steady_clock::now();
  op.run(args, nullptr);
  result.timings.attention_ms = ms_since(start);

  result.out.resize(out.size());
  for (size_t i = 0; i < out.size(); ++i)
    result.out[i] = bf16_bits_to_float(out[i]);
  return result;
}

}  // namespace quench
