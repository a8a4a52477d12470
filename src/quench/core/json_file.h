// Reading the JSON files a model directory holds (config.json, tokenizer.json, ...): one place
// that turns a missing file or malformed text into an error naming the file.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace quench {

// The whole file as text; throws quench::Error "cannot open <what> '<path>'".
std::string read_text_file(const std::string& path, const std::string& what);

// Parses `text`, which must be a JSON object; throws quench::Error naming `source`.
nlohmann::json parse_json_object(std::string_view text, const std::string& source);

// A field given and not null, in a JSON or ordered-JSON object (HF configs and API requests both
// write null for "not set").
template <typename Json>
bool present(const Json& object, const char* key) {
  return object.contains(key) && !object.at(key).is_null();
}

}  // namespace quench
