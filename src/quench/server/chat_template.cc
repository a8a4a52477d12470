#include "quench/server/chat_template.h"

#include <filesystem>

#include "quench/core/error.h"
#include "quench/core/json_file.h"

namespace quench {
namespace {

// tokenizer_config.json spells a special token as a string or as {"content": ..., ...}.
jinja::Json special_tokens_of(const nlohmann::json& config) {
  jinja::Json tokens = jinja::Json::object();
  for (const char* name : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
                           "cls_token", "mask_token"}) {
    if (!config.contains(name)) continue;
    const nlohmann::json& t = config.at(name);
    if (t.is_string()) {
      tokens[name] = t.get<std::string>();
    } else if (t.is_object() && t.contains("content") && t.at("content").is_string()) {
      tokens[name] = t.at("content").get<std::string>();
    }
  }
  if (config.contains("additional_special_tokens") &&
      config.at("additional_special_tokens").is_array()) {
    jinja::Json extra = jinja::Json::array();
    for (const nlohmann::json& t : config.at("additional_special_tokens")) {
      if (t.is_string()) extra.push_back(t.get<std::string>());
      if (t.is_object() && t.contains("content") && t.at("content").is_string())
        extra.push_back(t.at("content").get<std::string>());
    }
    tokens["additional_special_tokens"] = std::move(extra);
  }
  return tokens;
}

}  // namespace

ChatTemplate::ChatTemplate(const std::string& source, nlohmann::json special_tokens,
                           std::string origin)
    : template_(source),
      special_tokens_(jinja::Json::parse(special_tokens.is_null() ? "{}" : special_tokens.dump())),
      origin_(std::move(origin)) {}

std::optional<ChatTemplate> ChatTemplate::from_model_dir(const std::string& model_dir) {
  const std::filesystem::path dir(model_dir);
  const std::filesystem::path config_path = dir / "tokenizer_config.json";
  nlohmann::json config = nlohmann::json::object();
  if (std::filesystem::exists(config_path)) {
    config = parse_json_object(read_text_file(config_path.string(), "tokenizer config"),
                               config_path.string());
  }
  const nlohmann::json tokens = nlohmann::json::parse(special_tokens_of(config).dump());
  const std::filesystem::path jinja_path = dir / "chat_template.jinja";
  if (std::filesystem::exists(jinja_path)) {
    return ChatTemplate(read_text_file(jinja_path.string(), "chat template"), tokens,
                        "chat_template.jinja");
  }
  if (!config.contains("chat_template")) return std::nullopt;
  const nlohmann::json& t = config.at("chat_template");
  if (t.is_string()) return ChatTemplate(t.get<std::string>(), tokens, "tokenizer_config.json");
  QUENCH_REQUIRE(t.is_array(), config_path.string(),
                 ": chat_template must be a string or a list of {name, template}, got ",
                 t.type_name());
  for (const nlohmann::json& named : t) {
    if (named.is_object() && named.value("name", "") == "default" && named.contains("template") &&
        named.at("template").is_string()) {
      return ChatTemplate(named.at("template").get<std::string>(), tokens,
                          "tokenizer_config.json (default)");
    }
  }
  return std::nullopt;  // named templates only (tool_use, rag): none for plain chat
}

std::string ChatTemplate::render(const jinja::Json& messages, bool add_generation_prompt,
                                 const nlohmann::json& kwargs, const jinja::Json& tools) const {
  QUENCH_REQUIRE(messages.is_array(), "chat messages must be a list, got ", messages.type_name());
  QUENCH_REQUIRE(tools.is_null() || tools.is_array(), "tools must be a list or null, got ",
                 tools.type_name());
  jinja::Json vars = special_tokens_;
  vars["tools"] = tools;
  vars["documents"] = nullptr;
  if (!kwargs.is_null()) {
    QUENCH_REQUIRE(kwargs.is_object(), "chat_template_kwargs must be an object, got ",
                   kwargs.type_name());
    for (const auto& [key, value] : kwargs.items()) {
      QUENCH_REQUIRE(key != "messages" && key != "add_generation_prompt" &&
                         (key != "tools" || tools.is_null()),
                     "chat_template_kwargs may not set '", key, "'");
      vars[key] = jinja::Json::parse(value.dump());
    }
  }
  vars["messages"] = messages;
  vars["add_generation_prompt"] = add_generation_prompt;
  return template_.render(vars);
}

}  // namespace quench
