// Request bodies to engine requests, without a socket: prompts as text or token ids, OpenAI's
// defaults, vLLM's extensions, the chat templates rendered exactly, and every unsupported field
// refused with 400 naming it (never ignored), an unknown model 404; tools and tool calls reach the
// template as HF renders them, and parsed calls make the response's tool_calls.
#include "quench/server/openai_protocol.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "quench/engine/structured_output/json_schema_prefix.h"
#include "quench/server/tool_calls/tool_call_parser.h"
#include "quench/tokenizer/tiny_tokenizer.h"

namespace quench {
namespace {

using nlohmann::json;

struct Fixture {
  Tokenizer tokenizer = Tokenizer::from_json(tiny_tokenizer_json(512), "tiny");
  ServedModel model() const {
    ServedModel m;
    m.name = "tiny";
    m.max_model_len = 100;
    m.tokenizer = &tokenizer;
    m.chat_template = ChatTemplate(
        "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
        "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' "
        "}}{% endif %}{% if greeting is defined %}{{ greeting }}{% endif %}",
        {{"bos_token", "<|begin_of_text|>"}});
    return m;
  }
};

// The status and message of the ApiError `f` throws.
template <typename F>
std::pair<int, std::string> api_error(F&& f) {
  try {
    f();
  } catch (const ApiError& e) {
    return {e.status, e.what()};
  }
  return {0, "no error"};
}

// A body is parsed once, with its depth bounded before anything recurses through it: a schema
// nested 100000 deep is a 400, not a stack overflow.
TEST(OpenAiProtocol, RequestBodiesNestAtMostTheLimit) {
  std::string deep;
  for (int i = 0; i < 100000; ++i)
    deep += R"({"type": "array", "items": )";
  deep += "{}" + std::string(100000, '}');
  const std::string body = R"({"prompt": "x", "guided_json": )" + deep + "}";
  const auto [status, message] = api_error([&] { parse_request_body(body); });
  EXPECT_EQ(status, 400);
  EXPECT_NE(message.find("nests deeper than 128"), std::string::npos) << message;
  const auto [bad_status, bad] = api_error([&] { parse_request_body("{\"prompt\": "); });
  EXPECT_EQ(bad_status, 400);
  EXPECT_NE(bad.find("not valid JSON"), std::string::npos) << bad;
  EXPECT_EQ(parse_request_body(R"({"b": 1, "a": [[2]]})").dump(), R"({"b":1,"a":[[2]]})");
  // The schema compiler bounds its own recursion too (schemas that reach it another way).
  std::string schema;
  for (int i = 0; i < 1000; ++i)
    schema += R"({"type": "array", "items": )";
  schema += "{}" + std::string(1000, '}');
  const Fixture fx;
  const std::string with_schema = R"({"prompt": "x", "guided_json": )" + schema + "}";
  const auto [schema_status, schema_message] =
      api_error([&] { parse_completion_request(nlohmann::json::parse(with_schema), fx.model()); });
  EXPECT_EQ(schema_status, 400);
  EXPECT_NE(schema_message.find("schemas nest deeper than 256"), std::string::npos);
}

TEST(OpenAiProtocol, CompletionPromptsAndDefaults) {
  const Fixture fx;
  const ApiRequest text = parse_completion_request(json{{"prompt", "the cache"}}, fx.model());
  EXPECT_EQ(text.prompts,
            std::vector<std::vector<int32_t>>{fx.tokenizer.encode("the cache", true)});  // with BOS
  EXPECT_EQ(text.params.max_tokens, 16);
  EXPECT_FLOAT_EQ(text.params.temperature, 1.0f);  // OpenAI's default, not greedy
  EXPECT_FALSE(text.stream);
  const ApiRequest ids =
      parse_completion_request(json{{"model", "tiny"},
                                    {"prompt", {5, 6, 7}},
                                    {"max_tokens", 3},
                                    {"temperature", 0},
                                    {"top_k", -1},
                                    {"seed", 9},
                                    {"ignore_eos", true},
                                    {"stream", true},
                                    {"stream_options", {{"include_usage", true}}}},
                               fx.model());
  EXPECT_EQ(ids.prompts, (std::vector<std::vector<int32_t>>{{5, 6, 7}}));
  EXPECT_EQ(ids.n, 1);
  EXPECT_EQ(ids.params.max_tokens, 3);
  EXPECT_EQ(ids.params.top_k, 0);
  EXPECT_EQ(ids.params.seed, 9u);
  EXPECT_TRUE(ids.params.ignore_eos && ids.stream && ids.include_usage);
  EXPECT_EQ(
      parse_completion_request(json{{"prompt", "x"}, {"stop", "\n\n"}}, fx.model()).params.stop,
      std::vector<std::string>{"\n\n"});
  EXPECT_EQ(parse_completion_request(json{{"prompt", "x"}, {"stop", {"a", "bc"}}}, fx.model())
                .params.stop,
            (std::vector<std::string>{"a", "bc"}));
  EXPECT_TRUE(parse_completion_request(json{{"prompt", "x"}, {"stop", ""}}, fx.model())
                  .params.stop.empty());
  EXPECT_THROW(parse_completion_request(json{{"prompt", "x"}, {"stop", {"a", 3}}}, fx.model()),
               ApiError);
  EXPECT_THROW(parse_completion_request(json{{"prompt", "x"}, {"stop", {""}}}, fx.model()),
               ApiError);
  EXPECT_EQ(parse_completion_request(json{{"prompt", {{5, 6}}}}, fx.model()).prompts.front(),
            (std::vector<int32_t>{5, 6}));
}

TEST(OpenAiProtocol, SeveralPromptsAndChoices) {
  const Fixture fx;
  const ApiRequest r =
      parse_completion_request(json{{"prompt", {"a b", "c"}}, {"n", 3}}, fx.model());
  ASSERT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(r.prompts[1], fx.tokenizer.encode("c", true));
  EXPECT_EQ(r.n, 3);
  EXPECT_EQ(parse_completion_request(json{{"prompt", {{5, 6}, {7}}}}, fx.model()).prompts.size(),
            2u);
  EXPECT_EQ(api_error([&] {
              parse_completion_request(json{{"prompt", "x"}, {"n", 0}}, fx.model());
            }).first,
            400);
  const auto [status, message] = api_error([&] {
    parse_completion_request(json{{"prompt", {"a", "b"}}, {"n", 40}}, fx.model());
  });
  EXPECT_EQ(status, 400);
  EXPECT_NE(message.find("64"), std::string::npos) << message;
  EXPECT_EQ(api_error([&] {
              parse_completion_request(json{{"prompt", {"a", 5}}}, fx.model());
            }).first,
            400);
  EXPECT_EQ(api_error([&] {
              parse_completion_request(json{{"prompt", {json::array()}}}, fx.model());
            }).first,
            400);
}

TEST(OpenAiProtocol, LogprobsInBothShapes) {
  const Fixture fx;
  EXPECT_EQ(
      parse_completion_request(json{{"prompt", "x"}, {"logprobs", 2}}, fx.model()).params.logprobs,
      2);
  EXPECT_EQ(parse_completion_request(json{{"prompt", "x"}}, fx.model()).params.logprobs, -1);
  const json messages = {{{"role", "user"}, {"content", "hi"}}};
  EXPECT_EQ(parse_chat_request(
                json{{"messages", messages}, {"logprobs", true}, {"top_logprobs", 3}}, fx.model())
                .params.logprobs,
            3);
  EXPECT_EQ(parse_chat_request(json{{"messages", messages}, {"logprobs", false}}, fx.model())
                .params.logprobs,
            -1);
  EXPECT_EQ(api_error([&] {
              parse_chat_request(json{{"messages", messages}, {"top_logprobs", 3}}, fx.model());
            }).first,
            400);
  EXPECT_EQ(api_error([&] {
              parse_completion_request(json{{"prompt", "x"}, {"logprobs", 50}}, fx.model());
            }).first,
            400);
  EXPECT_EQ(api_error([&] {
              parse_completion_request(json{{"prompt", "x"}, {"logprobs", -3}}, fx.model());
            }).first,
            400);
  const std::vector<int32_t> tokens = fx.tokenizer.encode("the cache", false);
  std::vector<TokenLogprobs> lps(tokens.size(), TokenLogprobs{-0.5f, {{tokens[0], -0.5f}}});
  const json c = completion_logprobs_json(&fx.tokenizer, tokens, lps, 7);
  EXPECT_EQ(c["tokens"].size(), tokens.size());
  EXPECT_EQ(c["text_offset"][0], 7);
  EXPECT_EQ(c["top_logprobs"][0].begin().value(), -0.5f);
  // A model without a tokenizer names its tokens by id (vLLM's return_tokens_as_token_ids).
  const json by_id = completion_logprobs_json(nullptr, tokens, lps, 0);
  EXPECT_EQ(by_id["tokens"][0], "token_id:" + std::to_string(tokens[0]));
  EXPECT_EQ(by_id["top_logprobs"][0].begin().key(), "token_id:" + std::to_string(tokens[0]));
  const json chat = chat_logprobs_json(fx.tokenizer, tokens, lps);
  EXPECT_EQ(chat["content"][0]["top_logprobs"][0]["token"],
            fx.tokenizer.decode(std::vector<int32_t>{tokens[0]}));
}

// Penalties, logit_bias (token id strings to biases), min_tokens and stop_token_ids reach the
// request's sampling parameters.
TEST(OpenAiProtocol, LogitAdjustmentsReachTheSamplingParameters) {
  const Fixture fx;
  const SamplingParams p =
      parse_completion_request(json{{"prompt", "x"},
                                    {"max_tokens", 20},
                                    {"presence_penalty", 0.5},
                                    {"min_p", 0.05},
                                    {"frequency_penalty", -1},
                                    {"repetition_penalty", 1.1},
                                    {"min_tokens", 4},
                                    {"stop_token_ids", {7, 9}},
                                    {"logit_bias", {{"12", -100}, {"3", 2.5}}}},
                               fx.model())
          .params;
  EXPECT_FLOAT_EQ(p.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(p.min_p, 0.05f);
  EXPECT_FLOAT_EQ(p.frequency_penalty, -1.0f);
  EXPECT_FLOAT_EQ(p.repetition_penalty, 1.1f);
  EXPECT_EQ(p.min_tokens, 4);
  EXPECT_EQ(p.stop_token_ids, (std::vector<int32_t>{7, 9}));
  std::vector<std::pair<int32_t, float>> bias = p.logit_bias;
  std::sort(bias.begin(), bias.end());
  EXPECT_EQ(bias, (std::vector<std::pair<int32_t, float>>{{3, 2.5f}, {12, -100.0f}}));
}

// response_format: "json_object" turns JSON mode on, "json_schema" compiles its schema (refused
// with 400 naming what it cannot take); "text" is the default; anything else is refused.
TEST(OpenAiProtocol, ResponseFormatTurnsOnJsonModeOrASchema) {
  const Fixture fx;
  const ServedModel m = fx.model();
  const auto with = [&](json format) {
    return json{{"prompt", "x"}, {"response_format", std::move(format)}};
  };
  EXPECT_TRUE(parse_completion_request(with({{"type", "json_object"}}), m).params.json_object);
  EXPECT_FALSE(parse_completion_request(with({{"type", "text"}}), m).params.json_object);
  EXPECT_FALSE(parse_completion_request(json{{"prompt", "x"}}, m).params.json_object);
  const json schema = {{"type", "object"},
                       {"properties", {{"a", {{"type", "integer"}}}}},
                       {"required", {"a"}},
                       {"additionalProperties", false}};
  const ApiRequest r = parse_completion_request(
      with({{"type", "json_schema"},
            {"json_schema", {{"name", "n"}, {"schema", schema}, {"strict", true}}}}),
      m);
  ASSERT_NE(r.params.json_schema, nullptr);
  EXPECT_FALSE(r.params.json_object);
  JsonSchemaPrefix prefix(*r.params.json_schema);
  EXPECT_FALSE(prefix.feed("{\"b\""));  // the compiled schema, not any object
  for (const auto& [bad, needle] : std::vector<std::pair<json, std::string>>{
           {json{{"type", "json_schema"}, {"json_schema", json::object()}}, "\"schema\""},
           {json{{"type", "json_schema"}}, "json_schema"},
           {json{{"type", "json_schema"},
                 {"json_schema", {{"schema", {{"type", "object"}, {"not", {}}}}}}},
            "'not' is not supported"},
           {json{{"type", "yaml"}}, "response_format"},
           {json("json_object"), "response_format"}}) {
    const auto [status, message] = api_error([&] { parse_completion_request(with(bad), m); });
    EXPECT_EQ(status, 400) << bad.dump();
    EXPECT_NE(message.find(needle), std::string::npos) << message;
  }
}

// vLLM's guided decoding: guided_choice / guided_regex become a raw-text pattern, guided_grammar
// a raw-text grammar, guided_json a
// schema, and so do structured_outputs' choice / regex / json; one at most, not beside a JSON
// response_format, each error a 400 naming the field.
TEST(OpenAiProtocol, GuidedDecodingFields) {
  const Fixture fx;
  const ServedModel m = fx.model();
  auto with = [](json fields) {
    fields["prompt"] = "x";
    return fields;
  };
  auto text_admits = [](const SamplingParams& p, const std::string& text) {
    JsonSchemaPrefix prefix(*p.structured_output());
    return prefix.feed(text) && (prefix.complete() || prefix.may_stop());
  };
  const SamplingParams choice =
      parse_completion_request(with({{"guided_choice", {"yes", "no", "a.b"}}}), m).params;
  ASSERT_NE(choice.text_pattern, nullptr);
  EXPECT_TRUE(text_admits(choice, "yes"));
  EXPECT_TRUE(text_admits(choice, "a.b"));
  EXPECT_FALSE(text_admits(choice, "axb"));  // the choices are literals
  EXPECT_FALSE(text_admits(choice, "ye"));
  const SamplingParams regex =
      parse_completion_request(with({{"structured_outputs", {{"regex", "[0-9]{3}"}}}}), m).params;
  EXPECT_TRUE(text_admits(regex, "123"));
  EXPECT_FALSE(text_admits(regex, "12"));
  const json schema = {{"type", "object"}, {"properties", {{"a", {{"type", "integer"}}}}}};
  const SamplingParams guided_json =
      parse_completion_request(with({{"guided_json", schema.dump()}}), m).params;
  ASSERT_NE(guided_json.json_schema, nullptr);
  EXPECT_TRUE(text_admits(guided_json, R"({"a": 1})"));
  const SamplingParams grammar =
      parse_completion_request(with({{"guided_grammar", "root ::= \"(\" root \")\" | \"x\""}}), m)
          .params;
  ASSERT_NE(grammar.text_pattern, nullptr);
  EXPECT_TRUE(text_admits(grammar, "((x))"));
  EXPECT_FALSE(text_admits(grammar, "((x)"));
  for (const auto& [bad, needle] : std::vector<std::pair<json, std::string>>{
           {json{{"guided_regex", 5}}, "'guided_regex' must be a string"},
           {json{{"guided_choice", json::array()}}, "non-empty list of strings"},
           {json{{"guided_choice", {"a", 1}}}, "non-empty list of strings"},
           {json{{"guided_regex", "a"}, {"guided_choice", {"b"}}}, "more than one"},
           {json{{"guided_regex", "(?=a)"}}, "lookahead"},
           {json{{"guided_json", "{nope"}}, "'guided_json' is not JSON"},
           {json{{"structured_outputs", {{"grammar", "root ::= x"}}}},
            "'guided_grammar': grammar: rule 'x' is used but not defined"},
           {json{{"guided_grammar", 3}}, "'guided_grammar' must be a string"},
           {json{{"structured_outputs", {{"lark", "start: x"}}}},
            "'structured_outputs.lark' is not supported"},
           {json{{"guided_regex", "a"}, {"response_format", {{"type", "json_object"}}}},
            "more than one structured output"}}) {
    const auto [status, message] = api_error([&] { parse_completion_request(with(bad), m); });
    EXPECT_EQ(status, 400) << bad.dump();
    EXPECT_NE(message.find(needle), std::string::npos) << message;
  }
}

TEST(OpenAiProtocol, UnsupportedFieldsAreRefusedByName) {
  const Fixture fx;
  const ServedModel m = fx.model();
  auto completion = [&](json body) {
    body["prompt"] = "x";
    return api_error([&] { parse_completion_request(body, m); });
  };
  // Out-of-range values of the supported fields, and best_of, are refused with the field named.
  for (const auto& [field, value] :
       std::vector<std::pair<std::string, json>>{{"presence_penalty", 2.5},
                                                 {"frequency_penalty", -3},
                                                 {"repetition_penalty", 0},
                                                 {"min_tokens", -1},
                                                 {"min_p", 2},
                                                 {"stop_token_ids", json{1, -2}},
                                                 {"stop_token_ids", "7"},
                                                 {"logit_bias", json{{"12", 150}}},
                                                 {"logit_bias", json{{"x", 1}}},
                                                 {"logit_bias", json::array({1})},
                                                 {"best_of", 2}}) {
    const auto [status, message] = completion(json{{field, value}});
    EXPECT_EQ(status, 400) << field;
    EXPECT_NE(message.find(field), std::string::npos) << message;
  }
  EXPECT_EQ(completion(json{{"echo", true}, {"stream", true}}).first, 400);
  EXPECT_TRUE(
      parse_completion_request(json{{"prompt", "x"}, {"echo", true}, {"logprobs", 2}}, m).echo);
  EXPECT_EQ(parse_completion_request(json{{"prompt", "x"}, {"echo", true}, {"logprobs", 2}}, m)
                .params.prompt_logprobs,
            2);
  EXPECT_EQ(completion(json{{"temperature", -1}}).first, 400);
  EXPECT_EQ(completion(json{{"top_p", 0}}).first, 400);
  EXPECT_EQ(completion(json{{"max_tokens", 0}}).first, 400);
  EXPECT_EQ(completion(json{{"max_tokens", "ten"}}).first, 400);
  EXPECT_EQ(completion(json{{"stream_options", {{"include_usage", true}}}}).first, 400);
  const auto [status, message] = completion(json{{"model", "gpt-4"}});
  EXPECT_EQ(status, 404);
  EXPECT_NE(message.find("gpt-4"), std::string::npos);
  EXPECT_EQ(api_error([&] {
              parse_completion_request(json{{"max_tokens", 3}}, m);
            }).first,
            400);  // no prompt
  EXPECT_EQ(api_error([&] {
              parse_completion_request(json{{"prompt", json::array()}}, m);
            }).first,
            400);
  EXPECT_EQ(api_error([&] { parse_completion_request(json{{"prompt", {1.5}}}, m); }).first, 400);
  EXPECT_EQ(api_error([&] { parse_completion_request(json::array(), m); }).first, 400);
  ServedModel no_tokenizer = m;
  no_tokenizer.tokenizer = nullptr;
  EXPECT_EQ(api_error([&] {
              parse_completion_request(json{{"prompt", "text"}}, no_tokenizer);
            }).first,
            400);
}

// max_model_len 100: a prompt of 10 ids leaves room for 90 tokens; asking 91 is refused in vLLM's
// words (not cut short), exactly 90 is fine, and so are the chat default and a prompt that does
// not fit at all (the engine's own error names that one).
TEST(OpenAiProtocol, MaxTokensPastTheContextIsRefused) {
  const Fixture fx;
  const json prompt = std::vector<int32_t>(10, 5);
  EXPECT_EQ(parse_completion_request(json{{"prompt", prompt}, {"max_tokens", 90}}, fx.model())
                .params.max_tokens,
            90);
  const auto [status, message] = api_error([&] {
    parse_completion_request(json{{"prompt", prompt}, {"max_tokens", 91}}, fx.model());
  });
  EXPECT_EQ(status, 400);
  EXPECT_NE(message.find("maximum context length is 100 tokens. However, you requested 101 tokens "
                         "(10 in the prompt, 91 in the completion)"),
            std::string::npos)
      << message;
  // Several prompts: the longest decides.
  EXPECT_EQ(api_error([&] {
              parse_completion_request(
                  json{{"prompt", {std::vector<int32_t>(5, 5), std::vector<int32_t>(95, 5)}},
                       {"max_tokens", 6}},
                  fx.model());
            }).first,
            400);
  const json chat = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 1000}};
  const auto [chat_status, chat_message] = api_error([&] { parse_chat_request(chat, fx.model()); });
  EXPECT_EQ(chat_status, 400);
  EXPECT_NE(chat_message.find("in the messages, 1000 in the completion"), std::string::npos)
      << chat_message;
  EXPECT_EQ(parse_completion_request(json{{"prompt", std::vector<int32_t>(100, 5)}}, fx.model())
                .prompts.front()
                .size(),
            100u);  // left to the engine's check, which names the prompt's length
}

TEST(OpenAiProtocol, ChatRendersTheTemplateAndDefaultsToTheRoomLeft) {
  const Fixture fx;
  const json body = {{"messages",
                      {{{"role", "system"}, {"content", " Be brief. "}},
                       {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "Hi"}}}}}}}};
  const ApiRequest r = parse_chat_request(body, fx.model());
  const std::string want =
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
      "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_"
      "header_id|>\n\n";
  EXPECT_EQ(r.prompts.front(), fx.tokenizer.encode(want, false));
  EXPECT_EQ(r.params.max_tokens, 100 - static_cast<int32_t>(r.prompts.front().size()));
  // The template decides which roles it accepts; this one renders any.
  EXPECT_EQ(
      parse_chat_request(json{{"messages", {{{"role", "tool"}, {"content", "x"}}}}}, fx.model())
          .prompts.front(),
      fx.tokenizer.encode("<|begin_of_text|><|start_header_id|>tool<|end_header_id|>\n\nx<|"
                          "eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
                          false));
  EXPECT_EQ(api_error([&] {
              parse_chat_request(json{{"messages", json::array()}}, fx.model());
            }).first,
            400);
  ServedModel no_template = fx.model();
  no_template.chat_template.reset();
  const auto [status, message] = api_error([&] { parse_chat_request(body, no_template); });
  EXPECT_EQ(status, 400);
  EXPECT_NE(message.find("chat template"), std::string::npos);
  no_template.chat_template_error = "chat template syntax error at line 1, column 4: ...";
  EXPECT_NE(api_error([&] { parse_chat_request(body, no_template); }).second.find("line 1"),
            std::string::npos);
}

