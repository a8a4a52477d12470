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

}  // namespace quench
