#include "quench/server/openai_protocol.h"

#include <cmath>
#include <limits>

#include "quench/core/error.h"
#include "quench/core/json_file.h"
#include "quench/engine/structured_output/json_schema.h"
#include "quench/engine/structured_output/regex_syntax.h"
#include "quench/server/api_error.h"
#include "quench/server/bounded_json.h"
#include "quench/server/chat_messages.h"
#include "quench/server/tool_calls/forced_call_parsers.h"

namespace quench {
namespace {

using nlohmann::json;

double number(const json& body, const char* key, double fallback) {
  if (!present(body, key)) return fallback;
  if (!body.at(key).is_number())
    bad_request(str_cat("'", key, "' must be a number, got ", body.at(key).dump()));
  return body.at(key).get<double>();
}

int64_t integer(const json& body, const char* key, int64_t fallback) {
  if (!present(body, key)) return fallback;
  if (!body.at(key).is_number_integer())
    bad_request(str_cat("'", key, "' must be an integer, got ", body.at(key).dump()));
  return body.at(key).get<int64_t>();
}

bool boolean(const json& body, const char* key, bool fallback) {
  if (!present(body, key)) return fallback;
  if (!body.at(key).is_boolean()) bad_request(str_cat("'", key, "' must be true or false"));
  return body.at(key).get<bool>();
}

void check_model(const json& body, const ServedModel& model) {
  if (!present(body, "model")) return;
  if (!body.at("model").is_string()) bad_request("'model' must be a string");
  const std::string name = body.at("model").get<std::string>();
  if (name != model.name) {
    throw ApiError(
        404,
        str_cat("The model `", name, "` does not exist. This server serves `", model.name, "`."),
        "NotFoundError");
  }
}

// Fields quench refuses rather than ignores: a client relying on them would get wrong results.
void refuse_unsupported(const json& body) {
  if (integer(body, "best_of", 1) != 1) bad_request("'best_of' must be 1");
}

// The logit adjustments (SamplingParams, engine/logits_processors.h): penalties, logit_bias (an
// object of token id strings to biases, as OpenAI sends it), min_tokens and stop_token_ids
// (vLLM's). Ranges are checked by SamplingParams::validate, ids against the vocabulary by the
// engine; both answer 400.
void parse_logit_adjustments(const json& body, SamplingParams& params) {
  params.presence_penalty = static_cast<float>(number(body, "presence_penalty", 0.0));
  params.frequency_penalty = static_cast<float>(number(body, "frequency_penalty", 0.0));
  params.repetition_penalty = static_cast<float>(number(body, "repetition_penalty", 1.0));
  const int64_t min_tokens = integer(body, "min_tokens", 0);
  if (min_tokens < 0 || min_tokens > std::numeric_limits<int32_t>::max())
    bad_request(str_cat("'min_tokens' must be >= 0, got ", min_tokens));
  params.min_tokens = static_cast<int32_t>(min_tokens);
  constexpr const char* kIds = "'stop_token_ids' must be a list of token ids (integers >= 0)";
  if (present(body, "stop_token_ids")) {
    if (!body.at("stop_token_ids").is_array()) bad_request(kIds);
    for (const json& id : body.at("stop_token_ids")) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
          id.get<int64_t>() > std::numeric_limits<int32_t>::max())
        bad_request(kIds);
      params.stop_token_ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
  }
  constexpr const char* kBias =
      "'logit_bias' must be an object of token ids (as strings) to numbers from -100 to 100";
  if (present(body, "logit_bias")) {
    if (!body.at("logit_bias").is_object()) bad_request(kBias);
    for (const auto& [key, value] : body.at("logit_bias").items()) {
      if (!value.is_number() || key.empty() ||
          key.find_first_not_of("0123456789") != std::string::npos || key.size() > 9)
        bad_request(kBias);
      params.logit_bias.emplace_back(std::stoi(key), value.get<float>());
    }
  }
}

// A prompt that fits but leaves less room than max_tokens asks for is refused, as vLLM's server
// refuses it (and with its words), not cut short at max_model_len. A prompt that does not fit at
// all is the engine's error (LlmEngine::check_request).
// response_format {"type": "json_schema", "json_schema": {"name": ..., "schema": {...},
// "strict": ...}}: the schema compiled (engine/structured_output/json_schema.h), or 400 naming
// what it cannot take. Strict or not, the output follows the schema.
std::shared_ptr<const JsonSchema> parse_json_schema_format(const json& format) {
  if (!present(format, "json_schema") || !format.at("json_schema").is_object()) {
    bad_request(
        "'response_format' of type \"json_schema\" needs a \"json_schema\" object with the "
        "\"schema\" in it");
  }
  const json& spec = format.at("json_schema");
  if (!present(spec, "schema")) {
    bad_request("'response_format.json_schema' needs a \"schema\" (a JSON Schema object)");
  }
  try {
    return JsonSchema::compile(spec.at("schema"));
  } catch (const Error& e) {
    bad_request(str_cat("'response_format.json_schema.schema': ", e.what()));
  }
}

// vLLM's guided decoding fields: guided_json (a JSON Schema, object or text), guided_regex (the
// whole output matches it), guided_choice (the output is one of the strings), guided_grammar (the
// output is a sentence of a GBNF grammar, grammar.h), and their newer form structured_outputs
// {"json" | "regex" | "choice" | "grammar": ...}. At most one of them, and none beside
// a JSON response_format (the engine's SamplingParams::validate says so).
void parse_guided_decoding(const json& body, SamplingParams& params) {
  json fields = json::object();
  for (const char* key : {"guided_json", "guided_regex", "guided_choice", "guided_grammar"}) {
    if (present(body, key)) fields[std::string(key).substr(7)] = body.at(key);
  }
  if (present(body, "structured_outputs")) {
    const json& so = body.at("structured_outputs");
    if (!so.is_object()) bad_request("'structured_outputs' must be an object");
    for (const auto& [key, value] : so.items()) {
      if (key != "json" && key != "regex" && key != "choice" && key != "grammar") {
        bad_request(str_cat("'structured_outputs.", key,
                            "' is not supported; supported: json, regex, choice, grammar"));
      }
      if (!value.is_null()) fields[key] = value;
    }
  }
  if (fields.empty()) return;
  if (fields.size() > 1) {
    bad_request(
        "more than one of guided_json / guided_regex / guided_choice / guided_grammar "
        "(structured_outputs json / regex / choice / grammar) was given; allowed: one");
  }
  const std::string kind = fields.begin().key();
  const json& value = fields.begin().value();
  try {
    if (kind == "json") {
      const json schema = value.is_string() ? json::parse(value.get<std::string>()) : value;
      params.json_schema = JsonSchema::compile(schema);
    } else if (kind == "regex") {
      if (!value.is_string()) bad_request("'guided_regex' must be a string");
      params.text_pattern = JsonSchema::text_pattern(value.get<std::string>());
    } else if (kind == "grammar") {
      if (!value.is_string()) bad_request("'guided_grammar' must be a string (a GBNF grammar)");
      params.text_pattern = JsonSchema::text_grammar(value.get<std::string>());
    } else {
      if (!value.is_array() || value.empty()) {
        bad_request("'guided_choice' must be a non-empty list of strings");
      }
      std::string alternation;
      for (const json& choice : value) {
        if (!choice.is_string()) bad_request("'guided_choice' must be a non-empty list of strings");
        if (!alternation.empty()) alternation += '|';
        alternation += regex_literal(choice.get<std::string>());
      }
      params.text_pattern = JsonSchema::text_pattern(alternation);
    }
  } catch (const json::parse_error& e) {
    bad_request(str_cat("'guided_json' is not JSON: ", e.what()));
  } catch (const Error& e) {
    bad_request(str_cat("'guided_", kind, "': ", e.what()));
  }
}

// Forced calls: the output follows a named function's parameters schema (any object where it
// has none) or, for "required", the list of calls of the tools; the finished output is read back
// as calls (forced_call_parsers.h).
void force_calls(const ToolRequest& tools, ApiRequest& r) {
  if (r.params.structured_output()) {
    bad_request(
        "'response_format' must be \"text\" when 'tool_choice' forces calls (the tools' "
        "parameters shape the output)");
  }
  const char* what = tools.forced_required ? "the tools' parameters" : "the function's parameters";
  try {
    if (tools.forced_required) {
      r.params.json_schema =
          JsonSchema::compile(required_calls_schema(tools.tools, tools.parallel_tool_calls));
    } else {
      r.params.json_schema = tools.forced_parameters.is_null()
                                 ? JsonSchema::any_object()
                                 : JsonSchema::compile(tools.forced_parameters);
    }
  } catch (const Error& e) {
    bad_request(str_cat(
        what, " (tool_choice ",
        tools.forced_required ? std::string("\"required\"") : "\"" + tools.forced_function + "\"",
        "): ", e.what()));
  }
  if (tools.forced_required) {
    r.tool_call_parser = std::make_shared<RequiredCallsParser>();
  } else {
    r.tool_call_parser = std::make_shared<ForcedFunctionParser>(tools.forced_function);
  }
}

void check_context_room(const ApiRequest& r, const ServedModel& model, const char* prompt_word) {
  for (const std::vector<int32_t>& prompt : r.prompts) {
    const auto prompt_tokens = static_cast<int64_t>(prompt.size());
    if (prompt_tokens >= model.max_model_len) continue;
    if (prompt_tokens + r.params.max_tokens > model.max_model_len) {
      bad_request(str_cat("This model's maximum context length is ", model.max_model_len,
                          " tokens. However, you requested ", prompt_tokens + r.params.max_tokens,
                          " tokens (", prompt_tokens, " in the ", prompt_word, ", ",
                          r.params.max_tokens, " in the completion). Please reduce the length of ",
                          "the ", prompt_word, " or completion."));
    }
  }
}

void parse_sampling(const json& body, int64_t default_max_tokens, bool chat, ApiRequest& r) {
  const int64_t max_tokens =
      integer(body, "max_tokens", integer(body, "max_completion_tokens", default_max_tokens));
  if (max_tokens < 1 || max_tokens > std::numeric_limits<int32_t>::max()) {
    bad_request(str_cat("'max_tokens' must be >= 1, got ", max_tokens));
  }
  r.params.max_tokens = static_cast<int32_t>(max_tokens);
  r.params.temperature = static_cast<float>(number(body, "temperature", 1.0));
  r.params.top_p = static_cast<float>(number(body, "top_p", 1.0));
  r.params.min_p = static_cast<float>(number(body, "min_p", 0.0));
  const int64_t top_k = integer(body, "top_k", 0);
  if (top_k < -1 || top_k > std::numeric_limits<int32_t>::max())
    bad_request(str_cat("'top_k' must be -1, 0 (off) or > 0, got ", top_k));
  r.params.top_k = top_k < 0 ? 0 : static_cast<int32_t>(top_k);
  if (present(body, "seed")) r.params.seed = static_cast<uint64_t>(integer(body, "seed", 0));
  r.params.ignore_eos = boolean(body, "ignore_eos", false);
  r.params.skip_special_tokens = boolean(body, "skip_special_tokens", true);
  if (chat) {
    if (boolean(body, "logprobs", false)) {
      r.params.logprobs =
          static_cast<int32_t>(std::clamp<int64_t>(integer(body, "top_logprobs", 0), -2, 1000));
    } else if (present(body, "top_logprobs")) {
      bad_request("'top_logprobs' needs \"logprobs\": true");
    }
  } else if (present(body, "logprobs")) {
    r.params.logprobs =
        static_cast<int32_t>(std::clamp<int64_t>(integer(body, "logprobs", 0), -2, 1000));
  }
  if (r.params.logprobs < -1) bad_request("the number of logprobs must be an integer >= 0");
  if (present(body, "stop")) {
    const json& stop = body.at("stop");
    if (stop.is_string()) {
      if (!stop.get<std::string>().empty()) r.params.stop.push_back(stop.get<std::string>());
    } else if (stop.is_array()) {
      for (const json& s : stop) {
        if (!s.is_string() || s.get<std::string>().empty()) {
          bad_request("'stop' must be a string or a list of non-empty strings");
        }
        r.params.stop.push_back(s.get<std::string>());
      }
    } else {
      bad_request("'stop' must be a string or a list of non-empty strings");
    }
  }
  parse_logit_adjustments(body, r.params);
  if (present(body, "response_format")) {
    const json& format = body.at("response_format");
    const std::string type =
        format.is_object() && present(format, "type") && format.at("type").is_string()
            ? format.at("type").get<std::string>()
            : "";
    if (type == "json_object") {
      r.params.json_object = true;
    } else if (type == "json_schema") {
      r.params.json_schema = parse_json_schema_format(format);
    } else if (type != "text") {
      bad_request(
          "'response_format' must be an object with a \"type\" of \"text\", "
          "\"json_object\" or \"json_schema\"");
    }
  }
  parse_guided_decoding(body, r.params);
  try {
    r.params.validate();
  } catch (const Error& e) {
    bad_request(e.what());
  }
  r.stream = boolean(body, "stream", false);
  if (present(body, "stream_options")) {
    if (!r.stream) bad_request("'stream_options' is only allowed with \"stream\": true");
    r.include_usage = boolean(body.at("stream_options"), "include_usage", false);
  }
}

std::vector<int32_t> encode_text(const std::string& text, const ServedModel& model,
                                 bool add_special) {
  if (model.tokenizer == nullptr)
    bad_request("this model has no tokenizer.json: send the prompt as token ids");
  try {
    return model.tokenizer->encode(text, add_special);
  } catch (const Error& e) {
    bad_request(str_cat("prompt: ", e.what()));
  }
}

constexpr const char* kPromptForms =
    "'prompt' must be a string, a list of token ids, or a list of either (a choice set each)";

std::vector<int32_t> prompt_ids(const json& prompt, const ServedModel& model) {
  if (prompt.is_string()) return encode_text(prompt.get<std::string>(), model, true);
  if (!prompt.is_array()) bad_request(kPromptForms);
  std::vector<int32_t> ids;
  for (const json& v : prompt) {
    if (!v.is_number_integer()) bad_request(kPromptForms);
    const int64_t id = v.get<int64_t>();
    if (id < 0 || id > std::numeric_limits<int32_t>::max())
      bad_request(str_cat("prompt token id ", id, " is out of range"));
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

// A string, a token-id list, or a list of strings / token-id lists.
std::vector<std::vector<int32_t>> prompt_list(const json& prompt, const ServedModel& model) {
  const bool many =
      prompt.is_array() && !prompt.empty() && (prompt[0].is_string() || prompt[0].is_array());
  std::vector<std::vector<int32_t>> prompts;
  if (!many) {
    prompts.push_back(prompt_ids(prompt, model));
  } else {
    for (const json& p : prompt) {
      if (!p.is_string() && !p.is_array()) bad_request(kPromptForms);
      prompts.push_back(prompt_ids(p, model));
    }
  }
  for (const auto& p : prompts)
    if (p.empty()) bad_request("'prompt' is empty");
  return prompts;
}

int32_t choices_per_prompt(const json& body, size_t prompts) {
  const int64_t n = integer(body, "n", 1);
  if (n < 1 || n * static_cast<int64_t>(prompts) > kMaxChoices) {
    bad_request(str_cat("'n' = ", n, " with ", prompts, " prompt(s) must give 1 to ", kMaxChoices,
                        " choices"));
  }
  return static_cast<int32_t>(n);
}

json choice_reason(std::optional<FinishReason> reason) {
  if (!reason || *reason == FinishReason::kNone) return nullptr;
  return finish_reason_name(*reason);
}

// The fields every response and chunk shares around its choices.
json envelope(const ResponseIds& ids, const char* object, json choices) {
  return {{"id", ids.id},
          {"object", object},
          {"created", ids.created},
          {"model", ids.model},
          {"choices", std::move(choices)}};
}

// One choice: `content` is {"text": ...}, {"message": ...} or {"delta": ...}.
json choice(json content, std::optional<FinishReason> reason, int32_t index,
            json logprobs = nullptr) {
  content["index"] = index;
  content["logprobs"] = std::move(logprobs);
  content["finish_reason"] = choice_reason(reason);
  return content;
}

}  // namespace

ApiRequest parse_completion_request(const json& body, const ServedModel& model) {
  if (!body.is_object()) bad_request("the request body must be a JSON object");
  check_model(body, model);
  refuse_unsupported(body);
  if (present(body, "tools") && !body.at("tools").empty())
    bad_request("'tools' is a chat field: use /v1/chat/completions");
  if (!present(body, "prompt")) bad_request("'prompt' is required");
  ApiRequest r;
  r.prompts = prompt_list(body.at("prompt"), model);
  r.echo = boolean(body, "echo", false);
  r.n = choices_per_prompt(body, r.prompts.size());
  parse_sampling(body, 16, false, r);
  check_context_room(r, model, "prompt");
  if (r.echo && r.stream) bad_request("'echo' with \"stream\": true is not supported yet");
  if (r.echo) r.params.prompt_logprobs = r.params.logprobs;
  return r;
}

nlohmann::ordered_json parse_request_body(const std::string& text) {
  BoundedJson body = parse_bounded_json(text, kMaxRequestDepth);
  if (!body.error.empty()) bad_request("the request body " + body.error);
  return std::move(body.value);
}

ApiRequest parse_chat_request(const nlohmann::ordered_json& ordered, const ServedModel& model) {
  if (!ordered.is_object()) bad_request("the request body must be a JSON object");
  const json body = ordered;  // the field checks below need no order
  check_model(body, model);
  refuse_unsupported(body);
  if (boolean(body, "echo", false)) bad_request("'echo' is a completions field; chat has none");
  if (!model.chat_template) {
    if (!model.chat_template_error.empty())
      bad_request(
          str_cat("this model's chat template failed to load: ", model.chat_template_error));
    bad_request(
        "this model has no chat template (chat_template.jinja or tokenizer_config.json "
        "chat_template); use /v1/completions");
  }
  const bool add_generation_prompt = boolean(body, "add_generation_prompt", true);
  nlohmann::json kwargs = nullptr;
  if (present(body, "chat_template_kwargs")) {
    kwargs = body.at("chat_template_kwargs");
    if (!kwargs.is_object()) bad_request("'chat_template_kwargs' must be an object");
  }
  if (!present(body, "messages") || !body.at("messages").is_array() ||
      body.at("messages").empty()) {
    bad_request("'messages' must be a non-empty list");
  }
  nlohmann::ordered_json messages = template_messages(ordered.at("messages"));
  if (model.tools.parser != nullptr) {  // call ids in the form the family's template takes back
    const ToolCallParser& parser = *model.tools.parser;
    for (auto& m : messages) {
      if (m.contains("tool_call_id"))
        m["tool_call_id"] = parser.template_call_id(m["tool_call_id"].get<std::string>());
      if (!m.contains("tool_calls")) continue;
      for (auto& call : m["tool_calls"])
        if (call.contains("id") && call["id"].is_string())
          call["id"] = parser.template_call_id(call["id"].get<std::string>());
    }
  }
  const ToolRequest tools = parse_tool_request(ordered, model.tools);
  std::string text;
  try {
    text = model.chat_template->render(messages, add_generation_prompt, kwargs, tools.tools);
  } catch (const Error& e) {
    bad_request(e.what());
  }
  ApiRequest r;
  r.prompts.push_back(encode_text(text, model, false));  // the template carries its own BOS
  r.n = choices_per_prompt(body, 1);
  // The server's parser lives as long as the server: held without ownership.
  r.tool_call_parser = std::shared_ptr<const ToolCallParser>(std::shared_ptr<void>(), tools.parser);
  r.parallel_tool_calls = tools.parallel_tool_calls;
  const int64_t room =
      static_cast<int64_t>(model.max_model_len) - static_cast<int64_t>(r.prompts[0].size());
  parse_sampling(body, std::max<int64_t>(room, 1), true, r);
  // A parser whose call marker is a special token reads the output with special tokens shown.
  if (tools.parser != nullptr && tools.parser->reads_special_tokens())
    r.params.skip_special_tokens = false;
  if (!tools.forced_function.empty() || tools.forced_required) force_calls(tools, r);
  // A thinking model reasons first; structured output (a forced call's too) holds after that.
  r.reasoning_parser = model.reasoning_parser;
  if (r.reasoning_parser != nullptr && r.params.structured_output() != nullptr)
    r.params.reasoning_gate = r.reasoning_parser->gate_spec();
  r.include_reasoning = boolean(body, "include_reasoning", true);
  check_context_room(r, model, "messages");
  return r;
}

json error_json(int status, const std::string& message, const std::string& type) {
  return {{"object", "error"},
          {"message", message},
          {"type", type},
          {"param", nullptr},
          {"code", status}};
}

json usage_json(int32_t prompt_tokens, int32_t completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

json completion_json(const ResponseIds& ids, const std::vector<ChoiceResult>& choices,
                     int32_t prompt_tokens, int32_t completion_tokens) {
  json list = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    list.push_back(choice({{"text", choices[i].text}}, choices[i].reason, static_cast<int32_t>(i),
                          choices[i].logprobs));
  }
  json r = envelope(ids, "text_completion", std::move(list));
  r["usage"] = usage_json(prompt_tokens, completion_tokens);
  return r;
}

json chat_json(const ResponseIds& ids, const std::vector<ChoiceResult>& choices,
               int32_t prompt_tokens, int32_t completion_tokens) {
  json list = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceResult& c = choices[i];
    json message = {{"role", "assistant"}, {"content", c.text}};
    if (c.reasoning) {
      message["reasoning_content"] = *c.reasoning;
      if (c.text.empty()) message["content"] = nullptr;  // cut off while reasoning
    }
    json entry;
    if (c.tool_calls.empty()) {
      entry =
          choice({{"message", std::move(message)}}, c.reason, static_cast<int32_t>(i), c.logprobs);
    } else {
      if (c.text.empty()) message["content"] = nullptr;
      message["tool_calls"] = json::array();
      for (const ToolCall& call : c.tool_calls)
        message["tool_calls"].push_back(tool_call_json(call));
      entry = choice({{"message", std::move(message)}}, std::nullopt, static_cast<int32_t>(i),
                     c.logprobs);
      entry["finish_reason"] = "tool_calls";
    }
    list.push_back(std::move(entry));
  }
  json r = envelope(ids, "chat.completion", std::move(list));
  r["usage"] = usage_json(prompt_tokens, completion_tokens);
  return r;
}

json completion_chunk_json(const ResponseIds& ids, const std::string& text,
                           std::optional<FinishReason> reason, int32_t index, json logprobs) {
  return envelope(ids, "text_completion",
                  json::array({choice({{"text", text}}, reason, index, std::move(logprobs))}));
}

json chat_chunk_json(const ResponseIds& ids, const std::optional<std::string>& role,
                     const std::string& text, std::optional<FinishReason> reason, int32_t index,
                     json logprobs) {
  json delta = json::object();
  if (role) delta["role"] = *role;
  if (!text.empty() || !role) delta["content"] = text;
  return chat_delta_chunk_json(ids, std::move(delta), choice_reason(reason), index,
                               std::move(logprobs));
}

json chat_delta_chunk_json(const ResponseIds& ids, json delta, json finish_reason, int32_t index,
                           json logprobs) {
  json c = choice({{"delta", std::move(delta)}}, std::nullopt, index, std::move(logprobs));
  c["finish_reason"] = std::move(finish_reason);
  return envelope(ids, "chat.completion.chunk", json::array({std::move(c)}));
}

// A token's string in completions logprobs: its text, or "token_id:<id>" without a tokenizer.
std::string logprob_token_string(const Tokenizer* tokenizer, int32_t id) {
  return tokenizer != nullptr ? tokenizer->decode(std::vector<int32_t>{id}, false, true)
                              : str_cat("token_id:", id);
}

json completion_logprobs_json(const Tokenizer* tokenizer, const std::vector<int32_t>& tokens,
                              const std::vector<TokenLogprobs>& logprobs, int64_t text_offset) {
  json strings = json::array(), values = json::array(), tops = json::array(),
       offsets = json::array();
  for (size_t i = 0; i < tokens.size() && i < logprobs.size(); ++i) {
    const std::string text = logprob_token_string(tokenizer, tokens[i]);
    strings.push_back(text);
    values.push_back(logprobs[i].logprob);
    json top = json::object();
    for (const auto& [id, lp] : logprobs[i].top)
      top[logprob_token_string(tokenizer, id)] = lp;
    tops.push_back(std::move(top));
    offsets.push_back(text_offset);
    text_offset += static_cast<int64_t>(text.size());
  }
  return {{"tokens", strings},
          {"token_logprobs", values},
          {"top_logprobs", tops},
          {"text_offset", offsets}};
}

json echo_logprobs_json(const Tokenizer* tokenizer, const std::vector<int32_t>& prompt,
                        const std::vector<std::optional<TokenLogprobs>>& prompt_logprobs,
                        const std::vector<int32_t>& tokens,
                        const std::vector<TokenLogprobs>& logprobs) {
  json strings = json::array(), values = json::array(), tops = json::array(),
       offsets = json::array();
  int64_t offset = 0;
  for (size_t i = 0; i < prompt.size(); ++i) {
    const std::string text = logprob_token_string(tokenizer, prompt[i]);
    strings.push_back(text);
    offsets.push_back(offset);
    offset += static_cast<int64_t>(text.size());
    if (i >= prompt_logprobs.size() || !prompt_logprobs[i]) {
      values.push_back(nullptr);
      tops.push_back(nullptr);
      continue;
    }
    values.push_back(prompt_logprobs[i]->logprob);
    json top = json::object();
    for (const auto& [id, lp] : prompt_logprobs[i]->top)
      top[logprob_token_string(tokenizer, id)] = lp;
    tops.push_back(std::move(top));
  }
  const json generated = completion_logprobs_json(tokenizer, tokens, logprobs, offset);
  for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"}) {
    json& into = key == std::string("tokens")           ? strings
                 : key == std::string("token_logprobs") ? values
                 : key == std::string("top_logprobs")   ? tops
                                                        : offsets;
    for (const auto& v : generated.at(key))
      into.push_back(v);
  }
  return {{"tokens", strings},
          {"token_logprobs", values},
          {"top_logprobs", tops},
          {"text_offset", offsets}};
}

