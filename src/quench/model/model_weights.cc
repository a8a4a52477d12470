#include "quench/model/model_weights.h"

#include <cstring>
#include <optional>
#include <tuple>

#include "quench/core/error.h"
#include "quench/numerics/bf16.h"
#include "quench/numerics/fp8.h"
#include "quench/ops/linear/linear_weight.h"

namespace quench {

namespace {

// The values of an FP8 weight's scale tensor ("<name>_scale" or "<name>_scale_inv").
std::vector<float> fp8_scales(const Checkpoint& checkpoint, const std::string& name,
                              std::string* scale_name) {
  const SafetensorsTensor* s = nullptr;
  for (const char* suffix : {"_scale", "_scale_inv"}) {
    *scale_name = name + suffix;
    if ((s = checkpoint.find(*scale_name)) != nullptr) break;
  }
  QUENCH_REQUIRE(s != nullptr, "checkpoint ", checkpoint.dir(), ": FP8 weight \"", name,
                 "\" has no \"", name, "_scale\" (or _scale_inv) beside it");
  QUENCH_REQUIRE(s->dtype == DType::kF32 || s->dtype == DType::kBF16, "checkpoint ",
                 checkpoint.dir(), ": \"", *scale_name, "\" is ", s->dtype_name,
                 "; allowed: F32, BF16");
  std::vector<float> values(static_cast<size_t>(s->num_elements()));
  for (size_t i = 0; i < values.size(); ++i) {
    if (s->dtype == DType::kF32) {
      std::memcpy(&values[i], s->bytes.data() + 4 * i, 4);
    } else {
      uint16_t b;
      std::memcpy(&b, s->bytes.data() + 2 * i, 2);
      values[i] = bf16_bits_to_float(b);
    }
  }
  return values;
}

// An FP8 weight's scales with how they map onto its [out, in] elements (docs/checkpoints.md's
// table; blocks of the config's size, 128 x 128 where it names none): one per tensor, one per
// output row, or one per block. Throws naming the scale tensor where the count fits none.
struct Fp8Scales {
  std::vector<float> values;
  WeightScaling scaling = WeightScaling::kTensor;
  int32_t block_out = 0, block_in = 0;  // kBlock
};

Fp8Scales read_fp8_scales(const Checkpoint& checkpoint, const std::string& name, int64_t out,
                          int64_t in, const WeightQuantization& quantization) {
  std::string scale_name;
  Fp8Scales s;
  s.values = fp8_scales(checkpoint, name, &scale_name);
  const auto count = static_cast<int64_t>(s.values.size());
  const int32_t bo = quantization.block_out > 0 ? quantization.block_out : 128;
  const int32_t bi = quantization.block_in > 0 ? quantization.block_in : 128;
  const int64_t blocks = ((out + bo - 1) / bo) * ((in + bi - 1) / bi);
  QUENCH_REQUIRE(count == 1 || count == out || count == blocks, "checkpoint ", checkpoint.dir(),
                 ": \"", scale_name, "\" has ", count, " values; for a [", out, ", ", in,
                 "] weight quench reads 1 (per tensor), ", out, " (per channel) or ", blocks,
                 " (blocks of ", bo, " x ", bi, ")");
  if (count == 1) {
    s.scaling = WeightScaling::kTensor;
  } else if (count == out && (quantization.block_out == 0 || count != blocks)) {
    s.scaling = WeightScaling::kChannel;
  } else {
    s.scaling = WeightScaling::kBlock;
    s.block_out = bo;
    s.block_in = bi;
  }
  return s;
}

// A scale tensor's values (F32 or BF16), if the checkpoint has it.
std::optional<std::vector<float>> optional_scale(const Checkpoint& checkpoint,
                                                 const std::string& name) {
  const SafetensorsTensor* t = checkpoint.find(name);
  if (t == nullptr) return std::nullopt;
  QUENCH_REQUIRE(t->dtype == DType::kF32 || t->dtype == DType::kBF16, "checkpoint ",
                 checkpoint.dir(), ": \"", name, "\" is ", t->dtype_name, "; allowed: F32, BF16");
  std::vector<float> values(static_cast<size_t>(t->num_elements()));
  for (size_t i = 0; i < values.size(); ++i) {
    if (t->dtype == DType::kF32) {
      std::memcpy(&values[i], t->bytes.data() + 4 * i, 4);
    } else {
      uint16_t b;
      std::memcpy(&b, t->bytes.data() + 2 * i, 2);
      values[i] = bf16_bits_to_float(b);
    }
  }
  return values;
}

}  // namespace

Bf16Weight Bf16Weight::load(const Checkpoint& checkpoint, const std::string& name,
                            const std::vector<int64_t>& shape,
                            const WeightQuantization& quantization) {
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
  } else if (t.dtype == DType::kFP8E4M3 && shape.size() == 2) {
    const int64_t out = shape[0], in = shape[1];
    const Fp8Scales scales = read_fp8_scales(checkpoint, name, out, in, quantization);
    for (int64_t r = 0; r < out; ++r)
      for (int64_t c = 0; c < in; ++c) {
        const size_t i = static_cast<size_t>(r * in + c);
        const auto k = static_cast<size_t>(
            weight_scale_index(scales.scaling, r, c, in, scales.block_out, scales.block_in));
        (*owned)[i] = float_to_bf16_bits(fp8_e4m3_to_float(t.bytes[i]) * scales.values[k]);
      }
  } else {
    fail(str_cat(
        "checkpoint ", checkpoint.dir(), ": tensor \"", name, "\" is ", t.dtype_name,
        "; quench loads BF16, F16 or F32 weights, and F8_E4M3 linear weights with their scales"));
  }
  w.view_ = *owned;
  w.owned_ = std::move(owned);
  return w;
}

