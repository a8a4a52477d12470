#include "quench/server/chat_template.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "quench/core/error.h"
#include "quench/core/json_file.h"

namespace quench {
namespace {

std::string trim(const std::string& s) {
  const size_t begin = s.find_first_not_of(" \t\n\r\f\v");
  if (begin == std::string::npos) return {};
  const size_t end = s.find_last_not_of(" \t\n\r\f\v");
  return s.substr(begin, end - begin + 1);
}

}  // namespace

std::optional<ChatFormat> detect_chat_format(const std::string& chat_template) {
  if (chat_template.find("<|start_header_id|>") != std::string::npos) return ChatFormat::kLlama3;
  if (chat_template.find("<|im_start|>") != std::string::npos) return ChatFormat::kChatMl;
  return std::nullopt;
}

std::optional<ChatFormat> read_chat_format(const std::string& model_dir) {
  const std::filesystem::path path = std::filesystem::path(model_dir) / "tokenizer_config.json";
  if (!std::filesystem::exists(path)) return std::nullopt;
  const nlohmann::json config =
      parse_json_object(read_text_file(path.string(), "tokenizer config"), path.string());
  if (!config.contains("chat_template")) return std::nullopt;
  const nlohmann::json& t = config.at("chat_template");
  if (t.is_string()) return detect_chat_format(t.get<std::string>());
  // A list of named templates: the "default" one.
  if (t.is_array()) {
    for (const auto& named : t)
      if (named.value("name", "") == "default")
        return detect_chat_format(named.value("template", ""));
  }
  return std::nullopt;
}

const char* chat_format_name(ChatFormat format) {
  return format == ChatFormat::kLlama3 ? "llama3" : "chatml";
}

std::string render_chat(ChatFormat format, const std::vector<ChatMessage>& messages) {
  QUENCH_REQUIRE(!messages.empty(), "messages is empty");
  std::string text = format == ChatFormat::kLlama3 ? "<|begin_of_text|>" : "";
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    QUENCH_REQUIRE(m.role == "system" || m.role == "user" || m.role == "assistant", "messages[", i,
                   "].role '", m.role, "' is not supported; allowed: system, user, assistant");
    if (format == ChatFormat::kLlama3) {
      text +=
          "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trim(m.content) + "<|eot_id|>";
    } else {
      text += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    }
  }
  text += format == ChatFormat::kLlama3 ? "<|start_header_id|>assistant<|end_header_id|>\n\n"
                                        : "<|im_start|>assistant\n";
  return text;
}

}  // namespace quench
