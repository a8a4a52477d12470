#include "quench/model/decoder_model.h"

#include <cmath>

#include "quench/core/error.h"
#include "quench/numerics/bf16.h"
#include "quench/ops/linear/linear_cpu.h"
#include "quench/ops/qk_norm/qk_norm_reference.h"
#include "quench/ops/rope/rope_reference.h"
#include "quench/ops/rope_quant_append/rope_quant_append_reference.h"
#include "quench/ops/swiglu/swiglu_reference.h"

namespace quench {
namespace {

// Rounds every element to bf16 (the activation dtype between ops).
void round_to_bf16(std::vector<float>& x) {
  for (float& v : x)
    v = bf16_bits_to_float(float_to_bf16_bits(v));
}

std::vector<uint16_t> to_bf16_bits(const std::vector<float>& x) {
  std::vector<uint16_t> bits(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    bits[i] = float_to_bf16_bits(x[i]);
  return bits;
}

// x += y, rounded to bf16 (the residual stream).
void add_residual(std::vector<float>& x, const std::vector<float>& y) {
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = bf16_bits_to_float(float_to_bf16_bits(x[i] + y[i]));
}

// x · wᵀ in fp32 (linear_cpu: the reference's sums in another order), plus the bias where given
// (in fp32, before the caller's bf16 rounding: one rounding, as a GEMM with a bias epilogue
// gives).
std::vector<float> linear(int32_t tokens, int32_t in, int32_t out, const std::vector<float>& x,
                          const Bf16Weight& w, const Bf16Weight* bias = nullptr) {
  std::vector<float> y(static_cast<size_t>(tokens) * static_cast<size_t>(out));
  linear_cpu(tokens, in, out, x.data(), w.data(), y.data());
  if (bias != nullptr && bias->size() > 0) {
    for (size_t t = 0; t < static_cast<size_t>(tokens); ++t)
      for (size_t n = 0; n < static_cast<size_t>(out); ++n)
        y[t * static_cast<size_t>(out) + n] += bf16_bits_to_float(bias->data()[n]);
  }
  return y;
}

// RMSNorm over rows of `width` (the same op as Qwen3's per-head norm, one "head" per row),
// rounded to bf16.
std::vector<float> rms_norm(int32_t rows, int32_t width, const std::vector<float>& x,
                            const Bf16Weight& w, float eps) {
  std::vector<float> y = x;
  qk_rms_norm_reference(rows, 1, width, w.data(), eps, y.data());
  round_to_bf16(y);
  return y;
}

}  // namespace

ModelAttentionPlan model_attention_plan(const ModelConfig& c, const ModelWeights& weights,
                                        const DecoderModelOptions& o, int32_t compute_capability) {
  AttentionConfig config;
  config.compute_capability = compute_capability;
  apply_hf_attention_fields(c.attention, config);
  // Activations around attention are bf16 whatever the checkpoint's dtype (weights are loaded
  // as bf16, model_weights.h).
  config.model_dtype = DType::kBF16;
  config.kv_dtype = o.kv_dtype;
  config.page_size = o.page_size;
  config.layout = o.layout;
  config.out_dtype = DType::kBF16;
  ModelAttentionPlan plan{
      AttentionBackendSelection::decide(config, o.prefill_kernel, o.decode_kernel),
      AttentionLayerSettings{},
      {}};
  plan.settings.sm_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim()));
  bool any_scale = false;
  for (const CheckpointAttentionScales& s : weights.attention_scales)
    any_scale = any_scale || s.k_scale || s.v_scale || s.q_scale;
  for (int32_t layer = 0; layer < c.num_layers; ++layer) {
    AttentionScales scales;  // unit scales: what a bf16 cache takes
    if (is_fp8(o.kv_dtype) && any_scale) {
      scales = AttentionScales::from_checkpoint(
          weights.attention_scales[static_cast<size_t>(layer)], c.num_kv_heads(), config.out_dtype,
          str_cat("layer ", layer));
    } else if (is_fp8(o.kv_dtype)) {
      // No scales anywhere: 1.0, as FP8-KV engines default to, said once rather than per layer.
      scales = plan.scales.empty() ? AttentionScales::from_checkpoint({}, c.num_kv_heads(),
                                                                      config.out_dtype, "model")
                                   : plan.scales.front();
    }
    plan.scales.push_back(std::move(scales));
  }
  return plan;
}

