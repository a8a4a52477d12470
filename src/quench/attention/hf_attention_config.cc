#include "quench/attention/hf_attention_config.h"

#include <cstdint>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "quench/core/error.h"
#include "quench/core/json_file.h"

namespace quench {
namespace {

using nlohmann::json;

// Fields are stored as int32_t; the bound keeps them well inside that range.
constexpr int64_t kMaxConfigInt = (int64_t{1} << 30) - 1;

int32_t positive_int(const json& j, const char* key, const std::string& source) {
  const json& v = j.at(key);
  QUENCH_REQUIRE(v.is_number_integer() && v.get<int64_t>() > 0 && v.get<int64_t>() <= kMaxConfigInt,
                 source, ": '", key, "' = ", v.dump(),
                 " must be a positive integer <= ", kMaxConfigInt, " (2^30 - 1)");
  return static_cast<int32_t>(v.get<int64_t>());
}

DType model_dtype_of(const std::string& name, const std::string& source) {
  if (name == "bfloat16") return DType::kBF16;
  if (name == "float16") return DType::kF16;
  if (name == "float32") return DType::kF32;
  fail(str_cat(source, ": torch_dtype '", name, "' is not supported; allowed: bfloat16, float16, ",
               "float32"));
}

}  // namespace

HfAttentionFields parse_hf_attention_fields(std::string_view json_text, const std::string& source) {
  const json j = parse_json_object(json_text, source);
  QUENCH_REQUIRE(present(j, "num_attention_heads"), source,
                 ": 'num_attention_heads' is missing (not a decoder model config.json?)");
  HfAttentionFields f;
  f.num_q_heads = positive_int(j, "num_attention_heads", source);
  f.num_kv_heads = present(j, "num_key_value_heads")
                       ? positive_int(j, "num_key_value_heads", source)
                       : f.num_q_heads;
  if (present(j, "head_dim")) {
    f.head_dim = positive_int(j, "head_dim", source);
  } else {
    QUENCH_REQUIRE(present(j, "hidden_size"), source,
                   ": neither 'head_dim' nor 'hidden_size' is present");
    const int32_t hidden = positive_int(j, "hidden_size", source);
    QUENCH_REQUIRE(hidden % f.num_q_heads == 0, source, ": hidden_size ", hidden,
                   " is not a multiple of num_attention_heads ", f.num_q_heads);
    f.head_dim = hidden / f.num_q_heads;
  }
  bool window_enabled = true;
  if (present(j, "use_sliding_window")) {
    QUENCH_REQUIRE(j.at("use_sliding_window").is_boolean(), source,
                   ": 'use_sliding_window' must be true or false");
    window_enabled = j.at("use_sliding_window").get<bool>();
  }
  if (window_enabled && present(j, "sliding_window")) {
    f.sliding_window = positive_int(j, "sliding_window", source);
  }
  if (present(j, "attn_logit_softcapping")) {
    const json& v = j.at("attn_logit_softcapping");
    // Within float's range too: 1e39 is a positive double that the float field cannot hold.
    QUENCH_REQUIRE(v.is_number() && v.get<double>() > 0.0 &&
                       v.get<double>() <= std::numeric_limits<float>::max(),
                   source, ": 'attn_logit_softcapping' = ", v.dump(),
                   " must be a positive number that a float holds (<= 3.4e38)");
    f.logit_soft_cap = v.get<float>();
  }
  const char* dtype_key = present(j, "torch_dtype") ? "torch_dtype" : "dtype";
  if (present(j, dtype_key)) {
    QUENCH_REQUIRE(j.at(dtype_key).is_string(), source, ": '", dtype_key, "' must be a string");
    f.model_dtype = model_dtype_of(j.at(dtype_key).get<std::string>(), source);
  }
  return f;
}

HfAttentionFields read_hf_attention_fields(const std::string& path) {
  return parse_hf_attention_fields(read_text_file(path, "model config"), path);
}

void apply_hf_attention_fields(const HfAttentionFields& fields, AttentionConfig& config) {
  config.num_q_heads = fields.num_q_heads;
  config.num_kv_heads = fields.num_kv_heads;
  config.head_dim_qk = fields.head_dim;
  config.head_dim_vo = fields.head_dim;
  config.sliding_window = fields.sliding_window;
  config.logit_soft_cap = fields.logit_soft_cap;
  config.model_dtype = fields.model_dtype;
}

}  // namespace quench
