// Chat messages to prompt text with the model's own Jinja chat template, rendered as HF
// transformers' apply_chat_template renders it (the interpreter is in jinja/). The template
// comes from the model directory: chat_template.jinja when present (newer HF models), else
// tokenizer_config.json's "chat_template" (a string, or a list of named templates of which the
// "default" one). The render variables are HF's: messages, add_generation_prompt, tools (None
// unless given), documents (None), the special tokens from tokenizer_config.json (bos_token,
// eos_token, ...), and the request's extra keyword arguments (e.g. enable_thinking), which
// override them.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "quench/server/jinja/template.h"

namespace quench {

class ChatTemplate {
 public:
  // Throws quench::Error naming the line and column of a syntax error. `special_tokens` maps
  // names such as "bos_token" to their strings.
  ChatTemplate(const std::string& source, nlohmann::json special_tokens,
               std::string origin = "template");

  // The model directory's template; nullopt when it has none. Throws quench::Error for an
  // unreadable file or a template that does not parse.
  static std::optional<ChatTemplate> from_model_dir(const std::string& model_dir);

  // The prompt text. `messages` is a list of message objects ({"role", "content"} and whatever
  // else the template reads, e.g. tool_calls; chat_messages.h builds them from a request).
  // `kwargs` (a JSON object, may be null) adds render variables; it may not set messages or
  // add_generation_prompt, nor tools when `tools` (a list, or null) is given. Throws
  // jinja::RaisedError with the template's own message for raise_exception(), quench::Error
  // naming the position for any other failure.
  std::string render(const jinja::Json& messages, bool add_generation_prompt,
                     const nlohmann::json& kwargs = nullptr,
                     const jinja::Json& tools = nullptr) const;

  // Where the template came from, for the load log: "chat_template.jinja" or
  // "tokenizer_config.json".
  const std::string& origin() const { return origin_; }

 private:
  jinja::Template template_;
  jinja::Json special_tokens_;
  std::string origin_;
};

}  // namespace quench
