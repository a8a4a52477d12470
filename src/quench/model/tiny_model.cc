#include "quench/model/tiny_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string_view>
#include <utility>

#include "quench/core/error.h"
#include "quench/core/parallel_for.h"
#include "quench/model/safetensors_file.h"
#include "quench/numerics/bf16.h"
#include "quench/numerics/fp8.h"
#include "quench/tokenizer/tiny_tokenizer.h"

namespace quench {
namespace {

// A fast deterministic generator (SplitMix64): billions of weights for the real-shape presets
// in seconds, where std::normal_distribution would take minutes. Draw i after a state s is a hash
// of s + (i + 1) * kGamma alone, so that a tensor's draws can be made on every core at once and
// still come out as one sequence.
struct WeightRng {
  static constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;
  uint64_t state;

  // Uniform in [-1, 1): draw i (from 0) after the current state, which it leaves alone.
  float at(uint64_t i) const {
    uint64_t z = state + (i + 1) * kGamma;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return static_cast<float>(z >> 40) * 0x1.0p-23f - 1.0f;
  }
  void skip(uint64_t n) { state += n * kGamma; }
};

// Elements per parallel_for item when drawing a tensor.
constexpr int64_t kDrawsPerItem = int64_t{1} << 20;

// Uniform values with the given mean and standard deviation (half-width sqrt(3) * stddev).
SafetensorsTensorToWrite random_bf16(const std::string& name, std::vector<int64_t> shape,
                                     float mean, float stddev, WeightRng& rng) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  const float half_width = std::sqrt(3.0f) * stddev;
  SafetensorsTensorToWrite t{name, DType::kBF16, std::move(shape), {}};
  t.bytes.resize(static_cast<size_t>(2 * n));
  const WeightRng start = rng;
  uint8_t* const bytes = t.bytes.data();  // little-endian bf16, as safetensors stores it
  parallel_for((n + kDrawsPerItem - 1) / kDrawsPerItem, [=](int64_t item) {
    const int64_t end = std::min(n, (item + 1) * kDrawsPerItem);
    for (int64_t i = item * kDrawsPerItem; i < end; ++i) {
      const uint16_t b = float_to_bf16_bits(mean + half_width * start.at(static_cast<uint64_t>(i)));
      bytes[2 * i] = static_cast<uint8_t>(b & 0xff);
      bytes[2 * i + 1] = static_cast<uint8_t>(b >> 8);
    }
  });
  rng.skip(static_cast<uint64_t>(n));
  return t;
}

}  // namespace

std::pair<SafetensorsTensorToWrite, SafetensorsTensorToWrite> quantize_weight_to_fp8(
    const SafetensorsTensorToWrite& w, int64_t block_out, int64_t block_in,
    const std::string& scale_name) {
  QUENCH_REQUIRE(w.dtype == DType::kBF16 && w.shape.size() == 2 && block_out >= 1 && block_in >= 1,
                 "quantize_weight_to_fp8: \"", w.name, "\" must be a bf16 matrix and the groups ",
                 block_out, " x ", block_in, " positive");
  const int64_t rows = w.shape[0], cols = w.shape[1];
  const int64_t bo = std::min(block_out, rows), bi = std::min(block_in, cols);
  const int64_t block_rows = (rows + bo - 1) / bo, block_cols = (cols + bi - 1) / bi;
  SafetensorsTensorToWrite q{w.name, DType::kFP8E4M3, w.shape, {}};
  q.bytes.resize(static_cast<size_t>(rows * cols));
  std::vector<float> scales(static_cast<size_t>(block_rows * block_cols));
  const uint8_t* in = w.bytes.data();
  uint8_t* out = q.bytes.data();
  float* group_scales = scales.data();
  parallel_for(block_rows, [=](int64_t br) {
    const auto value = [&](int64_t r, int64_t c) {
      const int64_t i = r * cols + c;
      return bf16_bits_to_float(static_cast<uint16_t>(in[2 * i] | (in[2 * i + 1] << 8)));
    };
    const int64_t r_end = std::min(rows, (br + 1) * bo);
    for (int64_t bc = 0; bc < block_cols; ++bc) {
      const int64_t c_end = std::min(cols, (bc + 1) * bi);
      float amax = 0.0f;
      for (int64_t r = br * bo; r < r_end; ++r)
        for (int64_t c = bc * bi; c < c_end; ++c)
          amax = std::max(amax, std::fabs(value(r, c)));
      const float scale = amax > 0.0f ? amax / kFp8E4M3Max : 1.0f;
      group_scales[br * block_cols + bc] = scale;
      for (int64_t r = br * bo; r < r_end; ++r)
        for (int64_t c = bc * bi; c < c_end; ++c)
          out[r * cols + c] = float_to_fp8_e4m3(value(r, c) / scale);
    }
  });
  std::vector<int64_t> scale_shape = {block_rows, block_cols};
  if (block_rows * block_cols == 1) {
    scale_shape = {1};
  } else if (bo == 1 && bi == cols) {
    scale_shape = {rows, 1};
  }
  SafetensorsTensorToWrite s{scale_name, DType::kF32, scale_shape, {}};
  s.bytes.resize(scales.size() * 4);
  std::memcpy(s.bytes.data(), scales.data(), s.bytes.size());
  return {std::move(q), std::move(s)};
}

