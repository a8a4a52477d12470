// config.json of the architectures quench runs (Llama-3, Qwen3, the built-in tiny model), and
// the fields it refuses with their allowed values.
#include "quench/model/model_config.h"

#include <gtest/gtest.h>

#include "harness/expect_error.h"
#include "quench/model/tiny_model.h"

namespace quench {
namespace {

// Llama-3-8B-Instruct's config.json (the fields that matter, as published).
constexpr const char* kLlama3 = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "bos_token_id": 128000,
  "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu", "hidden_size": 4096,
  "intermediate_size": 14336, "max_position_embeddings": 131072, "num_attention_heads": 32,
  "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "vocab_size": 128256})";

// Qwen3-32B's config.json (abridged).
constexpr const char* kQwen3 = R"({
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "eos_token_id": 151645,
  "head_dim": 128, "hidden_act": "silu", "hidden_size": 5120, "intermediate_size": 25600,
  "max_position_embeddings": 40960, "num_attention_heads": 64, "num_hidden_layers": 64,
  "num_key_value_heads": 8, "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000,
  "sliding_window": null, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "use_sliding_window": false, "vocab_size": 151936})";

// Qwen2.5-7B-Instruct's config.json (abridged): q/k/v biases, no head_dim, a window it does not
// use.
constexpr const char* kQwen25 = R"({
  "architectures": ["Qwen2ForCausalLM"], "bos_token_id": 151643, "eos_token_id": 151645,
  "hidden_act": "silu", "hidden_size": 3584, "intermediate_size": 18944,
  "max_position_embeddings": 32768, "max_window_layers": 28, "model_type": "qwen2",
  "num_attention_heads": 28, "num_hidden_layers": 28, "num_key_value_heads": 4,
  "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 131072,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "use_sliding_window": false,
  "vocab_size": 152064})";

TEST(ModelConfig, Qwen25ConfigHasQkvBiasesAndNoWindow) {
  const ModelConfig c = parse_model_config(kQwen25, "qwen2.5.json");
  EXPECT_EQ(c.architecture, ModelArchitecture::kQwen2);
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.head_dim(), 128);  // hidden_size / num_attention_heads
  EXPECT_EQ(c.num_kv_heads(), 4);
  EXPECT_EQ(c.attention.sliding_window, 0) << "use_sliding_window is false";
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>{151645});
  // 7.62 B parameters, as published (the biases are 4608 per layer).
  EXPECT_NEAR(static_cast<double>(c.num_parameters()) / 1e9, 7.62, 0.01);
  EXPECT_STREQ(model_architecture_name(c.architecture), "Qwen2ForCausalLM");
}

TEST(ModelConfig, Llama3ConfigReadsEveryDecoderField) {
  const ModelConfig c = parse_model_config(kLlama3, "llama3.json");
  EXPECT_EQ(c.architecture, ModelArchitecture::kLlama);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.intermediate_size, 14336);
  EXPECT_EQ(c.num_layers, 32);
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_EQ(c.num_q_heads(), 32);
  EXPECT_EQ(c.num_kv_heads(), 8);
  EXPECT_EQ(c.head_dim(), 128);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c.rope.theta, 500000.0f);
  EXPECT_FLOAT_EQ(c.rope.llama3_factor, 8.0f);
  EXPECT_EQ(c.rope.llama3_original_max_position, 8192);
  EXPECT_EQ(c.rope.rotary_dim, 128);
  EXPECT_EQ(c.rope.style, RopeStyle::kNeox);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.bos_token_id, 128000);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{128001, 128008, 128009}));
  // 8.03 B parameters, as published.
  EXPECT_NEAR(static_cast<double>(c.num_parameters()) / 1e9, 8.03, 0.01);
}

TEST(ModelConfig, Qwen3ConfigHasQkNormAndExplicitHeadDim) {
  const ModelConfig c = parse_model_config(kQwen3, "qwen3.json");
  EXPECT_EQ(c.architecture, ModelArchitecture::kQwen3);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.head_dim(), 128);
  EXPECT_EQ(c.num_q_heads(), 64);
  EXPECT_EQ(c.attention.sliding_window, 0);
  EXPECT_FLOAT_EQ(c.rope.llama3_factor, 0.0f);
  EXPECT_FLOAT_EQ(c.rope.theta, 1e6f);
  EXPECT_EQ(c.bos_token_id, -1);
  EXPECT_NEAR(static_cast<double>(c.num_parameters()) / 1e9, 32.8, 0.1);
}

TEST(ModelConfig, TinyModelConfigParsesBackToItsSpec) {
  TinyModelSpec spec;
  spec.architecture = ModelArchitecture::kQwen3;
  spec.tie_word_embeddings = true;
  const ModelConfig c = parse_model_config(tiny_model_config_json(spec), "tiny");
  EXPECT_EQ(c.architecture, ModelArchitecture::kQwen3);
  EXPECT_EQ(c.hidden_size, spec.hidden_size);
  EXPECT_EQ(c.num_layers, spec.num_layers);
  EXPECT_EQ(c.head_dim(), spec.head_dim);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>{2});
}

TEST(ModelConfig, GenerationConfigEosIds) {
  EXPECT_EQ(parse_generation_eos_ids(R"({"eos_token_id": [1, 7]})", "g.json"),
            (std::vector<int32_t>{1, 7}));
  EXPECT_EQ(parse_generation_eos_ids(R"({"eos_token_id": 3})", "g.json"), std::vector<int32_t>{3});
  EXPECT_TRUE(parse_generation_eos_ids(R"({"temperature": 0.6})", "g.json").empty());
  EXPECT_QUENCH_ERROR(parse_generation_eos_ids(R"({"eos_token_id": "x"})", "g.json"),
                      {"g.json", "eos_token_id", "token id"});
}

TEST(ModelConfig, UnsupportedFieldsNameTheFieldAndTheAllowedValues) {
  const std::string llama = kLlama3;
  std::string other = llama;
  other.replace(other.find("LlamaForCausalLM"), 16, "GPT2LMHeadModel");
  EXPECT_QUENCH_ERROR(parse_model_config(other, "c.json"),
                      {"c.json", "GPT2LMHeadModel", "Qwen3ForCausalLM"});
  std::string bias = llama;
  bias.replace(bias.find("\"attention_bias\": false"), 23, "\"attention_bias\": true");
  EXPECT_QUENCH_ERROR(parse_model_config(bias, "c.json"), {"attention_bias", "allowed: false"});
  std::string yarn = llama;
  yarn.replace(yarn.find("\"llama3\""), 8, "\"yarn\"");
  EXPECT_QUENCH_ERROR(parse_model_config(yarn, "c.json"), {"rope_scaling", "yarn", "llama3"});
  std::string act = llama;
  act.replace(act.find("\"silu\""), 6, "\"gelu\"");
  EXPECT_QUENCH_ERROR(parse_model_config(act, "c.json"), {"hidden_act", "gelu", "silu"});
  std::string no_ff = llama;
  no_ff.replace(no_ff.find("\"intermediate_size\""), 19, "\"intermediate_sizeX\"");
  EXPECT_QUENCH_ERROR(parse_model_config(no_ff, "c.json"), {"'intermediate_size' is missing"});
  std::string groups = llama;
  groups.replace(groups.find("\"num_key_value_heads\": 8"), 24, "\"num_key_value_heads\": 5");
  EXPECT_QUENCH_ERROR(parse_model_config(groups, "c.json"), {"32", "not a multiple", "5"});
}

}  // namespace
}  // namespace quench
