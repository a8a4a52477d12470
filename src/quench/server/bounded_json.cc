#include "quench/server/bounded_json.h"

#include "quench/core/error.h"

namespace quench {
namespace {

struct TooDeep {};

}  // namespace

BoundedJson parse_bounded_json(std::string_view text, int max_depth) {
  using ordered = nlohmann::ordered_json;
  BoundedJson out;
  try {
    // The parser itself does not recurse; the callback stops it at the first level too deep.
    out.value = ordered::parse(text.begin(), text.end(),
                               [max_depth](int depth, ordered::parse_event_t, ordered&) {
                                 if (depth > max_depth) throw TooDeep{};
                                 return true;
                               });
  } catch (const TooDeep&) {
    out.error = str_cat("nests deeper than ", max_depth, " arrays and objects");
  } catch (const nlohmann::json::exception& e) {
    out.error = str_cat("is not valid JSON: ", e.what());
  }
  return out;
}

}  // namespace quench
