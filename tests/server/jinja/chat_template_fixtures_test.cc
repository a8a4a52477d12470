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

// The ChatTemplate wrapper passes the same variables HF does: special tokens, tools and
// documents as None, kwargs, messages and add_generation_prompt.
TEST(JinjaChatTemplate, WrapperMatchesTheFixtureVariables) {
  const Json fixture = Json::parse(read(kDir + "qwen3.json"));
  for (const Json& c : fixture.at("cases")) {
    const Json& v = c.at("variables");
    if (c.at("name") != "enable_thinking_false") continue;
    std::vector<ChatMessage> messages;
    for (const Json& m : v.at("messages"))
      messages.push_back({m.at("role").get<std::string>(), m.at("content").get<std::string>()});
    const ChatTemplate chat(read(kDir + "qwen3.jinja"),
                            {{"eos_token", "<|im_end|>"}, {"pad_token", "<|endoftext|>"}});
    EXPECT_EQ(chat.render(messages, true, {{"enable_thinking", false}}),
              c.at("expected").get<std::string>());
    return;
  }
  FAIL() << "case enable_thinking_false not found";
}

}  // namespace
}  // namespace quench::jinja
