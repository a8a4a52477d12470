// The safetensors reader and writer: a round trip keeps every name, dtype, shape, byte and
// metadata entry; truncated, oversized, overlapping and malformed files fail at open with a
// message that names the file, the tensor and the field.
#include "quench/model/safetensors_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "harness/expect_error.h"
#include "harness/scratch_dir.h"

namespace quench {
namespace {

using testing_support::scratch_dir;

std::vector<uint8_t> iota_bytes(size_t n, uint8_t start) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i)
    b[i] = static_cast<uint8_t>(start + 7 * i);
  return b;
}

std::vector<SafetensorsTensorToWrite> three_tensors() {
  return {{"a.weight", DType::kBF16, {2, 3}, iota_bytes(12, 1)},
          {"b", DType::kF32, {4}, iota_bytes(16, 50)},
          {"empty", DType::kU8, {0, 5}, {}},
          {"fp8", DType::kFP8E4M3, {3}, iota_bytes(3, 9)}};
}

std::string write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// A file with the given header text and `data_bytes` zero bytes of data.
std::string raw_file(const std::string& dir, const std::string& header, size_t data_bytes) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i)
    bytes[static_cast<size_t>(i)] = static_cast<char>(header.size() >> (8 * i));
  bytes += header;
  bytes += std::string(data_bytes, '\0');
  return write_file(dir + "/raw.safetensors", bytes);
}

TEST(SafetensorsFile, RoundTripKeepsNamesShapesBytesAndMetadata) {
  const std::string dir = scratch_dir("quench_safetensors_test", "round_trip");
  const std::string path = dir + "/m.safetensors";
  const auto tensors = three_tensors();
  write_safetensors(path, tensors, {{"format", "pt"}});
  const SafetensorsFile file(path);
  EXPECT_EQ(file.metadata().at("format"), "pt");
  ASSERT_EQ(file.tensors().size(), tensors.size());
  for (const auto& want : tensors) {
    const SafetensorsTensor* got = file.find(want.name);
    ASSERT_NE(got, nullptr) << want.name;
    EXPECT_EQ(got->dtype, want.dtype);
    EXPECT_EQ(got->dtype_name, safetensors_dtype_name(want.dtype));
    EXPECT_EQ(got->shape, want.shape);
    EXPECT_EQ(std::vector<uint8_t>(got->bytes.begin(), got->bytes.end()), want.bytes);
  }
  EXPECT_EQ(file.find("missing"), nullptr);
  // The header is padded to a multiple of 8 bytes, so 8-byte data stays aligned.
  std::ifstream in(path, std::ios::binary);
  uint8_t length[8];
  in.read(reinterpret_cast<char*>(length), 8);
  EXPECT_EQ(length[0] % 8, 0);
}

TEST(SafetensorsFile, DtypesWithoutAQuenchTypeStillParse) {
  const std::string dir = scratch_dir("quench_safetensors_test", "i64");
  const std::string path =
      raw_file(dir, R"({"steps": {"dtype": "I64", "shape": [2], "data_offsets": [0, 16]}})", 16);
  const SafetensorsFile file(path);
  EXPECT_EQ(file.find("steps")->dtype_name, "I64");
  EXPECT_FALSE(file.find("steps")->dtype.has_value());
}

TEST(SafetensorsFile, TruncatedFileNamesTheTensorOutsideTheData) {
  const std::string dir = scratch_dir("quench_safetensors_test", "truncated");
  const std::string path = dir + "/m.safetensors";
  write_safetensors(path, three_tensors());
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 2);
  EXPECT_QUENCH_ERROR(SafetensorsFile{path}, {path.c_str(), "fp8", "outside", "truncated"});
}

TEST(SafetensorsFile, ShortFileAndOversizedHeaderLengthFail) {
  const std::string dir = scratch_dir("quench_safetensors_test", "short");
  EXPECT_QUENCH_ERROR(SafetensorsFile{write_file(dir + "/s", "abc")}, {"too short", "8"});
  std::string huge(8, '\xff');
  huge += "{}";
  EXPECT_QUENCH_ERROR(SafetensorsFile{write_file(dir + "/h", huge)},
                      {"header length", "does not fit"});
  EXPECT_QUENCH_ERROR(SafetensorsFile{dir + "/absent"}, {"cannot open", "absent"});
}

TEST(SafetensorsHeader, MalformedEntriesNameTheFieldAndAllowedValues) {
  const std::vector<uint8_t> data(64);
  auto parse = [&](const std::string& header) {
    return parse_safetensors_header(header, data, "f.safetensors", nullptr);
  };
  EXPECT_QUENCH_ERROR(parse("{not json"), {"f.safetensors", "not valid JSON"});
  EXPECT_QUENCH_ERROR(parse("[1]"), {"not a JSON object"});
  EXPECT_QUENCH_ERROR(parse(R"({"t": {"dtype": "F4", "shape": [1], "data_offsets": [0, 1]}})"),
                      {"\"t\"", "unknown safetensors dtype \"F4\"", "BF16", "F8_E4M3"});
  EXPECT_QUENCH_ERROR(parse(R"({"t": {"dtype": "BF16", "shape": [3], "data_offsets": [0, 4]}})"),
                      {"\"t\"", "holds 4 bytes", "need 6"});
  EXPECT_QUENCH_ERROR(parse(R"({"t": {"dtype": "BF16", "shape": [-1], "data_offsets": [0, 2]}})"),
                      {"\"t\"", "non-negative"});
  EXPECT_QUENCH_ERROR(parse(R"({"t": {"dtype": "BF16", "shape": [2]}})"),
                      {"\"t\"", "data_offsets"});
  EXPECT_QUENCH_ERROR(parse(R"({"t": {"dtype": "U8", "shape": [8], "data_offsets": [8, 0]}})"),
                      {"\"t\"", "outside"});
  EXPECT_QUENCH_ERROR(parse(R"({"a": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]},
                                "b": {"dtype": "U8", "shape": [8], "data_offsets": [4, 12]}})"),
                      {"share the data bytes [4, 8)"});
  EXPECT_QUENCH_ERROR(parse(R"({"__metadata__": {"k": 1}})"), {"__metadata__", "\"k\""});
}

TEST(SafetensorsWrite, RejectsRepeatedNamesAndWrongByteCounts) {
  const std::string dir = scratch_dir("quench_safetensors_test", "write");
  EXPECT_QUENCH_ERROR(write_safetensors(dir + "/x", {{"t", DType::kBF16, {3}, iota_bytes(5, 0)}}),
                      {"\"t\"", "5 bytes", "need 6"});
  EXPECT_QUENCH_ERROR(write_safetensors(dir + "/x", {{"t", DType::kU8, {1}, iota_bytes(1, 0)},
                                                     {"t", DType::kU8, {1}, iota_bytes(1, 0)}}),
                      {"\"t\"", "twice"});
}

}  // namespace
}  // namespace quench
