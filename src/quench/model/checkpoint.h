// A HuggingFace checkpoint directory: config.json beside either one `model.safetensors` or the
// shards named by `model.safetensors.index.json` ({"weight_map": {"<tensor>": "<shard file>"}}).
// Every shard is mapped once; a tensor is looked up by its HF name. Opening checks that each
// tensor the index names is in the shard it names, so a missing or stale shard fails at load.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "quench/model/safetensors_file.h"

namespace quench {

class Checkpoint {
 public:
  // Throws quench::Error naming the directory and what is missing or malformed.
  explicit Checkpoint(const std::string& dir);

  const std::string& dir() const { return dir_; }
  std::string config_path() const { return dir_ + "/config.json"; }
  // nullptr when no shard has it.
  const SafetensorsTensor* find(const std::string& name) const;
  // The tensor, checked against the expected shape; throws naming the tensor, its file, and the
  // expected and found shapes when it is missing or differs.
  const SafetensorsTensor& require(const std::string& name,
                                   const std::vector<int64_t>& shape) const;
  size_t num_tensors() const;
  int64_t total_bytes() const;  // tensor bytes over all shards
  // Shared, so that weights viewing a shard's mapping can keep it (ModelWeights::mapped_files).
  const std::vector<std::shared_ptr<const SafetensorsFile>>& shards() const { return shards_; }

 private:
  std::string dir_;
  std::vector<std::shared_ptr<const SafetensorsFile>> shards_;
};

// "[a, b, c]".
std::string shape_string(const std::vector<int64_t>& shape);

}  // namespace quench
