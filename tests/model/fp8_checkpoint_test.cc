// FP8 checkpoints: linear weights stored as F8_E4M3 with per-tensor, per-channel or block scales
// (compressed-tensors and the "fp8" method) load as fp8 x scale rounded to bf16, exactly; the
// model then gives logits close to the bf16 checkpoint's (e4m3 rounding of the weights: a few
// percent, not zero); unsupported quantization methods and missing scales are named.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "harness/expect_error.h"
#include "harness/scratch_dir.h"
#include "quench/model/decoder_model.h"
#include "quench/model/device_decoder_model.h"
#include "quench/model/tiny_model.h"
#include "quench/numerics/bf16.h"
#include "quench/numerics/fp8.h"

namespace quench {
namespace {

using nlohmann::json;

struct Scheme {
  const char* name;
  json quantization_config;
  int32_t block_out, block_in;  // 0: per channel (or per tensor for the o projections)
  const char* scale_suffix;
};

// Rewrites the bf16 checkpoint at `src` into `dst` with FP8 linear weights under `scheme`.
void write_fp8_checkpoint(const std::string& src, const std::string& dst, const Scheme& scheme) {
  const Checkpoint checkpoint(src);
  json config = json::parse(std::ifstream(src + "/config.json"));
  config["quantization_config"] = scheme.quantization_config;
  std::ofstream(dst + "/config.json") << config.dump();
  std::vector<SafetensorsTensorToWrite> out;
  for (const auto& shard : checkpoint.shards()) {
    for (const auto& [name, t] : shard->tensors()) {
      const bool linear = name.find("_proj.weight") != std::string::npos;
      if (!linear) {
        out.push_back(
            {name, DType::kBF16, t.shape, std::vector<uint8_t>(t.bytes.begin(), t.bytes.end())});
        continue;
      }
      const int64_t rows = t.shape[0], cols = t.shape[1];
      const bool per_tensor = scheme.block_out == 0 && name.find("o_proj") != std::string::npos;
      const SafetensorsTensorToWrite bf16{name, DType::kBF16, t.shape,
                                          std::vector<uint8_t>(t.bytes.begin(), t.bytes.end())};
      auto [q, s] = quantize_weight_to_fp8(
          bf16, per_tensor ? rows : (scheme.block_out > 0 ? scheme.block_out : 1),
          per_tensor ? cols : (scheme.block_out > 0 ? scheme.block_in : cols),
          name + scheme.scale_suffix);
      out.push_back(std::move(q));
      out.push_back(std::move(s));
    }
  }
  write_safetensors(dst + "/model.safetensors", out);
}

std::vector<float> logits(const std::string& dir, const std::vector<int32_t>& ids) {
  const Checkpoint checkpoint(dir);
  const ModelConfig config = read_model_config(checkpoint.config_path());
  const ModelWeights weights = ModelWeights::load(config, checkpoint);
  DecoderModelOptions o;
  o.kv_dtype = DType::kBF16;
  o.num_pages = 8;
  o.max_model_len = 64;
  DecoderModel model(config, weights, o);
  const std::vector<ScheduledSequence> prefill = {{{1, 2}, 0, static_cast<int32_t>(ids.size())}};
  return model.forward(ids, build_attention_metadata({}, prefill, 16, 8),
                       std::vector<int32_t>{static_cast<int32_t>(ids.size()) - 1});
}

class Fp8Checkpoint : public ::testing::TestWithParam<Scheme> {};

TEST_P(Fp8Checkpoint, DequantizesExactlyAndStaysCloseToBf16) {
  const Scheme scheme = GetParam();
  const std::string src = testing_support::scratch_dir("quench_fp8_checkpoint_test",
                                                       std::string(scheme.name) + "_bf16");
  const std::string dst =
      testing_support::scratch_dir("quench_fp8_checkpoint_test", std::string(scheme.name) + "_fp8");
  write_tiny_model(src, TinyModelSpec{});
  write_fp8_checkpoint(src, dst, scheme);
  const Checkpoint fp8(dst);
  const ModelConfig config = read_model_config(fp8.config_path());
  EXPECT_TRUE(config.quantization.fp8);
  const ModelWeights weights = ModelWeights::load(config, fp8);
  // Every element of two weights, as fp8 x its scale rounded to bf16.
  for (const char* name :
       {"model.layers.1.self_attn.q_proj.weight", "model.layers.0.self_attn.o_proj.weight"}) {
    const SafetensorsTensor& q = *fp8.find(name);
    const SafetensorsTensor* s = fp8.find(std::string(name) + scheme.scale_suffix);
    ASSERT_NE(s, nullptr);
    const Bf16Weight& w = std::string(name).find("q_proj") != std::string::npos
                              ? weights.layers[1].q_proj
                              : weights.layers[0].o_proj;
    const int64_t rows = q.shape[0], cols = q.shape[1];
    const auto n_scales = static_cast<int64_t>(s->num_elements());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        int64_t k = 0;
        if (n_scales == rows) k = r;
        if (scheme.block_out > 0 && n_scales > 1)
          k = (r / scheme.block_out) * ((cols + scheme.block_in - 1) / scheme.block_in) +
              c / scheme.block_in;
        float scale;
        std::memcpy(&scale, s->bytes.data() + 4 * k, 4);
        const uint16_t want = float_to_bf16_bits(
            fp8_e4m3_to_float(q.bytes[static_cast<size_t>(r * cols + c)]) * scale);
        ASSERT_EQ(w.data()[r * cols + c], want) << name << " (" << r << ", " << c << ")";
      }
  }
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < 20; ++i)
    ids.push_back(10 + 23 * i);
  const std::vector<float> a = logits(dst, ids), b = logits(src, ids);
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (a[i] - b[i]) * static_cast<double>(a[i] - b[i]);
    norm += b[i] * static_cast<double>(b[i]);
  }
  const double err = std::sqrt(diff / norm);
  EXPECT_GT(err, 1e-3);
  EXPECT_LT(err, 0.1);
}

