// The error a request handler throws for the client: an HTTP status and a message naming the bad
// field and the allowed values. Its own header so that request parsers outside openai_protocol
// (chat messages, tools) throw it without depending on the whole protocol.
#pragma once

#include <stdexcept>
#include <string>

namespace quench {

// An HTTP status and a message for the client (400 bad request, 404 unknown model, ...).
struct ApiError : std::runtime_error {
  ApiError(int status_code, const std::string& message, std::string error_type = "BadRequestError")
      : std::runtime_error(message), status(status_code), type(std::move(error_type)) {}
  int status;
  std::string type;
};

// A 400 naming the bad field (request parsers' one way to refuse).
[[noreturn]] inline void bad_request(const std::string& message) {
  throw ApiError(400, message);
}

}  // namespace quench