json chat_logprobs_json(const Tokenizer& tokenizer, const std::vector<int32_t>& tokens,
                        const std::vector<TokenLogprobs>& logprobs) {
  auto entry = [&](int32_t id, float lp) {
    const std::string bytes = tokenizer.token_bytes(id, false, true);
    json b = json::array();
    for (char c : bytes)
      b.push_back(static_cast<uint8_t>(c));
    return json{{"token", tokenizer.decode(std::vector<int32_t>{id}, false, true)},
                {"logprob", lp},
                {"bytes", b}};
  };
  json content = json::array();
  for (size_t i = 0; i < tokens.size() && i < logprobs.size(); ++i) {
    json e = entry(tokens[i], logprobs[i].logprob);
    json top = json::array();
    for (const auto& [id, lp] : logprobs[i].top)
      top.push_back(entry(id, lp));
    e["top_logprobs"] = std::move(top);
    content.push_back(std::move(e));
  }
  return {{"content", content}};
}

json usage_chunk_json(const ResponseIds& ids, bool chat, int32_t prompt_tokens,
                      int32_t completion_tokens) {
  json r = envelope(ids, chat ? "chat.completion.chunk" : "text_completion", json::array());
  r["usage"] = usage_json(prompt_tokens, completion_tokens);
  return r;
}

}  // namespace quench