Fp8Weight Fp8Weight::load(const Checkpoint& checkpoint, const std::string& name,
                          const std::vector<int64_t>& shape,
                          const WeightQuantization& quantization) {
  const SafetensorsTensor& t = checkpoint.require(name, shape);
  Fp8Weight w;
  if (t.dtype != DType::kFP8E4M3 || shape.size() != 2) return w;
  const int64_t out = shape[0], in = shape[1];
  Fp8Scales scales = read_fp8_scales(checkpoint, name, out, in, quantization);
  if (scales.scaling == WeightScaling::kBlock) {
    // Blocks only of the size the config declares (the runner's rules are about that size).
    if (quantization.block_out == 0) return w;
    w.scales_ = std::move(scales.values);
    w.block_out_ = scales.block_out;
    w.block_in_ = scales.block_in;
  } else {  // one scale per row, a per-tensor one repeated
    w.scales_.resize(static_cast<size_t>(out));
    for (int64_t r = 0; r < out; ++r)
      w.scales_[static_cast<size_t>(r)] =
          scales.values[static_cast<size_t>(scales.scaling == WeightScaling::kTensor ? 0 : r)];
  }
  w.bytes_ = {reinterpret_cast<const uint8_t*>(t.bytes.data()), t.bytes.size()};
  return w;
}

bool ModelWeights::has_fp8_linears() const {
  for (const DecoderLayerWeights& l : layers) {
    for (const Fp8Weight* w : {&l.fp8.q_proj, &l.fp8.o_proj, &l.fp8.gate_proj, &l.fp8.down_proj})
      if (!w->empty()) return true;
  }
  return false;
}

