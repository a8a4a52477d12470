#include "quench/model/checkpoint.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "quench/core/error.h"
#include "quench/core/json_file.h"

namespace quench {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Checkpoint::Checkpoint(const std::string& dir) : dir_(dir) {
  namespace fs = std::filesystem;
  QUENCH_REQUIRE(fs::is_directory(dir), "checkpoint ", dir, " is not a directory");
  const fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  const fs::path single_path = fs::path(dir) / "model.safetensors";
  if (!fs::exists(index_path)) {
    QUENCH_REQUIRE(fs::exists(single_path), "checkpoint ", dir,
                   " has neither model.safetensors nor model.safetensors.index.json");
    shards_.push_back(std::make_shared<const SafetensorsFile>(single_path.string()));
    return;
  }
  const nlohmann::json index = parse_json_object(
      read_text_file(index_path.string(), "checkpoint index"), index_path.string());
  QUENCH_REQUIRE(index.contains("weight_map") && index["weight_map"].is_object(),
                 index_path.string(), " has no \"weight_map\" object");
  std::map<std::string, size_t> shard_of_file;
  std::vector<std::pair<std::string, size_t>> expected;
  for (const auto& [name, file] : index["weight_map"].items()) {
    QUENCH_REQUIRE(file.is_string(), index_path.string(), ": weight_map entry \"", name,
                   "\" is not a file name");
    const std::string shard = file.get<std::string>();
    QUENCH_REQUIRE(shard.find('/') == std::string::npos && shard != ".." && !shard.empty(),
                   index_path.string(), ": shard \"", shard, "\" is not a file in ", dir);
    auto it = shard_of_file.find(shard);
    if (it == shard_of_file.end()) {
      const fs::path shard_path = fs::path(dir) / shard;
      QUENCH_REQUIRE(fs::exists(shard_path), index_path.string(), " names shard ", shard,
                     " (for \"", name, "\"), which is missing");
      shards_.push_back(std::make_shared<const SafetensorsFile>(shard_path.string()));
      it = shard_of_file.emplace(shard, shards_.size() - 1).first;
    }
    expected.emplace_back(name, it->second);
  }
  for (const auto& [name, shard] : expected) {
    QUENCH_REQUIRE(shards_[shard]->find(name) != nullptr, index_path.string(), " puts \"", name,
                   "\" in ", shards_[shard]->path(), ", which does not hold it");
  }
}

const SafetensorsTensor* Checkpoint::find(const std::string& name) const {
  for (const auto& shard : shards_)
    if (const SafetensorsTensor* t = shard->find(name)) return t;
  return nullptr;
}

const SafetensorsTensor& Checkpoint::require(const std::string& name,
                                             const std::vector<int64_t>& shape) const {
  const SafetensorsTensor* t = find(name);
  QUENCH_REQUIRE(t != nullptr, "checkpoint ", dir_, " has no tensor \"", name, "\"");
  QUENCH_REQUIRE(t->shape == shape, "checkpoint ", dir_, ": tensor \"", name, "\" has shape ",
                 shape_string(t->shape), ", the config implies ", shape_string(shape));
  return *t;
}

size_t Checkpoint::num_tensors() const {
  size_t n = 0;
  for (const auto& shard : shards_)
    n += shard->tensors().size();
  return n;
}

int64_t Checkpoint::total_bytes() const {
  int64_t n = 0;
  for (const auto& shard : shards_)
    for (const auto& [name, t] : shard->tensors())
      n += static_cast<int64_t>(t.bytes.size());
  return n;
}

}  // namespace quench
