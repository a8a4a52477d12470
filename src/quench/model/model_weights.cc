#include "quench/model/model_weights.h"

#include <cstring>

#include "quench/core/error.h"
#include "quench/numerics/bf16.h"

namespace quench {

Bf16Weight Bf16Weight::load(const Checkpoint& checkpoint, const std::string& name,
                            const std::vector<int64_t>& shape) {
  const SafetensorsTensor& t = checkpoint.require(name, shape);
  const auto n = static_cast<size_t>(t.num_elements());
  Bf16Weight w;
  if (t.dtype == DType::kBF16 && reinterpret_cast<uintptr_t>(t.bytes.data()) % 2 == 0) {
    w.view_ = {reinterpret_cast<const uint16_t*>(t.bytes.data()), n};
    return w;
  }
  auto owned = std::make_shared<std::vector<uint16_t>>(n);
  if (t.dtype == DType::kBF16) {
    std::memcpy(owned->data(), t.bytes.data(), n * 2);
  } else if (t.dtype == DType::kF16) {
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, t.bytes.data() + 2 * i, 2);
      (*owned)[i] = float_to_bf16_bits(f16_bits_to_float(h));
    }
  } else if (t.dtype == DType::kF32) {
    for (size_t i = 0; i < n; ++i) {
      float f;
      std::memcpy(&f, t.bytes.data() + 4 * i, 4);
      (*owned)[i] = float_to_bf16_bits(f);
    }
  } else {
    fail(str_cat("checkpoint ", checkpoint.dir(), ": tensor \"", name, "\" is ", t.dtype_name,
                 "; quench loads BF16, F16 or F32 weights (FP8 weights are not supported yet)"));
  }
  w.view_ = *owned;
  w.owned_ = std::move(owned);
  return w;
}

ModelWeights ModelWeights::load(const ModelConfig& c, const Checkpoint& checkpoint) {
  const int64_t d = c.hidden_size;
  const int64_t qd = static_cast<int64_t>(c.num_q_heads()) * c.head_dim();
  const int64_t kvd = static_cast<int64_t>(c.num_kv_heads()) * c.head_dim();
  const int64_t ff = c.intermediate_size;
  ModelWeights w;
  w.embed_tokens = Bf16Weight::load(checkpoint, "model.embed_tokens.weight", {c.vocab_size, d});
  w.layers.resize(static_cast<size_t>(c.num_layers));
  for (int32_t i = 0; i < c.num_layers; ++i) {
    const std::string p = str_cat("model.layers.", i, ".");
    DecoderLayerWeights& l = w.layers[static_cast<size_t>(i)];
    l.input_norm = Bf16Weight::load(checkpoint, p + "input_layernorm.weight", {d});
    l.q_proj = Bf16Weight::load(checkpoint, p + "self_attn.q_proj.weight", {qd, d});
    l.k_proj = Bf16Weight::load(checkpoint, p + "self_attn.k_proj.weight", {kvd, d});
    l.v_proj = Bf16Weight::load(checkpoint, p + "self_attn.v_proj.weight", {kvd, d});
    l.o_proj = Bf16Weight::load(checkpoint, p + "self_attn.o_proj.weight", {d, qd});
    if (c.qk_norm) {
      l.q_norm = Bf16Weight::load(checkpoint, p + "self_attn.q_norm.weight", {c.head_dim()});
      l.k_norm = Bf16Weight::load(checkpoint, p + "self_attn.k_norm.weight", {c.head_dim()});
    }
    l.post_attention_norm =
        Bf16Weight::load(checkpoint, p + "post_attention_layernorm.weight", {d});
    l.gate_proj = Bf16Weight::load(checkpoint, p + "mlp.gate_proj.weight", {ff, d});
    l.up_proj = Bf16Weight::load(checkpoint, p + "mlp.up_proj.weight", {ff, d});
    l.down_proj = Bf16Weight::load(checkpoint, p + "mlp.down_proj.weight", {d, ff});
  }
  w.final_norm = Bf16Weight::load(checkpoint, "model.norm.weight", {d});
  // Tied checkpoints usually omit lm_head; some still write a copy, which is then used.
  if (c.tie_word_embeddings && checkpoint.find("lm_head.weight") == nullptr) {
    w.lm_head = w.embed_tokens;
  } else {
    w.lm_head = Bf16Weight::load(checkpoint, "lm_head.weight", {c.vocab_size, d});
  }
  return w;
}

}  // namespace quench