std::vector<AttentionOp> model_attention_ops(const ModelConfig& c, const ModelWeights& weights,
                                             const DecoderModelOptions& o,
                                             int32_t compute_capability) {
  const ModelAttentionPlan plan = model_attention_plan(c, weights, o, compute_capability);
  std::vector<AttentionOp> ops;
  for (const AttentionScales& scales : plan.scales)
    ops.emplace_back(plan.selection, scales, plan.settings);
  return ops;
}

DecoderModel::DecoderModel(const ModelConfig& config, const ModelWeights& weights,
                           const DecoderModelOptions& options)
    : config_(config),
      weights_(weights),
      options_(options),
      attention_(model_attention_ops(config, weights, options, 0)) {  // 0: the CPU backend
  QUENCH_REQUIRE(options.max_model_len >= 1, "max_model_len ", options.max_model_len,
                 " must be >= 1");
  kv_.num_pages = options.num_pages;
  kv_.page_size = options.page_size;
  kv_.num_kv_heads = config.num_kv_heads();
  kv_.head_dim = config.head_dim();
  kv_.dtype = options.kv_dtype;
  kv_.layout = options.layout;
  kv_.validate();
  QUENCH_REQUIRE(options.num_pages >= 2,
                 "the KV cache needs >= 2 pages (page 0 is the null page), "
                 "got ",
                 options.num_pages);
  QUENCH_REQUIRE(attention_.front().memory_space() == MemorySpace::kHost,
                 "DecoderModel runs on the CPU backend; the chosen kernels are GPU kernels");
  cos_sin_cache_ = build_rope_cos_sin_cache(config.rope, options.max_model_len);
  const auto bytes = static_cast<size_t>(kv_.tensor_bytes());
  k_caches_.assign(static_cast<size_t>(config.num_layers), std::vector<uint8_t>(bytes));
  v_caches_.assign(static_cast<size_t>(config.num_layers), std::vector<uint8_t>(bytes));
}

int64_t DecoderModel::kv_cache_bytes() const {
  return 2 * static_cast<int64_t>(config_.num_layers) * kv_.tensor_bytes();
}