TinyModelSpec builtin_model_spec(const std::string& name) {
  constexpr std::string_view kFp8BlockSuffix = "-fp8-block";
  if (name.size() > kFp8BlockSuffix.size() && name.ends_with(kFp8BlockSuffix)) {
    TinyModelSpec s = builtin_model_spec(name.substr(0, name.size() - kFp8BlockSuffix.size()));
    s.fp8_weights = true;
    s.fp8_block = 128;
    return s;
  }
  constexpr std::string_view kFp8Suffix = "-fp8";
  if (name.size() > kFp8Suffix.size() && name.ends_with(kFp8Suffix)) {
    TinyModelSpec s = builtin_model_spec(name.substr(0, name.size() - kFp8Suffix.size()));
    s.fp8_weights = true;
    return s;
  }
  TinyModelSpec s;
  if (name == "tiny") return s;
  // Real architectures' shapes (random weights): for speed and memory figures without a download.
  s.write_tokenizer = false;  // their vocabularies are far larger than the built-in BPE's corpus
  s.num_shards = 4;
  s.max_position_embeddings = 131072;
  if (name == "llama3.2-1b") {
    s.hidden_size = 2048, s.intermediate_size = 8192, s.num_layers = 16, s.num_q_heads = 32,
    s.num_kv_heads = 8;
    s.head_dim = 64, s.vocab_size = 128256, s.tie_word_embeddings = true;
  } else if (name == "llama3-8b") {
    s.hidden_size = 4096, s.intermediate_size = 14336, s.num_layers = 32, s.num_q_heads = 32,
    s.num_kv_heads = 8;
    s.head_dim = 128, s.vocab_size = 128256, s.num_shards = 8;
  } else if (name == "qwen2.5-0.5b") {
    s.architecture = ModelArchitecture::kQwen2, s.llama3_rope_scaling = false, s.rope_theta = 1e6f;
    s.hidden_size = 896, s.intermediate_size = 4864, s.num_layers = 24, s.num_q_heads = 14,
    s.num_kv_heads = 2;
    s.head_dim = 64, s.vocab_size = 151936, s.tie_word_embeddings = true,
    s.max_position_embeddings = 32768;
  } else if (name == "qwen3-0.6b") {
    s.architecture = ModelArchitecture::kQwen3, s.llama3_rope_scaling = false, s.rope_theta = 1e6f;
    s.hidden_size = 1024, s.intermediate_size = 3072, s.num_layers = 28, s.num_q_heads = 16,
    s.num_kv_heads = 8;
    s.head_dim = 128, s.vocab_size = 151936, s.tie_word_embeddings = true,
    s.max_position_embeddings = 40960;
  } else {
    fail(str_cat("built-in model '", name, "' does not exist; allowed: ", builtin_model_names()));
  }
  return s;
}

const char* builtin_model_names() {
  return "tiny, llama3.2-1b, qwen2.5-0.5b, qwen3-0.6b, llama3-8b (each also as NAME-fp8 and "
         "NAME-fp8-block)";
}

