#include "quench/core/json_file.h"

#include <fstream>
#include <sstream>

#include "quench/core/error.h"

namespace quench {

std::string read_text_file(const std::string& path, const std::string& what) {
  std::ifstream file(path);
  QUENCH_REQUIRE(file.good(), "cannot open ", what, " '", path, "'");
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

nlohmann::json parse_json_object(std::string_view text, const std::string& source) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(str_cat(source, ": not valid JSON: ", e.what()));
  }
  QUENCH_REQUIRE(j.is_object(), source, ": expected a JSON object");
  return j;
}

}  // namespace quench