ModelWeights ModelWeights::load(const ModelConfig& c, const Checkpoint& checkpoint, bool keep_fp8) {
  const int64_t d = c.hidden_size;
  const int64_t qd = static_cast<int64_t>(c.num_q_heads()) * c.head_dim();
  const int64_t kvd = static_cast<int64_t>(c.num_kv_heads()) * c.head_dim();
  const int64_t ff = c.intermediate_size;
  const WeightQuantization& q = c.quantization;
  ModelWeights w;
  w.mapped_files = checkpoint.shards();
  w.embed_tokens = Bf16Weight::load(checkpoint, "model.embed_tokens.weight", {c.vocab_size, d});
  w.layers.resize(static_cast<size_t>(c.num_layers));
  for (int32_t i = 0; i < c.num_layers; ++i) {
    const std::string p = str_cat("model.layers.", i, ".");
    DecoderLayerWeights& l = w.layers[static_cast<size_t>(i)];
    l.input_norm = Bf16Weight::load(checkpoint, p + "input_layernorm.weight", {d});
    // Each group of projections the runner fuses into one GEMM stays FP8 only as a whole.
    const auto load_group = [&](std::initializer_list<
                                std::tuple<const char*, Bf16Weight*, Fp8Weight*, int64_t, int64_t>>
                                    group) {
      bool all_fp8 = keep_fp8 && q.fp8;
      std::vector<Fp8Weight> kept;
      for (const auto& [name, bf16, fp8, rows, cols] : group) {
        if (!all_fp8) break;
        kept.push_back(Fp8Weight::load(checkpoint, p + name, {rows, cols}, q));
        all_fp8 = !kept.back().empty();
      }
      size_t next = 0;
      for (const auto& [name, bf16, fp8, rows, cols] : group) {
        if (all_fp8) {
          *fp8 = std::move(kept[next++]);
        } else {
          *bf16 = Bf16Weight::load(checkpoint, p + name, {rows, cols}, q);
        }
      }
    };
    load_group({{"self_attn.q_proj.weight", &l.q_proj, &l.fp8.q_proj, qd, d},
                {"self_attn.k_proj.weight", &l.k_proj, &l.fp8.k_proj, kvd, d},
                {"self_attn.v_proj.weight", &l.v_proj, &l.fp8.v_proj, kvd, d}});
    load_group({{"self_attn.o_proj.weight", &l.o_proj, &l.fp8.o_proj, d, qd}});
    if (c.qkv_bias) {
      l.q_bias = Bf16Weight::load(checkpoint, p + "self_attn.q_proj.bias", {qd});
      l.k_bias = Bf16Weight::load(checkpoint, p + "self_attn.k_proj.bias", {kvd});
      l.v_bias = Bf16Weight::load(checkpoint, p + "self_attn.v_proj.bias", {kvd});
    }
    if (c.qk_norm) {
      l.q_norm = Bf16Weight::load(checkpoint, p + "self_attn.q_norm.weight", {c.head_dim()});
      l.k_norm = Bf16Weight::load(checkpoint, p + "self_attn.k_norm.weight", {c.head_dim()});
    }
    l.post_attention_norm =
        Bf16Weight::load(checkpoint, p + "post_attention_layernorm.weight", {d});
    load_group({{"mlp.gate_proj.weight", &l.gate_proj, &l.fp8.gate_proj, ff, d},
                {"mlp.up_proj.weight", &l.up_proj, &l.fp8.up_proj, ff, d}});
    load_group({{"mlp.down_proj.weight", &l.down_proj, &l.fp8.down_proj, d, ff}});
  }
  w.final_norm = Bf16Weight::load(checkpoint, "model.norm.weight", {d});
  for (int32_t i = 0; i < c.num_layers; ++i) {
    const std::string p = str_cat("model.layers.", i, ".self_attn.");
    CheckpointAttentionScales s;
    const auto kv = optional_scale(checkpoint, p + "kv_scale");
    s.k_scale = optional_scale(checkpoint, p + "k_scale");
    s.v_scale = optional_scale(checkpoint, p + "v_scale");
    if (!s.k_scale) s.k_scale = kv;
    if (!s.v_scale) s.v_scale = kv;
    s.q_scale = optional_scale(checkpoint, p + "q_scale");
    w.attention_scales.push_back(std::move(s));
  }
  // Tied checkpoints usually omit lm_head; some still write a copy, which is then used.
  if (c.tie_word_embeddings && checkpoint.find("lm_head.weight") == nullptr) {
    w.lm_head = w.embed_tokens;
  } else {
    w.lm_head = Bf16Weight::load(checkpoint, "lm_head.weight", {c.vocab_size, d}, q);
  }
  return w;
}

}  // namespace quench
