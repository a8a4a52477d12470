// Chat messages to prompt text. HF models carry a Jinja chat template in tokenizer_config.json;
// quench does not run Jinja, it recognises the two formats that cover its architectures and
// renders them natively:
//   llama3  <|begin_of_text|><|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>...
//           then <|start_header_id|>assistant<|end_header_id|>\n\n   (contents trimmed, as Meta's)
//   chatml  <|im_start|>{role}\n{content}<|im_end|>\n ... then <|im_start|>assistant\n   (Qwen)
// Differences from the full templates: no default system prompt (Llama-3.1's knowledge-date
// preamble), no tool calls, no Qwen3 thinking switches.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace quench {

enum class ChatFormat : uint8_t { kLlama3, kChatMl };

struct ChatMessage {
  std::string role;  // system, user, assistant
  std::string content;
};

// The format of a tokenizer_config.json's chat_template (by its markers); nullopt when the file
// has no template or one quench does not know.
std::optional<ChatFormat> detect_chat_format(const std::string& chat_template);
// Reads <dir>/tokenizer_config.json; nullopt when absent or unrecognised.
std::optional<ChatFormat> read_chat_format(const std::string& model_dir);

const char* chat_format_name(ChatFormat format);

// The prompt text, ending with the assistant's header (add_generation_prompt). Throws
// quench::Error for an empty list or a role other than system, user, assistant.
std::string render_chat(ChatFormat format, const std::vector<ChatMessage>& messages);

}  // namespace quench