TEST(OpenAiProtocol, ChatTemplateOptionsAndErrors) {
  const Fixture fx;
  const json hi = {{{"role", "user"}, {"content", "Hi"}}};
  const std::string turn =
      "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>";
  EXPECT_EQ(parse_chat_request(json{{"messages", hi}, {"add_generation_prompt", false}}, fx.model())
                .prompts.front(),
            fx.tokenizer.encode(turn, false));
  EXPECT_EQ(parse_chat_request(json{{"messages", hi},
                                    {"add_generation_prompt", false},
                                    {"chat_template_kwargs", {{"greeting", " hello"}}}},
                               fx.model())
                .prompts.front(),
            fx.tokenizer.encode(turn + " hello", false));
  EXPECT_EQ(api_error([&] {
              parse_chat_request(json{{"messages", hi}, {"chat_template_kwargs", 3}}, fx.model());
            }).first,
            400);
  EXPECT_EQ(
      api_error([&] {
        parse_chat_request(json{{"messages", hi}, {"add_generation_prompt", "yes"}}, fx.model());
      }).first,
      400);
  // raise_exception's message reaches the client as is; a runtime error names its position.
  ServedModel strict = fx.model();
  strict.chat_template = ChatTemplate(
      "{% for m in messages %}{% if m.role == 'tool' %}{{ raise_exception('no tools here') }}"
      "{% endif %}{{ m.content + 1 }}{% endfor %}",
      nullptr);
  const auto raised = api_error([&] {
    parse_chat_request(json{{"messages", {{{"role", "tool"}, {"content", "x"}}}}}, strict);
  });
  EXPECT_EQ(raised, std::make_pair(400, std::string("no tools here")));
  const auto runtime = api_error([&] { parse_chat_request(json{{"messages", hi}}, strict); });
  EXPECT_EQ(runtime.first, 400);
  EXPECT_NE(runtime.second.find("line 1, column 111"), std::string::npos) << runtime.second;
}

