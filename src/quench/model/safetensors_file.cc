#include "quench/model/safetensors_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "quench/core/error.h"

namespace quench {
namespace {

struct DTypeEntry {
  const char* name;
  int32_t bytes;
  std::optional<DType> dtype;
};

// Every dtype the format defines; quench reads the ones with a DType and skips the rest unless
// a model asks for them.
const DTypeEntry kDTypes[] = {
    {"BOOL", 1, std::nullopt},       {"U8", 1, DType::kU8},           {"I8", 1, std::nullopt},
    {"F8_E4M3", 1, DType::kFP8E4M3}, {"F8_E5M2", 1, DType::kFP8E5M2}, {"I16", 2, std::nullopt},
    {"U16", 2, std::nullopt},        {"F16", 2, DType::kF16},         {"BF16", 2, DType::kBF16},
    {"I32", 4, DType::kI32},         {"U32", 4, std::nullopt},        {"F32", 4, DType::kF32},
    {"I64", 8, std::nullopt},        {"U64", 8, std::nullopt},        {"F64", 8, std::nullopt},
};

const DTypeEntry& dtype_entry(const std::string& name) {
  for (const DTypeEntry& e : kDTypes)
    if (name == e.name) return e;
  std::string allowed;
  for (const DTypeEntry& e : kDTypes)
    allowed += std::string(allowed.empty() ? "" : ", ") + e.name;
  fail(str_cat("unknown safetensors dtype \"", name, "\" (allowed: ", allowed, ")"));
}

// The largest header the reference implementation accepts; a bigger length field means a
// corrupt file, not a real header.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

}  // namespace

int64_t SafetensorsTensor::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

int32_t safetensors_dtype_bytes(const std::string& dtype_name) {
  return dtype_entry(dtype_name).bytes;
}

std::optional<DType> safetensors_dtype_to_quench(const std::string& dtype_name) {
  return dtype_entry(dtype_name).dtype;
}

const char* safetensors_dtype_name(DType dtype) {
  for (const DTypeEntry& e : kDTypes)
    if (e.dtype == dtype) return e.name;
  fail(str_cat("dtype ", quench::dtype_name(dtype), " has no safetensors name"));
}

std::map<std::string, SafetensorsTensor> parse_safetensors_header(
    const std::string& header_json, std::span<const uint8_t> data, const std::string& source,
    std::map<std::string, std::string>* metadata) {
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(header_json);
  } catch (const nlohmann::json::exception& e) {
    fail(str_cat(source, ": the safetensors header is not valid JSON (", e.what(), ")"));
  }
  QUENCH_REQUIRE(header.is_object(), source, ": the safetensors header is not a JSON object");
  std::map<std::string, SafetensorsTensor> tensors;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& [name, entry] : header.items()) {
    const std::string where = str_cat(source, ": tensor \"", name, "\"");
    if (name == "__metadata__") {
      QUENCH_REQUIRE(entry.is_object(), source, ": __metadata__ is not an object");
      for (const auto& [key, value] : entry.items()) {
        QUENCH_REQUIRE(value.is_string(), source, ": __metadata__ value of \"", key,
                       "\" is not a string");
        if (metadata != nullptr) (*metadata)[key] = value.get<std::string>();
      }
      continue;
    }
    QUENCH_REQUIRE(entry.is_object(), where, " is not an object");
    QUENCH_REQUIRE(entry.contains("dtype") && entry["dtype"].is_string(), where,
                   " has no string \"dtype\"");
    QUENCH_REQUIRE(entry.contains("shape") && entry["shape"].is_array(), where,
                   " has no \"shape\" array");
    QUENCH_REQUIRE(entry.contains("data_offsets") && entry["data_offsets"].is_array() &&
                       entry["data_offsets"].size() == 2,
                   where, " has no \"data_offsets\" pair");
    SafetensorsTensor t;
    t.name = name;
    t.dtype_name = entry["dtype"].get<std::string>();
    int32_t elem_bytes = 0;
    try {
      elem_bytes = safetensors_dtype_bytes(t.dtype_name);
    } catch (const Error& e) {
      fail(str_cat(where, ": ", e.what()));
    }
    t.dtype = safetensors_dtype_to_quench(t.dtype_name);
    // Element count in 128 bits would be overkill: dims are bounded so the product cannot wrap.
    uint64_t elements = 1;
    for (const auto& d : entry["shape"]) {
      QUENCH_REQUIRE(d.is_number_unsigned(), where,
                     " has a shape entry that is not a "
                     "non-negative integer");
      const uint64_t dim = d.get<uint64_t>();
      QUENCH_REQUIRE(dim <= (1ull << 40) && (dim == 0 || elements <= (1ull << 62) / dim), where,
                     " has a shape too large to address");
      elements *= dim;
      t.shape.push_back(static_cast<int64_t>(dim));
    }
    const auto& offsets = entry["data_offsets"];
    QUENCH_REQUIRE(offsets[0].is_number_unsigned() && offsets[1].is_number_unsigned(), where,
                   " has data_offsets that are not non-negative integers");
    const uint64_t begin = offsets[0].get<uint64_t>();
    const uint64_t end = offsets[1].get<uint64_t>();
    QUENCH_REQUIRE(begin <= end && end <= data.size(), where, " has data_offsets [", begin, ", ",
                   end, ") outside the file's ", data.size(), " data bytes (truncated file?)");
    QUENCH_REQUIRE(end - begin == elements * static_cast<uint64_t>(elem_bytes), where, " holds ",
                   end - begin, " bytes but its shape and dtype ", t.dtype_name, " need ",
                   elements * static_cast<uint64_t>(elem_bytes));
    t.bytes = data.subspan(static_cast<size_t>(begin), static_cast<size_t>(end - begin));
    if (end > begin) ranges.emplace_back(begin, end);
    tensors.emplace(name, std::move(t));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    QUENCH_REQUIRE(ranges[i].first >= ranges[i - 1].second, source,
                   ": two tensors share the data bytes [", ranges[i].first, ", ",
                   std::min(ranges[i].second, ranges[i - 1].second), ")");
  }
  return tensors;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  QUENCH_REQUIRE(fd >= 0, "cannot open ", path, ": ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail(str_cat("cannot stat ", path, ": ", std::strerror(err)));
  }
  map_bytes_ = static_cast<size_t>(st.st_size);
  if (map_bytes_ < 8) {
    ::close(fd);
    fail(str_cat(path, ": ", map_bytes_,
                 " bytes is too short for a safetensors file (the header "
                 "length alone takes 8)"));
  }
  void* map = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_errno = errno;
  ::close(fd);
  QUENCH_REQUIRE(map != MAP_FAILED, "cannot map ", path, ": ", std::strerror(map_errno));
  map_ = static_cast<const uint8_t*>(map);
  try {
    uint64_t header_bytes = 0;
    for (int i = 7; i >= 0; --i)
      header_bytes = (header_bytes << 8) | map_[i];
    QUENCH_REQUIRE(header_bytes <= kMaxHeaderBytes && header_bytes <= map_bytes_ - 8, path,
                   ": header length ", header_bytes, " does not fit the file's ", map_bytes_,
                   " bytes (not a safetensors file, or truncated)");
    const std::string header(reinterpret_cast<const char*>(map_ + 8), header_bytes);
    const std::span<const uint8_t> data(map_ + 8 + header_bytes, map_bytes_ - 8 - header_bytes);
    tensors_ = parse_safetensors_header(header, data, path, &metadata_);
  } catch (...) {
    ::munmap(const_cast<uint8_t*>(map_), map_bytes_);
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) ::munmap(const_cast<uint8_t*>(map_), map_bytes_);
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

