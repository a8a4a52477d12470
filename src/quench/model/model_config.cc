#include "quench/model/model_config.h"

#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "quench/core/error.h"
#include "quench/core/json_file.h"

namespace quench {
namespace {

using nlohmann::json;

int32_t positive_int(const json& j, const char* key, const std::string& source) {
  QUENCH_REQUIRE(present(j, key), source, ": '", key, "' is missing");
  const json& v = j.at(key);
  QUENCH_REQUIRE(v.is_number_integer() && v.get<int64_t>() > 0 &&
                     v.get<int64_t>() <= std::numeric_limits<int32_t>::max(),
                 source, ": '", key, "' = ", v.dump(), " must be a positive 32-bit integer");
  return static_cast<int32_t>(v.get<int64_t>());
}

float positive_float(const json& j, const char* key, float fallback, const std::string& source) {
  if (!present(j, key)) return fallback;
  const json& v = j.at(key);
  QUENCH_REQUIRE(v.is_number() && v.get<double>() > 0.0 &&
                     v.get<double>() <= std::numeric_limits<float>::max(),
                 source, ": '", key, "' = ", v.dump(), " must be a positive number");
  return v.get<float>();
}

// Token ids: one id or a list (HF allows either for eos_token_id); empty when absent.
std::vector<int32_t> token_ids(const json& j, const char* key, const std::string& source) {
  std::vector<int32_t> ids;
  if (!present(j, key)) return ids;
  const json list = j.at(key).is_array() ? j.at(key) : json::array({j.at(key)});
  for (const json& v : list) {
    QUENCH_REQUIRE(v.is_number_integer() && v.get<int64_t>() >= 0 &&
                       v.get<int64_t>() <= std::numeric_limits<int32_t>::max(),
                   source, ": '", key, "' = ", j.at(key).dump(),
                   " must be a token id or a list of them");
    ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  return ids;
}

ModelArchitecture architecture_of(const json& j, const std::string& source) {
  QUENCH_REQUIRE(present(j, "architectures") && j.at("architectures").is_array() &&
                     !j.at("architectures").empty() && j.at("architectures")[0].is_string(),
                 source, ": 'architectures' is missing (a list naming the model class)");
  const std::string name = j.at("architectures")[0].get<std::string>();
  if (name == "LlamaForCausalLM" || name == "MistralForCausalLM") return ModelArchitecture::kLlama;
  if (name == "Qwen3ForCausalLM") return ModelArchitecture::kQwen3;
  if (name == "Qwen2ForCausalLM") return ModelArchitecture::kQwen2;
  fail(str_cat(source, ": architecture '", name,
               "' is not supported; allowed: LlamaForCausalLM, MistralForCausalLM, "
               "Qwen2ForCausalLM, Qwen3ForCausalLM"));
}

void parse_rope_scaling(const json& j, const std::string& source, RopeConfig& rope) {
  if (!present(j, "rope_scaling")) return;
  const json& s = j.at("rope_scaling");
  QUENCH_REQUIRE(s.is_object(), source, ": 'rope_scaling' must be an object or null");
  const char* type_key = present(s, "rope_type") ? "rope_type" : "type";
  const std::string type = present(s, type_key) && s.at(type_key).is_string()
                               ? s.at(type_key).get<std::string>()
                               : std::string("(none)");
  if (type == "default") return;
  QUENCH_REQUIRE(type == "llama3", source, ": rope_scaling type '", type,
                 "' is not supported; allowed: llama3, default (or rope_scaling null)");
  const std::string where = source + ": rope_scaling";
  rope.llama3_factor = positive_float(s, "factor", 0.0f, where);
  QUENCH_REQUIRE(rope.llama3_factor > 0.0f, where, ": 'factor' is missing");
  rope.llama3_low_freq_factor = positive_float(s, "low_freq_factor", 1.0f, where);
  rope.llama3_high_freq_factor = positive_float(s, "high_freq_factor", 4.0f, where);
  QUENCH_REQUIRE(rope.llama3_high_freq_factor > rope.llama3_low_freq_factor, where,
                 ": high_freq_factor must exceed low_freq_factor");
  rope.llama3_original_max_position = positive_int(s, "original_max_position_embeddings", where);
}

void parse_quantization(const json& j, const std::string& source, WeightQuantization& q) {
  if (!present(j, "quantization_config")) return;
  const json& c = j.at("quantization_config");
  const std::string where = source + ": quantization_config";
  QUENCH_REQUIRE(c.is_object() && c.contains("quant_method") && c.at("quant_method").is_string(),
                 where, " needs a string 'quant_method'");
  q.method = c.at("quant_method").get<std::string>();
  auto block = [&](const json& size) {
    QUENCH_REQUIRE(
        size.is_array() && size.size() == 2 && size[0].is_number_integer() &&
            size[1].is_number_integer() && size[0].get<int64_t>() > 0 && size[1].get<int64_t>() > 0,
        where, ": a block size must be [rows, columns] of positive integers, got ", size.dump());
    q.block_out = size[0].get<int32_t>();
    q.block_in = size[1].get<int32_t>();
  };
  if (q.method == "fp8") {
    q.fp8 = true;
    if (present(c, "weight_block_size")) block(c.at("weight_block_size"));
    return;
  }
  QUENCH_REQUIRE(q.method == "compressed-tensors", where, ": quant_method '", q.method,
                 "' is not supported; allowed: fp8, compressed-tensors (FP8 weights)");
  QUENCH_REQUIRE(present(c, "config_groups") && c.at("config_groups").is_object(), where,
                 ": compressed-tensors needs 'config_groups'");
  for (const auto& [name, group] : c.at("config_groups").items()) {
    const json& w = group.value("weights", json());
    QUENCH_REQUIRE(w.is_object() && w.value("type", "") == "float" && w.value("num_bits", 0) == 8,
                   where, ": group '", name, "' quantizes weights as ", w.dump(),
                   "; quench reads only FP8 weights (type float, num_bits 8)");
    const std::string strategy = w.value("strategy", "tensor");
    QUENCH_REQUIRE(strategy == "tensor" || strategy == "channel" || strategy == "block", where,
                   ": group '", name, "' strategy '", strategy,
                   "' is not supported; allowed: tensor, channel, block");
    if (strategy == "block") block(w.value("block_structure", json()));
  }
  q.fp8 = true;
}

}  // namespace

const char* model_architecture_name(ModelArchitecture arch) {
  switch (arch) {
    case ModelArchitecture::kQwen3:
      return "Qwen3ForCausalLM";
    case ModelArchitecture::kQwen2:
      return "Qwen2ForCausalLM";
    default:
      return "LlamaForCausalLM";
  }
}

int64_t ModelConfig::num_parameters() const {
  const int64_t d = hidden_size;
  const int64_t qd = static_cast<int64_t>(num_q_heads()) * head_dim();
  const int64_t kvd = static_cast<int64_t>(num_kv_heads()) * head_dim();
  int64_t layer = d * qd + 2 * d * kvd + qd * d + 3 * d * intermediate_size + 2 * d;
  if (qk_norm) layer += 2 * head_dim();
  if (qkv_bias) layer += qd + 2 * kvd;
  const int64_t embed = static_cast<int64_t>(vocab_size) * d;
  return num_layers * layer + embed * (tie_word_embeddings ? 1 : 2) + d;
}

ModelConfig parse_model_config(std::string_view json_text, const std::string& source) {
  ModelConfig c;
  c.attention = parse_hf_attention_fields(json_text, source);
  const json j = json::parse(json_text);  // valid: parse_hf_attention_fields checked it
  c.architecture = architecture_of(j, source);
  c.qk_norm = c.architecture == ModelArchitecture::kQwen3;
  c.qkv_bias = c.architecture == ModelArchitecture::kQwen2;
  c.hidden_size = positive_int(j, "hidden_size", source);
  c.intermediate_size = positive_int(j, "intermediate_size", source);
  c.num_layers = positive_int(j, "num_hidden_layers", source);
  c.vocab_size = positive_int(j, "vocab_size", source);
  c.max_position_embeddings = present(j, "max_position_embeddings")
                                  ? positive_int(j, "max_position_embeddings", source)
                                  : 4096;
  c.rms_norm_eps = positive_float(j, "rms_norm_eps", 1e-6f, source);
  QUENCH_REQUIRE(c.attention.num_q_heads % c.attention.num_kv_heads == 0, source,
                 ": num_attention_heads ", c.attention.num_q_heads,
                 " is not a multiple of num_key_value_heads ", c.attention.num_kv_heads);
  for (const char* bias : {"attention_bias", "mlp_bias"}) {
    QUENCH_REQUIRE(
        !present(j, bias) || (j.at(bias).is_boolean() && !j.at(bias).get<bool>()), source, ": '",
        bias, "' = ", present(j, bias) ? j.at(bias).dump() : "",
        " is not supported (quench's layers have no biases but Qwen2's q/k/v ones); allowed: "
        "false");
  }
  if (present(j, "hidden_act")) {
    QUENCH_REQUIRE(j.at("hidden_act") == "silu", source,
                   ": 'hidden_act' = ", j.at("hidden_act").dump(),
                   " is not supported; allowed: \"silu\"");
  }
  c.rope.style = RopeStyle::kNeox;
  c.rope.rotary_dim = c.attention.head_dim;
  c.rope.theta = positive_float(j, "rope_theta", 10000.0f, source);
  parse_rope_scaling(j, source, c.rope);
  c.rope.validate(c.attention.head_dim);
  if (present(j, "tie_word_embeddings")) {
    QUENCH_REQUIRE(j.at("tie_word_embeddings").is_boolean(), source,
                   ": 'tie_word_embeddings' must be true or false");
    c.tie_word_embeddings = j.at("tie_word_embeddings").get<bool>();
  }
  const std::vector<int32_t> bos = token_ids(j, "bos_token_id", source);
  c.bos_token_id = bos.empty() ? -1 : bos[0];
  parse_quantization(j, source, c.quantization);
  c.eos_token_ids = token_ids(j, "eos_token_id", source);
  return c;
}

std::vector<int32_t> parse_generation_eos_ids(std::string_view json_text,
                                              const std::string& source) {
  return token_ids(parse_json_object(json_text, source), "eos_token_id", source);
}

ModelConfig read_model_config(const std::string& path) {
  return parse_model_config(read_text_file(path, "model config"), path);
}

}  // namespace quench