INSTANTIATE_TEST_SUITE_P(
    Schemes, Fp8Checkpoint,
    ::testing::Values(
        Scheme{
            "compressed_tensors_channel",
            json{
                {"quant_method", "compressed-tensors"},
                {"config_groups",
                 {{"group_0",
                   {{"weights", {{"type", "float"}, {"num_bits", 8}, {"strategy", "channel"}}}}}}}},
            0, 0, "_scale"},
        Scheme{"fp8_blocks", json{{"quant_method", "fp8"}, {"weight_block_size", {32, 64}}}, 32, 64,
               "_scale_inv"}),
    [](const ::testing::TestParamInfo<Scheme>& p) { return std::string(p.param.name); });

// keep_fp8 (the GPU runner's load): a per-channel FP8 checkpoint's linear weights stay e4m3 with
// their row scales, the bf16 fields of those stay empty, and the bytes are the checkpoint's; block
// checkpoints keep their block scales. The built-in "-fp8" models are per-channel checkpoints.
TEST(Fp8Checkpoint, KeepFp8HoldsTheCheckpointBytesAndRowScales) {
  const std::string dir = testing_support::scratch_dir("quench_fp8_checkpoint_test", "keep");
  write_tiny_model(dir, builtin_model_spec("tiny-fp8"));
  const Checkpoint checkpoint(dir);
  const ModelConfig config = read_model_config(checkpoint.config_path());
  ASSERT_TRUE(config.quantization.fp8);
  const ModelWeights kept = ModelWeights::load(config, checkpoint, /*keep_fp8=*/true);
  const ModelWeights dequantized = ModelWeights::load(config, checkpoint);
  EXPECT_TRUE(kept.has_fp8_linears());
  EXPECT_FALSE(dequantized.has_fp8_linears());
  const DecoderLayerWeights& l = kept.layers[1];
  EXPECT_EQ(l.q_proj.size(), 0u);
  EXPECT_EQ(l.down_proj.size(), 0u);
  const char* name = "model.layers.1.mlp.down_proj.weight";
  const SafetensorsTensor& q = *checkpoint.find(name);
  const SafetensorsTensor& s = *checkpoint.find(std::string(name) + "_scale");
  ASSERT_EQ(l.fp8.down_proj.bytes().size(), q.bytes.size());
  EXPECT_TRUE(std::equal(q.bytes.begin(), q.bytes.end(), l.fp8.down_proj.bytes().begin()));
  const int64_t rows = q.shape[0], cols = q.shape[1];
  ASSERT_EQ(static_cast<int64_t>(l.fp8.down_proj.scales().size()), rows);
  for (int64_t r = 0; r < rows; ++r) {
    float scale;
    std::memcpy(&scale, s.bytes.data() + 4 * r, 4);
    ASSERT_EQ(l.fp8.down_proj.scales()[static_cast<size_t>(r)], scale);
    // The dequantized load holds the same values rounded to bf16.
    for (int64_t c = 0; c < cols; c += 97)
      ASSERT_EQ(dequantized.layers[1].down_proj.data()[r * cols + c],
                float_to_bf16_bits(fp8_e4m3_to_float(q.bytes[static_cast<size_t>(r * cols + c)]) *
                                   scale));
  }
  // Block scales are kept as the checkpoint stores them (the runner decides which it computes
  // with: DeviceDecoderModel::keeps_fp8_weights).
  const std::string src = testing_support::scratch_dir("quench_fp8_checkpoint_test", "keep_src");
  const std::string blocks = testing_support::scratch_dir("quench_fp8_checkpoint_test", "keep_blk");
  write_tiny_model(src, TinyModelSpec{});
  write_fp8_checkpoint(src, blocks,
                       Scheme{"b", json{{"quant_method", "fp8"}, {"weight_block_size", {32, 64}}},
                              32, 64, "_scale_inv"});
  const Checkpoint block_checkpoint(blocks);
  const ModelWeights block_load = ModelWeights::load(
      read_model_config(block_checkpoint.config_path()), block_checkpoint, /*keep_fp8=*/true);
  EXPECT_TRUE(block_load.has_fp8_linears());
  const Fp8Weight& kept_q = block_load.layers[0].fp8.q_proj;
  EXPECT_TRUE(kept_q.blocks());
  EXPECT_EQ(kept_q.block_out(), 32);
  EXPECT_EQ(kept_q.block_in(), 64);
  const SafetensorsTensor& q_scale =
      *block_checkpoint.find("model.layers.0.self_attn.q_proj.weight_scale_inv");
  EXPECT_EQ(static_cast<int64_t>(kept_q.scales().size()), q_scale.num_elements());
}

