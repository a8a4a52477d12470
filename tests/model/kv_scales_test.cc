// Checkpoint KV-cache scales: each layer's k_scale / v_scale (or one kv_scale) and q_scale are
// read and applied to that layer's FP8 cache (a scale far too small saturates the cache and moves
// the logits far; the bf16 cache ignores them and gives the very same logits), and malformed ones
// are named with their layer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "harness/expect_error.h"
#include "harness/model_with_scales.h"
#include "harness/rel_l2.h"
#include "harness/scratch_dir.h"
#include "quench/model/decoder_model.h"
#include "quench/model/tiny_model.h"

namespace quench {
namespace {

using testing_support::rel_l2;

using testing_support::model_with_scales;

std::vector<float> logits(const std::string& dir, DType kv) {
  const Checkpoint checkpoint(dir);
  const ModelConfig config = read_model_config(checkpoint.config_path());
  const ModelWeights weights = ModelWeights::load(config, checkpoint);
  DecoderModelOptions o;
  o.kv_dtype = kv;
  o.num_pages = 8;
  o.max_model_len = 64;
  DecoderModel model(config, weights, o);
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < 30; ++i)
    ids.push_back(7 + 17 * i);
  const std::vector<ScheduledSequence> prefill = {{{1, 2}, 0, 30}};
  return model.forward(ids, build_attention_metadata({}, prefill, 16, 8), std::vector<int32_t>{29});
}

TEST(KvScales, ReadPerLayerAndAppliedToTheFp8CacheOnly) {
  const std::string plain = model_with_scales("plain", {});
  const std::string scaled =
      model_with_scales("scaled", {{"model.layers.0.self_attn.k_scale", {1e-3f}},
                                   {"model.layers.0.self_attn.v_scale", {1e-3f}},
                                   {"model.layers.1.self_attn.kv_scale", {0.5f}}});
  const Checkpoint checkpoint(scaled);
  const ModelConfig config = read_model_config(checkpoint.config_path());
  const ModelWeights weights = ModelWeights::load(config, checkpoint);
  ASSERT_EQ(weights.attention_scales.size(), 2u);
  EXPECT_EQ(*weights.attention_scales[0].k_scale, std::vector<float>{1e-3f});
  EXPECT_EQ(*weights.attention_scales[1].v_scale, std::vector<float>{0.5f});  // from kv_scale
  EXPECT_FALSE(weights.attention_scales[1].q_scale.has_value());
  const std::vector<float> bf16 = logits(plain, DType::kBF16);
  EXPECT_EQ(logits(scaled, DType::kBF16), bf16);  // a bf16 cache stores values unscaled
  const double unit = rel_l2<float>(logits(plain, DType::kFP8E4M3), bf16);
  const double saturated = rel_l2<float>(logits(scaled, DType::kFP8E4M3), bf16);
  EXPECT_LT(unit, 0.06);
  EXPECT_GT(saturated, 3 * unit);  // layer 0's values / 1e-3 leave e4m3's range
}

TEST(KvScales, MalformedScalesNameTheLayer) {
  const std::string bad =
      model_with_scales("bad", {{"model.layers.1.self_attn.k_scale", {0.1f, 0.2f, 0.3f}}});
  const Checkpoint checkpoint(bad);
  const ModelConfig config = read_model_config(checkpoint.config_path());
  const ModelWeights weights = ModelWeights::load(config, checkpoint);
  DecoderModelOptions o;
  o.kv_dtype = DType::kFP8E4M3;
  o.num_pages = 8;
  o.max_model_len = 64;
  EXPECT_QUENCH_ERROR(DecoderModel(config, weights, o), {"layer 1", "k_scale"});
}

}  // namespace
}  // namespace quench
