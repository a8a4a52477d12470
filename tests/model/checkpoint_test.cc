// A checkpoint directory: one file or shards through the index; a missing shard, an index that
// puts a tensor in the wrong shard, a missing tensor or a shape that disagrees with the config
// fail at load, naming the file and the tensor.
#include "quench/model/checkpoint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "harness/expect_error.h"
#include "harness/scratch_dir.h"
#include "quench/model/tiny_model.h"

namespace quench {
namespace {

using testing_support::scratch_dir;

// Tensors of the tiny model: embed, final norm, lm_head, and 9 per layer (11 for Qwen3).
size_t tiny_tensor_count(const TinyModelSpec& s) {
  const size_t per_layer = s.architecture == ModelArchitecture::kQwen3 ? 11 : 9;
  return 2 + (s.tie_word_embeddings ? 0 : 1) + per_layer * static_cast<size_t>(s.num_layers);
}

TEST(Checkpoint, ShardedModelIsReadThroughItsIndex) {
  TinyModelSpec spec;
  spec.num_shards = 3;
  const std::string dir = scratch_dir("quench_checkpoint_test", "sharded");
  write_tiny_model(dir, spec);
  const Checkpoint checkpoint(dir);
  EXPECT_EQ(checkpoint.shards().size(), 3u);
  EXPECT_EQ(checkpoint.num_tensors(), tiny_tensor_count(spec));
  const SafetensorsTensor& embed =
      checkpoint.require("model.embed_tokens.weight", {spec.vocab_size, spec.hidden_size});
  EXPECT_EQ(embed.bytes.size(), static_cast<size_t>(2 * spec.vocab_size * spec.hidden_size));
  EXPECT_NE(checkpoint.find("lm_head.weight"), nullptr);  // in the last shard
  EXPECT_QUENCH_ERROR(checkpoint.require("model.norm.weight", {spec.hidden_size + 1}),
                      {"model.norm.weight", "[256]", "[257]"});
  EXPECT_QUENCH_ERROR(checkpoint.require("model.nope", {1}), {"no tensor \"model.nope\""});
}

TEST(Checkpoint, SingleFileModelNeedsNoIndex) {
  TinyModelSpec spec;
  spec.num_shards = 1;
  const std::string dir = scratch_dir("quench_checkpoint_test", "single");
  write_tiny_model(dir, spec);
  const Checkpoint checkpoint(dir);
  EXPECT_EQ(checkpoint.shards().size(), 1u);
  EXPECT_EQ(checkpoint.num_tensors(), tiny_tensor_count(spec));
}

TEST(Checkpoint, MissingShardOrWrongShardFailsAtLoad) {
  TinyModelSpec spec;
  spec.num_shards = 2;
  const std::string dir = scratch_dir("quench_checkpoint_test", "broken");
  write_tiny_model(dir, spec);
  const std::string index_path = dir + "/model.safetensors.index.json";
  nlohmann::json index = nlohmann::json::parse(std::ifstream(index_path));
  // Point the embedding (in shard 1) at shard 2.
  index["weight_map"]["model.embed_tokens.weight"] = "model-00002-of-00002.safetensors";
  std::ofstream(index_path) << index.dump();
  EXPECT_QUENCH_ERROR(Checkpoint{dir}, {"model.embed_tokens.weight", "does not hold it"});
  std::filesystem::remove(dir + "/model-00002-of-00002.safetensors");
  EXPECT_QUENCH_ERROR(Checkpoint{dir}, {"model-00002-of-00002.safetensors", "missing"});
}

TEST(Checkpoint, DirectoryWithoutWeightsFails) {
  const std::string dir = scratch_dir("quench_checkpoint_test", "empty");
  EXPECT_QUENCH_ERROR(Checkpoint{dir}, {"neither model.safetensors nor"});
  EXPECT_QUENCH_ERROR(Checkpoint{dir + "/absent"}, {"is not a directory"});
}

}  // namespace
}  // namespace quench