// Loaded weights keep the checkpoint's mappings (ModelWeights::mapped_files): a helper that
// loads them and lets its Checkpoint go hands back weights that still read the file's bytes (the
// views once pointed into unmapped memory then).
TEST(Fp8Checkpoint, WeightsStayValidAfterTheirCheckpointIsGone) {
  const std::string dir = testing_support::scratch_dir("quench_fp8_checkpoint_test", "outlive");
  write_tiny_model(dir, builtin_model_spec("tiny-fp8"));
  const ModelConfig config = read_model_config(dir + "/config.json");
  // Mapped first, so that the loads' own mappings cannot come back at the same addresses.
  const Checkpoint again(dir);
  const auto load_alone = [&](bool keep_fp8) {
    const Checkpoint checkpoint(dir);
    return ModelWeights::load(config, checkpoint, keep_fp8);
  };
  const ModelWeights kept = load_alone(true);
  const ModelWeights dequantized = load_alone(false);
  const SafetensorsTensor& embed = *again.find("model.embed_tokens.weight");
  ASSERT_EQ(kept.embed_tokens.size() * 2, embed.bytes.size());
  EXPECT_EQ(std::memcmp(kept.embed_tokens.data(), embed.bytes.data(), embed.bytes.size()), 0);
  const SafetensorsTensor& down = *again.find("model.layers.1.mlp.down_proj.weight");
  const Fp8Weight& kept_down = kept.layers[1].fp8.down_proj;
  ASSERT_EQ(kept_down.bytes().size(), down.bytes.size());
  EXPECT_TRUE(std::equal(down.bytes.begin(), down.bytes.end(), kept_down.bytes().begin()));
  EXPECT_EQ(
      std::memcmp(dequantized.final_norm.data(), again.find("model.norm.weight")->bytes.data(),
                  dequantized.final_norm.size() * 2),
      0);
}