std::string tiny_model_config_json(const TinyModelSpec& s) {
  nlohmann::ordered_json j;
  j["architectures"] = {model_architecture_name(s.architecture)};
  j["model_type"] = s.architecture == ModelArchitecture::kQwen3   ? "qwen3"
                    : s.architecture == ModelArchitecture::kQwen2 ? "qwen2"
                                                                  : "llama";
  j["hidden_size"] = s.hidden_size;
  j["intermediate_size"] = s.intermediate_size;
  j["num_hidden_layers"] = s.num_layers;
  j["num_attention_heads"] = s.num_q_heads;
  j["num_key_value_heads"] = s.num_kv_heads;
  j["head_dim"] = s.head_dim;
  j["vocab_size"] = s.vocab_size;
  j["max_position_embeddings"] = s.max_position_embeddings;
  j["rms_norm_eps"] = 1e-5;
  j["rope_theta"] = s.rope_theta;
  if (s.llama3_rope_scaling) {
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", 8.0},
                         {"low_freq_factor", 1.0},
                         {"high_freq_factor", 4.0},
                         {"original_max_position_embeddings", 1024}};
  } else {
    j["rope_scaling"] = nullptr;
  }
  j["hidden_act"] = "silu";
  if (s.architecture != ModelArchitecture::kQwen2) j["attention_bias"] = false;  // Qwen2's: none
  j["tie_word_embeddings"] = s.tie_word_embeddings;
  j["torch_dtype"] = "bfloat16";
  if (s.fp8_weights && s.fp8_block > 0) {
    j["quantization_config"] = {{"quant_method", "fp8"},
                                {"activation_scheme", "dynamic"},
                                {"weight_block_size", {s.fp8_block, s.fp8_block}}};
  } else if (s.fp8_weights) {
    j["quantization_config"] = {
        {"quant_method", "compressed-tensors"},
        {"config_groups",
         {{"group_0",
           {{"targets", {"Linear"}},
            {"weights", {{"type", "float"}, {"num_bits", 8}, {"strategy", "channel"}}}}}}},
        {"ignore", {"lm_head"}}};
  }
  j["bos_token_id"] = 1;
  j["eos_token_id"] = 2;
  return j.dump(2) + "\n";
}

