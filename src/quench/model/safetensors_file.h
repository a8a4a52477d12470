// One `.safetensors` file, memory-mapped read-only. The format (docs/checkpoints.md):
//   [8 bytes little-endian u64 N][N bytes JSON header][data]
//   header: {"<name>": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, ...,
//            "__metadata__": {"<key>": "<string>"}}   offsets are bytes into data, end exclusive.
// Opening validates the whole header (sizes, dtypes, shapes, offsets inside the data and not
// overlapping) so a truncated or hand-edited file fails at load with its name and the bad field,
// never later as a wrong number or a fault. Tensor bytes are not copied: views point into the map.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "quench/core/dtype.h"

namespace quench {

// A tensor as the header describes it, and where its bytes are.
struct SafetensorsTensor {
  std::string name;
  std::string dtype_name;      // as written: "BF16", "F8_E4M3", "I64", ...
  std::optional<DType> dtype;  // quench's dtype where quench has one (F32/BF16/F16/F8_*/I32/U8)
  std::vector<int64_t> shape;
  std::span<const uint8_t> bytes;  // into the mapped file

  int64_t num_elements() const;
};

// The safetensors dtype names and their element sizes in bytes; throws quench::Error naming
// the bad name and the allowed ones.
int32_t safetensors_dtype_bytes(const std::string& dtype_name);
std::optional<DType> safetensors_dtype_to_quench(const std::string& dtype_name);
// The safetensors name of a quench dtype (F32, BF16, F16, F8_E4M3, F8_E5M2, I32, U8).
const char* safetensors_dtype_name(DType dtype);

class SafetensorsFile {
 public:
  // Maps and validates `path`. Throws quench::Error naming the file and the problem.
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  // Tensors by name (sorted).
  const std::map<std::string, SafetensorsTensor>& tensors() const { return tensors_; }
  // nullptr when absent.
  const SafetensorsTensor* find(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  std::string path_;
  const uint8_t* map_ = nullptr;
  size_t map_bytes_ = 0;
  std::map<std::string, SafetensorsTensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Parses a header (the JSON text) against `data_bytes` bytes of data; `source` names the file in
// errors. Exposed so that tests can feed hand-made headers.
std::map<std::string, SafetensorsTensor> parse_safetensors_header(
    const std::string& header_json, std::span<const uint8_t> data, const std::string& source,
    std::map<std::string, std::string>* metadata);

// A tensor to write: raw little-endian element bytes in row-major order.
struct SafetensorsTensorToWrite {
  std::string name;
  DType dtype = DType::kBF16;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// Writes a .safetensors file (tensors in the order given, header padded with spaces to 8 bytes).
// Throws quench::Error when a tensor's byte count does not match its shape and dtype, a name
// repeats, or the file cannot be written.
void write_safetensors(const std::string& path,
                       const std::vector<SafetensorsTensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace quench