void write_safetensors(const std::string& path,
                       const std::vector<SafetensorsTensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const SafetensorsTensorToWrite& t : tensors) {
    QUENCH_REQUIRE(names.insert(t.name).second, "write_safetensors: tensor name \"", t.name,
                   "\" appears twice");
    QUENCH_REQUIRE(t.name != "__metadata__", "write_safetensors: \"__metadata__\" is reserved");
    uint64_t elements = 1;
    for (int64_t d : t.shape) {
      QUENCH_REQUIRE(d >= 0, "write_safetensors: tensor \"", t.name, "\" has a negative dim");
      elements *= static_cast<uint64_t>(d);
    }
    const uint64_t want = dtype_bytes(t.dtype, elements);
    QUENCH_REQUIRE(t.bytes.size() == want, "write_safetensors: tensor \"", t.name, "\" has ",
                   t.bytes.size(), " bytes, its shape and dtype need ", want);
    header[t.name] = {{"dtype", safetensors_dtype_name(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + want}}};
    offset += want;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  QUENCH_REQUIRE(out.good(), "write_safetensors: cannot create ", path);
  uint8_t length[8];
  for (int i = 0; i < 8; ++i)
    length[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));
  out.write(reinterpret_cast<const char*>(length), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const SafetensorsTensorToWrite& t : tensors)
    out.write(reinterpret_cast<const char*>(t.bytes.data()),
              static_cast<std::streamsize>(t.bytes.size()));
  out.flush();
  QUENCH_REQUIRE(out.good(), "write_safetensors: writing ", path, " failed");
}

}  // namespace quench
