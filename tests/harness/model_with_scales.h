// The built-in tiny model (one shard) with extra F32 tensors added beside its weights, such as a
// checkpoint's KV-cache scales ("model.layers.0.self_attn.k_scale": one value is a scalar, more
// are one per KV head). Written to a fresh scratch directory named by `name`; returns its path.
#pragma once

#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "harness/scratch_dir.h"
#include "quench/model/checkpoint.h"
#include "quench/model/safetensors_file.h"
#include "quench/model/tiny_model.h"

namespace quench::testing_support {

inline std::string model_with_scales(
    const std::string& name, const std::vector<std::pair<std::string, std::vector<float>>>& extra,
    TinyModelSpec spec = TinyModelSpec{}) {
  const std::string src = scratch_dir("quench_model_with_scales", name + "_src");
  const std::string dst = scratch_dir("quench_model_with_scales", name);
  spec.num_shards = 1;
  write_tiny_model(src, spec);
  std::filesystem::copy_file(src + "/config.json", dst + "/config.json");
  const Checkpoint checkpoint(src);
  std::vector<SafetensorsTensorToWrite> tensors;
  for (const auto& [n, t] : checkpoint.shards()[0]->tensors()) {
    tensors.push_back(
        {n, DType::kBF16, t.shape, std::vector<uint8_t>(t.bytes.begin(), t.bytes.end())});
  }
  for (const auto& [n, values] : extra) {
    SafetensorsTensorToWrite t{n, DType::kF32,
                               values.size() == 1
                                   ? std::vector<int64_t>{}
                                   : std::vector<int64_t>{static_cast<int64_t>(values.size())},
                               std::vector<uint8_t>(values.size() * 4)};
    std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
    tensors.push_back(std::move(t));
  }
  write_safetensors(dst + "/model.safetensors", tensors);
  return dst;
}

}  // namespace quench::testing_support
