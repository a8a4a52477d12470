// The decoder shape of a HuggingFace config.json for the architectures quench runs:
//   LlamaForCausalLM (Llama 2/3, and Mistral-style configs without a window), Qwen3ForCausalLM
//   (per-head q/k RMSNorm before RoPE), Qwen2ForCausalLM (Qwen2 / Qwen2.5: biases on the q, k
//   and v projections).
// Attention fields come from hf_attention_config.h; this adds the rest of the decoder: hidden and
// MLP sizes, layers, vocabulary, RMSNorm epsilon, RoPE (theta, Llama-3 scaling), tied embeddings.
// Anything quench cannot run yet (another architecture, attention biases, another rope_scaling
// type) fails here with the field and the allowed values, before any weight is read.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "quench/attention/hf_attention_config.h"
#include "quench/ops/rope/rope_config.h"

namespace quench {

enum class ModelArchitecture : uint8_t { kLlama, kQwen3, kQwen2 };

// How the checkpoint stores its linear weights (config.json "quantization_config"): bf16/f16/f32,
// or FP8 e4m3 with a scale that multiplies (per tensor, per output channel, or per block of
// block_out x block_in), as the "fp8" and "compressed-tensors" (float, 8 bits) methods write them.
struct WeightQuantization {
  bool fp8 = false;
  int32_t block_out = 0;  // > 0: block scales ("weight_block_size" / block_structure)
  int32_t block_in = 0;
  std::string method;  // "fp8", "compressed-tensors", or empty
};

const char* model_architecture_name(ModelArchitecture arch);  // HF class name

struct ModelConfig {
  ModelArchitecture architecture = ModelArchitecture::kLlama;
  HfAttentionFields attention;
  int32_t hidden_size = 0;
  int32_t intermediate_size = 0;
  int32_t num_layers = 0;
  int32_t vocab_size = 0;
  int32_t max_position_embeddings = 0;
  float rms_norm_eps = 1e-5f;
  RopeConfig rope;  // rotary_dim = head_dim, neox pairs (HF's rotate_half)
  bool tie_word_embeddings = false;
  bool qk_norm = false;   // Qwen3
  bool qkv_bias = false;  // Qwen2: the q, k and v projections add a bias
  WeightQuantization quantization;
  int32_t bos_token_id = -1;           // -1 = none given
  std::vector<int32_t> eos_token_ids;  // any of them ends a request (HF allows one or a list)

  int32_t head_dim() const { return attention.head_dim; }
  int32_t num_q_heads() const { return attention.num_q_heads; }
  int32_t num_kv_heads() const { return attention.num_kv_heads; }
  // Parameters in the checkpoint's tensors (embeddings counted once when tied).
  int64_t num_parameters() const;
};

// Parses config.json text; `source` names it in errors. Throws quench::Error naming the field.
ModelConfig parse_model_config(std::string_view json_text, const std::string& source);
ModelConfig read_model_config(const std::string& path);

// The end-of-sequence ids of a generation_config.json ("eos_token_id": one id or a list), which
// instruct models use to add their end-of-turn token; empty when the field is absent.
std::vector<int32_t> parse_generation_eos_ids(std::string_view json_text,
                                              const std::string& source);

}  // namespace quench
