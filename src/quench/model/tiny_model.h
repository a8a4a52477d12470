// quench's built-in model: a small Llama-, Qwen2- or Qwen3-shaped decoder with seeded random
// weights, written as a real HF checkpoint (config.json + safetensors shards + index) so that the
// default `quench generate` and the tests exercise the same loading path as a downloaded model,
// without a download. Its text is meaningless; its numbers are reproducible.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "quench/model/model_config.h"
#include "quench/model/safetensors_file.h"

namespace quench {

struct TinyModelSpec {
  ModelArchitecture architecture = ModelArchitecture::kLlama;
  int32_t hidden_size = 256;
  int32_t intermediate_size = 512;
  int32_t num_layers = 2;
  int32_t num_q_heads = 4;
  int32_t num_kv_heads = 2;
  int32_t head_dim = 64;
  int32_t vocab_size = 512;
  int32_t max_position_embeddings = 4096;
  float rope_theta = 500000.0f;
  bool llama3_rope_scaling = true;
  bool tie_word_embeddings = false;
  uint64_t seed = 1;
  int32_t num_shards = 2;  // 1: one model.safetensors; more: shards plus the index
  // The linear (..._proj) weights as an FP8 checkpoint stores them: e4m3 with one fp32 scale per
  // output row ("<name>_scale" [out, 1], amax / 448; compressed-tensors' channel strategy).
  bool fp8_weights = false;
  // With fp8_weights: > 0 stores scales per block of fp8_block x fp8_block instead
  // ("<name>_scale_inv" [ceil(out / b), ceil(in / b)]; the "fp8" method's weight_block_size).
  int32_t fp8_block = 0;
  // tokenizer.json (tiny_tokenizer.h, vocab_size ids), tokenizer_config.json with a Llama-3 chat
  // template, generation_config.json with the end-of-turn token as a second eos id.
  bool write_tokenizer = true;
};

// A spec by name: "tiny" (the default above), or random weights in a real architecture's shape
// for speed figures without a download: "llama3.2-1b" (1.2 B parameters), "qwen2.5-0.5b" (q/k/v
// biases), "qwen3-0.6b", "llama3-8b" (8 B, 16 GB to write); these have no tokenizer (prompts are
// token ids). Each name with "-fp8" appended is the same model as an FP8 checkpoint (per-channel
// e4m3 linear weights, fp8_weights), with "-fp8-block" as one with 128 x 128 block scales.
// Throws quench::Error listing the names for another.
TinyModelSpec builtin_model_spec(const std::string& name);
const char* builtin_model_names();

// The config.json text of the spec.
std::string tiny_model_config_json(const TinyModelSpec& spec);

// Writes config.json, the tokenizer files and the weights into `dir` (created if missing). Weights
// are bf16, uniform with the standard deviation of a sensible init: projections 1/sqrt(fan_in)
// (activations keep their scale through the layers), norm weights 1 +- 0.1, embeddings 1. Throws
// quench::Error when files cannot be written.
void write_tiny_model(const std::string& dir, const TinyModelSpec& spec);

// A bf16 [out, in] weight as an FP8 checkpoint stores it: e4m3 codes with one fp32 scale per group
// of block_out x block_in elements (each clamped to the matrix: amax / 448, 1 for an all-zero
// group; stored = fp8(value / scale)), and the scale tensor `scale_name`, shaped as checkpoints
// store it: [1] for one group (per tensor), [out, 1] for groups of one whole row (per channel),
// else [ceil(out / block_out), ceil(in / block_in)]. Throws for a tensor that is not a bf16
// matrix.
std::pair<SafetensorsTensorToWrite, SafetensorsTensorToWrite> quantize_weight_to_fp8(
    const SafetensorsTensorToWrite& w, int64_t block_out, int64_t block_in,
    const std::string& scale_name);

}  // namespace quench