std::vector<float> DecoderModel::forward(std::span<const int32_t> token_ids,
                                         const AttentionMetadata& metadata,
                                         std::span<const int32_t> logit_rows) {
  const ModelConfig& c = config_;
  const int32_t t = metadata.num_tokens;
  check_forward_inputs(c.vocab_size, options_.max_model_len, kv_.page_size, token_ids, metadata,
                       logit_rows);
  const int32_t d = c.hidden_size;
  const int32_t hq = c.num_q_heads(), hkv = c.num_kv_heads(), hd = c.head_dim();
  const int32_t qd = hq * hd, kvd = hkv * hd, ff = c.intermediate_size;

  std::vector<float> x(static_cast<size_t>(t) * static_cast<size_t>(d));
  for (int32_t r = 0; r < t; ++r) {
    const uint16_t* e = weights_.embed_tokens.data() + static_cast<int64_t>(token_ids[r]) * d;
    for (int32_t i = 0; i < d; ++i)
      x[static_cast<size_t>(r) * d + i] = bf16_bits_to_float(e[i]);
  }

  const AttentionMetadataView view = host_metadata_view(metadata);
  std::vector<uint16_t> q_rotated(static_cast<size_t>(t) * static_cast<size_t>(qd));
  std::vector<uint8_t> q_fp8(q_rotated.size());
  std::vector<uint16_t> attn_out(q_rotated.size());
  std::vector<uint8_t> workspace;
  const bool fp8_cache = is_fp8(kv_.dtype);
  for (int32_t layer = 0; layer < c.num_layers; ++layer) {
    const DecoderLayerWeights& w = weights_.layers[static_cast<size_t>(layer)];
    const AttentionOp& attention = attention_[static_cast<size_t>(layer)];
    std::vector<float> h = rms_norm(t, d, x, w.input_norm, c.rms_norm_eps);
    const std::vector<uint16_t> q = to_bf16_bits(linear(t, d, qd, h, w.q_proj, &w.q_bias));
    const std::vector<uint16_t> k = to_bf16_bits(linear(t, d, kvd, h, w.k_proj, &w.k_bias));
    const std::vector<uint16_t> v = to_bf16_bits(linear(t, d, kvd, h, w.v_proj, &w.v_bias));

    RopeQuantAppendParams p;
    p.num_tokens = t;
    p.num_q_heads = hq;
    p.num_kv_heads = hkv;
    p.head_dim = hd;
    p.q = q.data();
    p.k = k.data();
    p.v = v.data();
    p.q_row_stride = qd;
    p.k_row_stride = p.v_row_stride = kvd;
    p.positions = metadata.positions.data();
    p.rope = c.rope;
    p.cos_sin_cache = cos_sin_cache_.data();
    p.cos_sin_cache_positions = options_.max_model_len;
    if (c.qk_norm) {
      p.q_norm_weight = w.q_norm.data();
      p.k_norm_weight = w.k_norm.data();
      p.norm_eps = c.rms_norm_eps;
    }
    // The query leaves in bf16; the attention op quantizes it for a phase whose kernel takes FP8.
    p.q_bf16_rows = t;
    p.q_out_bf16 = q_rotated.data();
    p.k_cache = k_caches_[static_cast<size_t>(layer)].data();
    p.v_cache = v_caches_[static_cast<size_t>(layer)].data();
    p.kv = kv_;
    if (fp8_cache) {  // a bf16 cache stores values unscaled
      p.k_scale = attention.scales().k_scale();
      p.v_scale = attention.scales().v_scale();
    }
    p.slot_mapping = metadata.slot_mapping.data();
    rope_quant_append_reference(p);

    AttentionOpArgs args;
    args.q = q_rotated.data();
    args.q_fp8 = q_fp8.data();
    args.k_cache = p.k_cache;
    args.v_cache = p.v_cache;
    args.kv = kv_;
    args.metadata = view;
    args.out = attn_out.data();
    workspace.resize(attention.workspace_bytes(args));
    args.workspace = workspace.data();
    args.workspace_bytes = workspace.size();
    attention.run(args, nullptr);

    std::vector<float> attn(attn_out.size());
    for (size_t i = 0; i < attn.size(); ++i)
      attn[i] = bf16_bits_to_float(attn_out[i]);
    std::vector<float> o = linear(t, qd, d, attn, w.o_proj);
    round_to_bf16(o);
    add_residual(x, o);

    h = rms_norm(t, d, x, w.post_attention_norm, c.rms_norm_eps);
    std::vector<float> gate = linear(t, d, ff, h, w.gate_proj);
    std::vector<float> up = linear(t, d, ff, h, w.up_proj);
    round_to_bf16(gate);
    round_to_bf16(up);
    swiglu_reference(t, ff, gate.data(), up.data(), gate.data());
    round_to_bf16(gate);
    std::vector<float> down = linear(t, ff, d, gate, w.down_proj);
    round_to_bf16(down);
    add_residual(x, down);
  }

  const auto rows = static_cast<int32_t>(logit_rows.size());
  std::vector<float> last(static_cast<size_t>(rows) * static_cast<size_t>(d));
  for (int32_t i = 0; i < rows; ++i) {
    const size_t src = static_cast<size_t>(logit_rows[static_cast<size_t>(i)]) * d;
    std::copy(x.begin() + static_cast<std::ptrdiff_t>(src),
              x.begin() + static_cast<std::ptrdiff_t>(src + d),
              last.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(i) * d));
  }
  if (rows == 0) return {};
  const std::vector<float> normed = rms_norm(rows, d, last, weights_.final_norm, c.rms_norm_eps);
  return linear(rows, d, c.vocab_size, normed, weights_.lm_head);
}

}  // namespace quench