std::string read_data(const std::string& name) {
  std::ifstream in(QUENCH_TEST_DATA_DIR "/chat_templates/" + name, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A fixture conversation with tool calls (tools/make_chat_template_fixtures.py), sent as an
// OpenAI client sends it: arguments as JSON strings, empty assistant content as null. The prompt
// is the one Python's jinja2 rendered from HF's form of the same conversation.
TEST(OpenAiProtocol, ToolsAndToolCallsReachTheTemplateAsHfRendersThem) {
  const Fixture fx;
  for (const auto& [name, case_name] :
       {std::pair<std::string, std::string>{"qwen3", "parallel_calls_with_ids"},
        {"llama3", "tool_call_with_ids"}}) {
    SCOPED_TRACE(name);
    const auto fixture = nlohmann::ordered_json::parse(read_data(name + ".json"));
    nlohmann::ordered_json variables, expected;
    for (const auto& c : fixture.at("cases")) {
      if (c.at("name") == case_name) {
        variables = c.at("variables");
        expected = c.at("expected");
      }
    }
    ASSERT_TRUE(expected.is_string()) << case_name;
    nlohmann::ordered_json messages = variables.at("messages");
    for (auto& m : messages) {
      if (m.value("content", "x").empty()) m["content"] = nullptr;
      if (!m.contains("tool_calls")) continue;
      for (auto& call : m["tool_calls"])
        call["function"]["arguments"] = call["function"]["arguments"].dump();
    }
    json tokens = json::object();
    for (const auto& [key, value] : variables.items())
      if (key.ends_with("_token")) tokens[key] = value;
    ServedModel m = fx.model();
    m.max_model_len = 4096;
    m.chat_template = ChatTemplate(read_data(name + ".jinja"), tokens);
    m.tools = {&tool_call_parser("hermes"), true};
    const nlohmann::ordered_json body = {{"messages", messages}, {"tools", variables.at("tools")}};
    const ApiRequest r = parse_chat_request(body, m);
    EXPECT_EQ(r.prompts.front(), fx.tokenizer.encode(expected.get<std::string>(), false));
    EXPECT_EQ(r.tool_call_parser.get(), &tool_call_parser("hermes"));
    // tool_choice "none": the same prompt (the tools are still shown), no parsing.
    nlohmann::ordered_json none = body;
    none["tool_choice"] = "none";
    const ApiRequest plain = parse_chat_request(none, m);
    EXPECT_EQ(plain.prompts, r.prompts);
    EXPECT_EQ(plain.tool_call_parser, nullptr);
  }
}

// skip_special_tokens (vLLM's field, default true); a parser whose call marker is a special token
// (mistral) turns it off for the requests it parses, and only those.
TEST(OpenAiProtocol, SkipSpecialTokens) {
  const Fixture fx;
  const json hi = {{{"role", "user"}, {"content", "Hi"}}};
  const json tool = {{"type", "function"}, {"function", {{"name", "f"}}}};
  EXPECT_TRUE(
      parse_completion_request(json{{"prompt", "x"}}, fx.model()).params.skip_special_tokens);
  EXPECT_FALSE(
      parse_completion_request(json{{"prompt", "x"}, {"skip_special_tokens", false}}, fx.model())
          .params.skip_special_tokens);
  const auto bad = api_error([&] {
    parse_completion_request(json{{"prompt", "x"}, {"skip_special_tokens", "no"}}, fx.model());
  });
  EXPECT_EQ(bad.first, 400);
  EXPECT_NE(bad.second.find("skip_special_tokens"), std::string::npos) << bad.second;
  for (const char* parser : {"hermes", "mistral"}) {
    ServedModel m = fx.model();
    m.tools = {&tool_call_parser(parser), true};
    const bool mistral = std::string(parser) == "mistral";
    EXPECT_EQ(
        parse_chat_request(json{{"messages", hi}, {"tools", {tool}}}, m).params.skip_special_tokens,
        !mistral)
        << parser;
    // tool_choice "none" parses nothing: special tokens stay skipped.
    EXPECT_TRUE(
        parse_chat_request(json{{"messages", hi}, {"tools", {tool}}, {"tool_choice", "none"}}, m)
            .params.skip_special_tokens)
        << parser;
    EXPECT_TRUE(parse_chat_request(json{{"messages", hi}}, m).params.skip_special_tokens) << parser;
  }
}

// Under the mistral parser, call ids from elsewhere reach the template as their last nine
// characters (Mistral's templates refuse any other length); other parsers pass them as sent.
TEST(OpenAiProtocol, CallIdsInTheFormTheTemplateTakes) {
  const Fixture fx;
  const nlohmann::ordered_json messages = nlohmann::ordered_json::parse(R"([
      {"role": "user", "content": "Hi"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "chatcmpl-tool-0123456789abcdef",
        "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
      {"role": "tool", "tool_call_id": "chatcmpl-tool-0123456789abcdef", "content": "ok"}])");
  for (const char* parser : {"hermes", "mistral"}) {
    ServedModel m = fx.model();
    m.chat_template = ChatTemplate(
        "{% for m in messages %}{% for c in m.tool_calls or [] %}[{{ c.id }}]{% endfor %}"
        "{% if m.tool_call_id %}({{ m.tool_call_id }}){% endif %}{% endfor %}",
        json::object());
    m.tools = {&tool_call_parser(parser), true};
    const ApiRequest r = parse_chat_request({{"messages", messages}}, m);
    const std::string id =
        std::string(parser) == "mistral" ? "789abcdef" : "chatcmpl-tool-0123456789abcdef";
    EXPECT_EQ(r.prompts.front(), fx.tokenizer.encode("[" + id + "](" + id + ")", false)) << parser;
  }
}

TEST(OpenAiProtocol, ToolRequestErrors) {
  const Fixture fx;
  const json hi = {{{"role", "user"}, {"content", "Hi"}}};
  const json tool = {{"type", "function"}, {"function", {{"name", "f"}}}};
  // Without --enable-auto-tool-choice, tools default to "auto", which is refused naming the flag.
  const auto no_flag = api_error([&] {
    parse_chat_request(json{{"messages", hi}, {"tools", {tool}}}, fx.model());
  });
  EXPECT_EQ(no_flag.first, 400);
  EXPECT_NE(no_flag.second.find("--enable-auto-tool-choice"), std::string::npos);
  EXPECT_EQ(api_error([&] {
              parse_completion_request(json{{"prompt", "x"}, {"tools", {tool}}}, fx.model());
            }).second,
            "'tools' is a chat field: use /v1/chat/completions");
  const auto bad_call = api_error([&] {
    parse_chat_request(
        json{{"messages",
              {{{"role", "assistant"},
                {"tool_calls", {{{"function", {{"name", "f"}, {"arguments", "{"}}}}}}}}}},
        fx.model());
  });
  EXPECT_EQ(bad_call.first, 400);
  EXPECT_NE(bad_call.second.find("messages[0].tool_calls[0].function.arguments"),
            std::string::npos);
}

TEST(OpenAiProtocol, ToolCallResponseShapes) {
  const ResponseIds ids{"chatcmpl-1", 123, "tiny"};
  const ToolCallOutput out = extract_tool_calls(
      tool_call_parser("hermes"),
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>", true);
  ChoiceResult called{out.content, FinishReason::kStop, nullptr, out.calls, std::nullopt};
  ChoiceResult said{"I know.", FinishReason::kStop, nullptr, {}, std::nullopt};
  const json r = chat_json(ids, {called, said}, 3, 4);
  const json& message = r["choices"][0]["message"];
  EXPECT_TRUE(message["content"].is_null());
  EXPECT_EQ(message["tool_calls"][0]["type"], "function");
  EXPECT_EQ(message["tool_calls"][0]["id"], out.calls[0].id);
  EXPECT_EQ(message["tool_calls"][0]["function"],
            (json{{"name", "f"}, {"arguments", R"({"a":1})"}}));
  EXPECT_EQ(r["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(r["choices"][1]["message"], (json{{"role", "assistant"}, {"content", "I know."}}));
  EXPECT_EQ(r["choices"][1]["finish_reason"], "stop");
  const json chunk = chat_delta_chunk_json(ids, {{"tool_calls", json::array()}}, "tool_calls", 2);
  EXPECT_EQ(chunk["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(chunk["choices"][0]["index"], 2);
  EXPECT_EQ(chunk["object"], "chat.completion.chunk");
}

// A reasoning parser's split: message.reasoning_content beside the content, which is null when
// the output was cut off while reasoning, and beside tool calls read from the content.
TEST(OpenAiProtocol, ReasoningResponseShapes) {
  const ResponseIds ids{"chatcmpl-1", 123, "tiny"};
  const ToolCallOutput out =
      extract_tool_calls(tool_call_parser("hermes"),
                         "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>", true);
  const json r = chat_json(ids,
                           {{"42", FinishReason::kStop, nullptr, {}, "think"},
                            {"", FinishReason::kLength, nullptr, {}, "still"},
                            {out.content, FinishReason::kStop, nullptr, out.calls, "call f"},
                            {"plain", FinishReason::kStop, nullptr, {}, std::nullopt}},
                           3, 4);
  EXPECT_EQ(r["choices"][0]["message"],
            (json{{"role", "assistant"}, {"content", "42"}, {"reasoning_content", "think"}}));
  EXPECT_EQ(r["choices"][1]["message"],
            (json{{"role", "assistant"}, {"content", nullptr}, {"reasoning_content", "still"}}));
  EXPECT_EQ(r["choices"][1]["finish_reason"], "length");
  EXPECT_EQ(r["choices"][2]["message"]["reasoning_content"], "call f");
  EXPECT_TRUE(r["choices"][2]["message"]["content"].is_null());
  EXPECT_EQ(r["choices"][2]["message"]["tool_calls"][0]["function"]["name"], "f");
  EXPECT_EQ(r["choices"][2]["finish_reason"], "tool_calls");
  EXPECT_FALSE(r["choices"][3]["message"].contains("reasoning_content"));
}

TEST(OpenAiProtocol, ResponseShapes) {
  const ResponseIds ids{"cmpl-1", 123, "tiny"};
  const json c = completion_json(ids,
                                 {{"hi", FinishReason::kStop, nullptr, {}, std::nullopt},
                                  {"ho", FinishReason::kLength, nullptr, {}, std::nullopt}},
                                 4, 2);
  EXPECT_EQ(c["choices"][1]["index"], 1);
  EXPECT_EQ(c["choices"][1]["text"], "ho");
  EXPECT_EQ(c["object"], "text_completion");
  EXPECT_EQ(c["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(c["usage"]["total_tokens"], 6);
  const json chunk = chat_chunk_json(ids, std::nullopt, "x", std::nullopt);
  EXPECT_TRUE(chunk["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(chunk["choices"][0]["delta"]["content"], "x");
  EXPECT_EQ(chat_chunk_json(ids, std::string("assistant"), "", std::nullopt)["choices"][0]["delta"],
            (json{{"role", "assistant"}}));
  EXPECT_EQ(error_json(400, "bad", "BadRequestError")["code"], 400);
  EXPECT_TRUE(usage_chunk_json(ids, true, 1, 2)["choices"].empty());
}

}  // namespace
}  // namespace quench