void write_tiny_model(const std::string& dir, const TinyModelSpec& s) {
  QUENCH_REQUIRE(s.num_shards >= 1, "tiny model num_shards ", s.num_shards, " must be >= 1");
  std::filesystem::create_directories(dir);
  {
    std::ofstream config(dir + "/config.json");
    config << tiny_model_config_json(s);
    QUENCH_REQUIRE(config.good(), "cannot write ", dir, "/config.json");
  }
  if (s.write_tokenizer) {
    auto write = [&](const std::string& name, const std::string& text) {
      std::ofstream file(dir + "/" + name);
      file << text;
      QUENCH_REQUIRE(file.good(), "cannot write ", dir, "/", name);
    };
    write("tokenizer.json", tiny_tokenizer_json(s.vocab_size));
    // Llama-3's chat format; the end-of-turn token ends a reply, as instruct models declare.
    const std::string chat_template =
        "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
        "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
        "{% endif %}";
    write("tokenizer_config.json", nlohmann::ordered_json{{"bos_token", "<|begin_of_text|>"},
                                                          {"eos_token", "<|end_of_text|>"},
                                                          {"chat_template", chat_template}}
                                           .dump(2) +
                                       "\n");
    write("generation_config.json",
          nlohmann::ordered_json{{"bos_token_id", 1}, {"eos_token_id", {2, 5}}}.dump(2) + "\n");
  }
  WeightRng rng{s.seed};
  const int64_t d = s.hidden_size, qd = int64_t{s.num_q_heads} * s.head_dim,
                kvd = int64_t{s.num_kv_heads} * s.head_dim, ff = s.intermediate_size;
  std::vector<SafetensorsTensorToWrite> tensors;
  // A projection's weight: bf16, or (fp8_weights) e4m3 followed by its scale tensor.
  auto add_proj = [&](const std::string& name, int64_t out, int64_t in) {
    SafetensorsTensorToWrite w =
        random_bf16(name, {out, in}, 0.0f, 1.0f / std::sqrt(static_cast<float>(in)), rng);
    if (!s.fp8_weights) {
      tensors.push_back(std::move(w));
      return;
    }
    // Per channel: groups of one whole row; blocks: fp8_block x fp8_block ("_scale_inv" as the
    // "fp8" method names them).
    auto [q, scale] = s.fp8_block > 0
                          ? quantize_weight_to_fp8(w, s.fp8_block, s.fp8_block, name + "_scale_inv")
                          : quantize_weight_to_fp8(w, 1, in, name + "_scale");
    tensors.push_back(std::move(q));
    tensors.push_back(std::move(scale));
  };
  auto norm = [&](const std::string& name, int64_t n) {
    return random_bf16(name, {n}, 1.0f, 0.1f, rng);
  };
  tensors.push_back(random_bf16("model.embed_tokens.weight", {s.vocab_size, d}, 0.0f, 1.0f, rng));
  for (int32_t i = 0; i < s.num_layers; ++i) {
    const std::string p = str_cat("model.layers.", i, ".");
    tensors.push_back(norm(p + "input_layernorm.weight", d));
    add_proj(p + "self_attn.q_proj.weight", qd, d);
    add_proj(p + "self_attn.k_proj.weight", kvd, d);
    add_proj(p + "self_attn.v_proj.weight", kvd, d);
    add_proj(p + "self_attn.o_proj.weight", d, qd);
    if (s.architecture == ModelArchitecture::kQwen2) {  // biases of a size that matters
      tensors.push_back(random_bf16(p + "self_attn.q_proj.bias", {qd}, 0.0f, 0.5f, rng));
      tensors.push_back(random_bf16(p + "self_attn.k_proj.bias", {kvd}, 0.0f, 0.5f, rng));
      tensors.push_back(random_bf16(p + "self_attn.v_proj.bias", {kvd}, 0.0f, 0.5f, rng));
    }
    if (s.architecture == ModelArchitecture::kQwen3) {
      tensors.push_back(norm(p + "self_attn.q_norm.weight", s.head_dim));
      tensors.push_back(norm(p + "self_attn.k_norm.weight", s.head_dim));
    }
    tensors.push_back(norm(p + "post_attention_layernorm.weight", d));
    add_proj(p + "mlp.gate_proj.weight", ff, d);
    add_proj(p + "mlp.up_proj.weight", ff, d);
    add_proj(p + "mlp.down_proj.weight", d, ff);
  }
  tensors.push_back(norm("model.norm.weight", d));
  // lm_head stays bf16 (FP8 checkpoints leave it out of the quantization: "ignore").
  if (!s.tie_word_embeddings)
    tensors.push_back(random_bf16("lm_head.weight", {s.vocab_size, d}, 0.0f,
                                  1.0f / std::sqrt(static_cast<float>(d)), rng));

  if (s.num_shards == 1) {
    write_safetensors(dir + "/model.safetensors", tensors);
    return;
  }
  // Contiguous runs of tensors per shard, named as HF names them.
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  const size_t per_shard = (tensors.size() + s.num_shards - 1) / static_cast<size_t>(s.num_shards);
  for (int32_t shard = 0; shard < s.num_shards; ++shard) {
    const size_t begin = std::min(tensors.size(), per_shard * static_cast<size_t>(shard));
    const size_t end = std::min(tensors.size(), begin + per_shard);
    const std::string file =
        str_cat("model-", shard + 1 < 10 ? "0000" : "000", shard + 1, "-of-",
                s.num_shards < 10 ? "0000" : "000", s.num_shards, ".safetensors");
    std::vector<SafetensorsTensorToWrite> part(
        std::make_move_iterator(tensors.begin() + static_cast<std::ptrdiff_t>(begin)),
        std::make_move_iterator(tensors.begin() + static_cast<std::ptrdiff_t>(end)));
    for (const auto& t : part)
      weight_map[t.name] = file;
    write_safetensors(dir + "/" + file, part, {{"format", "pt"}});
  }
  std::ofstream index(dir + "/model.safetensors.index.json");
  index << nlohmann::ordered_json{{"metadata", nlohmann::ordered_json::object()},
                                  {"weight_map", weight_map}}
               .dump(2);
  QUENCH_REQUIRE(index.good(), "cannot write ", dir, "/model.safetensors.index.json");
}

}  // namespace quench
