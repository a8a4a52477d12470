// JSON read from a client or a model, with its nesting bounded while it is parsed: the readers
// after the parse (the protocol parsers, chat templates, the JSON Schema compiler, nlohmann's
// serializer for tool-call arguments) recurse through a value, so a deep one must be refused
// before any of them runs.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace quench {

struct BoundedJson {
  nlohmann::ordered_json value;  // keys in the order written
  // Empty where the text parsed; else why not ("is not valid JSON: ...", "nests deeper than N
  // arrays and objects"), to follow the text's name in a message.
  std::string error;
};

// `text` parsed, refused where it nests deeper than `max_depth` arrays and objects.
BoundedJson parse_bounded_json(std::string_view text, int max_depth);

}  // namespace quench
