// The weights of a Llama/Qwen3 decoder, by HF tensor name, checked against the config's shapes:
//   model.embed_tokens.weight                     [vocab, hidden]
//   model.layers.{i}.input_layernorm.weight       [hidden]
//   model.layers.{i}.self_attn.{q,k,v,o}_proj.weight
//       q [Hq*D, hidden], k/v [Hkv*D, hidden], o [hidden, Hq*D]
//   model.layers.{i}.self_attn.{q,k}_norm.weight  [D]                (Qwen3 only)
//   model.layers.{i}.post_attention_layernorm.weight [hidden]
//   model.layers.{i}.mlp.{gate,up,down}_proj.weight
//       gate/up [intermediate, hidden], down [hidden, intermediate]
//   model.norm.weight                              [hidden]
//   lm_head.weight                                 [vocab, hidden]   (absent when tied)
// Every weight is bf16: BF16 tensors are used in place (a view into the mapped file), F16 and F32
// tensors are rounded to bf16 once at load. FP8 checkpoints (config's quantization_config, see
// WeightQuantization) store the linear weights as F8_E4M3 with "<name>_scale" (or
// "<name>_scale_inv", block-wise) beside them: per tensor ([] or [1]), per output channel ([out]
// or [out, 1]) or per block ([ceil(out/bo), ceil(in/bi)]), multiplying; they are dequantized to
// bf16 at load, or, for the GPU runner (keep_fp8), stay FP8 (Fp8Weight) and run on FP8 kernels
// (linear_fp8_cublaslt.h, linear_skinny.h). Other dtypes fail with the tensor name.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "quench/attention/attention_scales.h"
#include "quench/model/checkpoint.h"
#include "quench/model/model_config.h"

namespace quench {

// bf16 bits of one weight: a view into the checkpoint, or storage of its own after a conversion
// (shared, so that copies, such as a tied lm_head, stay valid).
class Bf16Weight {
 public:
  Bf16Weight() = default;
  const uint16_t* data() const { return view_.data(); }
  size_t size() const { return view_.size(); }
  static Bf16Weight load(const Checkpoint& checkpoint, const std::string& name,
                         const std::vector<int64_t>& shape,
                         const WeightQuantization& quantization = WeightQuantization{});

 private:
  std::shared_ptr<const std::vector<uint16_t>> owned_;
  std::span<const uint16_t> view_;
};

// The e4m3 bytes of one FP8 linear weight [out, in] as the checkpoint stores them (a view into the
// mapped file) and its fp32 scales: one per output row (per channel; a per-tensor scale is
// repeated per row), or the checkpoint's block scales [ceil(out / bo), ceil(in / bi)]. What the
// GPU runner uploads to compute with FP8 weights. Empty unless ModelWeights::load kept it.
class Fp8Weight {
 public:
  Fp8Weight() = default;
  bool empty() const { return bytes_.empty(); }
  std::span<const uint8_t> bytes() const { return bytes_; }
  const std::vector<float>& scales() const { return scales_; }
  bool blocks() const { return block_out_ > 0; }
  int32_t block_out() const { return block_out_; }  // blocks only
  int32_t block_in() const { return block_in_; }
  // The weight kept FP8, or an empty one where `name` is not an F8_E4M3 tensor with per-tensor,
  // per-channel or (quantization's block size) block scales.
  static Fp8Weight load(const Checkpoint& checkpoint, const std::string& name,
                        const std::vector<int64_t>& shape, const WeightQuantization& quantization);

 private:
  std::span<const uint8_t> bytes_;
  std::vector<float> scales_;
  int32_t block_out_ = 0, block_in_ = 0;
};

// A layer's linear weights kept FP8 (each group of fused projections all or none: q/k/v,
// gate/up; o; down); the Bf16Weight fields of those are then empty.
struct Fp8LayerWeights {
  Fp8Weight q_proj, k_proj, v_proj, o_proj;
  Fp8Weight gate_proj, up_proj, down_proj;
};

struct DecoderLayerWeights {
  Bf16Weight input_norm;
  Bf16Weight q_proj, k_proj, v_proj, o_proj;
  Bf16Weight q_norm, k_norm;          // Qwen3; empty otherwise
  Bf16Weight q_bias, k_bias, v_bias;  // Qwen2; empty otherwise
  Bf16Weight post_attention_norm;
  Bf16Weight gate_proj, up_proj, down_proj;
  Fp8LayerWeights fp8;  // keep_fp8 loads of FP8 checkpoints
};

struct ModelWeights {
  Bf16Weight embed_tokens;
  std::vector<DecoderLayerWeights> layers;
  // Per layer, the FP8 KV-cache scales an FP8-KV checkpoint carries ("self_attn.k_scale",
  // "v_scale", "q_scale", or one "kv_scale" for both; scalars or one per KV head); absent fields
  // stay empty.
  std::vector<CheckpointAttentionScales> attention_scales;
  Bf16Weight final_norm;
  Bf16Weight lm_head;  // embed_tokens' storage when tied
  // The checkpoint's mapped shards, which the weights above view: held here so that the weights
  // stay valid after the Checkpoint is gone.
  std::vector<std::shared_ptr<const SafetensorsFile>> mapped_files;

  // Loads and shape-checks every weight; the result keeps the checkpoint's mappings alive.
  // keep_fp8: FP8 linear weights stay FP8 (the layers' `fp8` fields) instead of being
  // dequantized; only the GPU runner computes with them (DeviceDecoderModel::keeps_fp8_weights
  // says for which checkpoints).
  static ModelWeights load(const ModelConfig& config, const Checkpoint& checkpoint,
                           bool keep_fp8 = false);
  // Whether any linear weight was kept FP8.
  bool has_fp8_linears() const;
};

}  // namespace quench