// Which FP8 checkpoints the GPU runner computes with as FP8: on Hopper or newer, per-tensor and
// per-channel ones always; 128 x 128 blocks where every linear input is a multiple of 512 and
// q / k / v are whole 128-row blocks (Llama-3-8B's and Qwen3-8B's shapes); nothing else.
TEST(Fp8Checkpoint, TheGpuRunnerKeepsChannelsAndWholeBlocks) {
  ModelConfig c =
      parse_model_config(tiny_model_config_json(builtin_model_spec("llama3-8b")), "config.json");
  EXPECT_FALSE(DeviceDecoderModel::keeps_fp8_weights(c, 90));  // bf16
  c.quantization.fp8 = true;
  EXPECT_TRUE(DeviceDecoderModel::keeps_fp8_weights(c, 90));   // per channel / per tensor
  EXPECT_FALSE(DeviceDecoderModel::keeps_fp8_weights(c, 89));  // Ada: scalar FP8 scales only
  c.quantization.block_out = c.quantization.block_in = 128;
  EXPECT_TRUE(DeviceDecoderModel::keeps_fp8_weights(c, 90));
  c.quantization.block_out = c.quantization.block_in = 64;
  EXPECT_FALSE(DeviceDecoderModel::keeps_fp8_weights(c, 90));
  c.quantization.block_out = c.quantization.block_in = 128;
  c.intermediate_size = 14336 + 128;  // not a multiple of 512
  EXPECT_FALSE(DeviceDecoderModel::keeps_fp8_weights(c, 90));
}

TEST(Fp8CheckpointErrors, UnsupportedMethodsAndMissingScales) {
  const std::string tiny = tiny_model_config_json(TinyModelSpec{});
  json config = json::parse(tiny);
  config["quantization_config"] = {{"quant_method", "awq"}};
  EXPECT_QUENCH_ERROR(parse_model_config(config.dump(), "c.json"),
                      {"quant_method 'awq'", "fp8, compressed-tensors"});
  config["quantization_config"] = {
      {"quant_method", "compressed-tensors"},
      {"config_groups", {{"g", {{"weights", {{"type", "int"}, {"num_bits", 4}}}}}}}};
  EXPECT_QUENCH_ERROR(parse_model_config(config.dump(), "c.json"),
                      {"group 'g'", "only FP8 weights"});
  // An FP8 weight whose scale is missing.
  const std::string src = testing_support::scratch_dir("quench_fp8_checkpoint_test", "missing_src");
  const std::string dst = testing_support::scratch_dir("quench_fp8_checkpoint_test", "missing_dst");
  write_tiny_model(src, TinyModelSpec{});
  write_fp8_checkpoint(src, dst, Scheme{"x", json{{"quant_method", "fp8"}}, 0, 0, "_not_a_scale"});
  const Checkpoint fp8(dst);
  const ModelConfig c = read_model_config(fp8.config_path());
  EXPECT_QUENCH_ERROR(ModelWeights::load(c, fp8), {"FP8 weight", "_proj.weight", "_scale"});
}

}  // namespace
}  // namespace quench
