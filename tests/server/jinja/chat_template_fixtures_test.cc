// Every template in tests/data/chat_templates rendered on every case its .json lists, compared
// byte for byte with what Python's jinja2 in HF's configuration produced
// (tools/make_chat_template_fixtures.py), and raise_exception's message passed through verbatim.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "quench/server/chat_template.h"
#include "quench/server/jinja/template.h"

namespace quench::jinja {
namespace {

const std::string kDir = QUENCH_TEST_DATA_DIR "/chat_templates/";

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class ChatTemplateFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(ChatTemplateFixture, RendersAsJinja2Does) {
  const std::string name = GetParam();
  const Template t(read(kDir + name + ".jinja"));
  const Json fixture = Json::parse(read(kDir + name + ".json"));
  ASSERT_FALSE(fixture.at("cases").empty());
  for (const Json& c : fixture.at("cases")) {
    SCOPED_TRACE(name + "/" + c.at("name").get<std::string>());
    if (c.contains("expected")) {
      EXPECT_EQ(t.render(c.at("variables")), c.at("expected").get<std::string>());
    } else {
      try {
        t.render(c.at("variables"));
        ADD_FAILURE() << "expected raise_exception";
      } catch (const RaisedError& e) {
        EXPECT_EQ(std::string(e.what()), c.at("error").get<std::string>());
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Jinja, ChatTemplateFixture,
                         ::testing::Values("llama3", "qwen3", "mistral", "gemma", "chatml",
                                           "kitchen_sink"));

// The ChatTemplate wrapper passes the same variables HF does: special tokens, documents as None,
// tools, kwargs, messages and add_generation_prompt. Every fixture case, tool calls and tool
// results included, renders the same through it.
TEST(JinjaChatTemplate, WrapperMatchesTheFixtureVariables) {
  for (const char* name : {"llama3", "qwen3", "mistral", "gemma", "chatml", "kitchen_sink"}) {
    const Json fixture = Json::parse(read(kDir + name + ".json"));
    for (const Json& c : fixture.at("cases")) {
      SCOPED_TRACE(std::string(name) + "/" + c.at("name").get<std::string>());
      nlohmann::json tokens = nlohmann::json::object();
      nlohmann::json kwargs = nlohmann::json::object();
      for (const auto& [key, value] : c.at("variables").items()) {
        if (key == "messages" || key == "tools" || key == "documents" ||
            key == "add_generation_prompt")
          continue;
        (key.ends_with("_token") || key == "additional_special_tokens" ? tokens : kwargs)[key] =
            value;
      }
      const ChatTemplate chat(read(kDir + name + ".jinja"), tokens);
      const Json& v = c.at("variables");
      auto render = [&] {
        return chat.render(v.at("messages"), v.at("add_generation_prompt").get<bool>(), kwargs,
                           v.at("tools"));
      };
      if (c.contains("expected")) {
        EXPECT_EQ(render(), c.at("expected").get<std::string>());
      } else {
        EXPECT_THROW(render(), RaisedError);
      }
    }
  }
}

}  // namespace
}  // namespace quench::jinja
