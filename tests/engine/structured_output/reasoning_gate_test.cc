// The reasoning gate of structured output: what part of each token the constrained answer gets,
// with the block opened in the prompt or by the first token, markers split across tokens, and
// markers that never come.
#include "quench/engine/structured_output/reasoning_gate.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "harness/tiny_engine.h"
#include "quench/engine/llm_engine.h"
#include "quench/engine/structured_output/json_schema.h"
#include "quench/engine/structured_output/json_schema_prefix.h"

namespace quench {
namespace {

using State = ReasoningGate::State;

// The answer bytes the gate gives for `tokens`, in order.
std::string answer_of(ReasoningGate& gate, const std::vector<std::string>& tokens) {
  std::string answer;
  for (const std::string& t : tokens)
    answer += gate.feed(t);
  return answer;
}

TEST(ReasoningGate, InsideFromThePromptUntilTheCloseMarker) {
  ReasoningGate gate(ReasoningGateSpec{true});
  EXPECT_EQ(gate.state(), State::kReasoning);
  EXPECT_EQ(gate.feed("let me think"), "");
  EXPECT_EQ(gate.feed(" </thi"), "");  // may begin the marker
  EXPECT_EQ(gate.state(), State::kReasoning);
  EXPECT_EQ(gate.feed("nk>\n{\"a\""), "\n{\"a\"");
  EXPECT_EQ(gate.state(), State::kAnswer);
  EXPECT_EQ(gate.feed("</think>"), "</think>");  // the answer's own text now
}

TEST(ReasoningGate, TheFirstTokenOpensABlockOrStartsTheAnswer) {
  ReasoningGate opened(ReasoningGateSpec{false});
  EXPECT_EQ(opened.state(), State::kMayOpen);
  EXPECT_EQ(opened.feed("<think>"), "");
  EXPECT_EQ(opened.state(), State::kReasoning);
  EXPECT_EQ(answer_of(opened, {"\nplan\n", "</think>", "\n\n", "{}"}), "\n\n{}");
  EXPECT_EQ(opened.state(), State::kAnswer);

  ReasoningGate answered(ReasoningGateSpec{false});
  EXPECT_EQ(answered.feed("{"), "{");
  EXPECT_EQ(answered.state(), State::kAnswer);
  EXPECT_EQ(answered.feed("<think>"), "<think>");
  // Only the marker's own token opens a block: a first token that merely begins with it is
  // the answer's (the engine allowed it through the schema's mask).
  ReasoningGate longer(ReasoningGateSpec{false});
  EXPECT_EQ(longer.feed("<think>x"), "<think>x");
  EXPECT_EQ(longer.state(), State::kAnswer);
}

TEST(ReasoningGate, MarkersThatNeverCloseKeepItReasoning) {
  ReasoningGate gate(ReasoningGateSpec{true});
  EXPECT_EQ(answer_of(gate, {"</think", "x", "</", "thin", "k", " >", "<think>"}), "");
  EXPECT_EQ(gate.state(), State::kReasoning);
}

// Any cut of a text into tokens gives the text after its first close marker.
TEST(ReasoningGate, EveryTokenizationGivesTheTextAfterTheFirstMarker) {
  const std::vector<std::string> texts = {"plan</think>{\"a\": 1}", "</think></think>x",
                                          "a</thin</think>\n[1]", "<</think>>"};
  std::mt19937 rng(3);
  for (const std::string& text : texts) {
    const std::string want = text.substr(text.find("</think>") + 8);
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<std::string> tokens;
      for (size_t at = 0; at < text.size();) {
        const size_t n = 1 + rng() % 5;
        tokens.push_back(text.substr(at, n));
        at += n;
      }
      ReasoningGate gate(ReasoningGateSpec{true});
      EXPECT_EQ(answer_of(gate, tokens), want) << text;
      EXPECT_EQ(gate.state(), State::kAnswer);
    }
  }
}

// ---- the engine ----

std::string engine_dir() {
  return testing_support::tiny_model_dir("quench_reasoning_gate_test", "engine");
}

// JSON mode behind a close marker that the random model is sure to write (the bytes of its own
// first three greedy tokens): those tokens come as without a constraint, and the rest is a JSON
// object's prefix where the free continuation was not one. A marker it never writes leaves the
// whole output free.
TEST(ReasoningGateEngine, TheAnswerAfterTheMarkerFollowsTheSchema) {
  LlmEngine engine(testing_support::tiny_engine_options(engine_dir()));
  const Tokenizer& tokenizer = *engine.tokenizer();
  const SamplingParams free_params = testing_support::greedy(24);
  const auto bytes_of = [&](const std::vector<int32_t>& tokens, size_t from, bool specials) {
    std::string text;
    for (size_t i = from; i < tokens.size(); ++i)
      text += tokenizer.token_bytes(tokens[i], !specials, true);
    return text;
  };
  int checked = 0;
  for (int32_t first = 5; first < 60 && checked < 3; ++first) {
    const std::vector<int32_t> prompt = {first, first + 1, first + 2};
    const std::vector<int32_t> free = engine.generate({prompt}, free_params)[0].output;
    ASSERT_GE(free.size(), 6u);
    // Only prompts whose free continuation breaks JSON show the mask at work.
    if (JsonSchemaPrefix(*JsonSchema::any_object()).feed(bytes_of(free, 3, false))) continue;
    ++checked;
    SamplingParams s = free_params;
    s.json_object = true;
    s.reasoning_gate =
        ReasoningGateSpec{true, "<unused>", bytes_of({free[0], free[1], free[2]}, 0, true)};
    const std::vector<int32_t> gated = engine.generate({prompt}, s)[0].output;
    ASSERT_GE(gated.size(), 3u);
    EXPECT_EQ(std::vector<int32_t>(gated.begin(), gated.begin() + 3),
              std::vector<int32_t>(free.begin(), free.begin() + 3));
    const std::string answer = bytes_of(gated, 3, false);
    EXPECT_TRUE(JsonSchemaPrefix(*JsonSchema::any_object()).feed(answer)) << answer;

    s.reasoning_gate->close = "\x01 never written";
    EXPECT_EQ(engine.generate({prompt}, s)[0].output, free);
  }
  EXPECT_EQ(checked, 3);
}

// A first token that may open a block: the open marker's own token is allowed beside JSON
// mode's first tokens (a bias makes the model take it), and the output after it is free
// reasoning; without the gate the mask never lets it through.
TEST(ReasoningGateEngine, TheOpenMarkersTokenIsAllowedFirst) {
  LlmEngine engine(testing_support::tiny_engine_options(engine_dir()));
  const Tokenizer& tokenizer = *engine.tokenizer();
  const std::optional<int32_t> a = tokenizer.token_to_id("a");
  ASSERT_TRUE(a.has_value());
  ASSERT_EQ(tokenizer.token_bytes(*a, false, true), "a");
  SamplingParams s = testing_support::greedy(8);
  s.json_object = true;
  s.logit_bias = {{*a, 100.0f}};
  const std::vector<int32_t> masked = engine.generate({{5, 6, 7}}, s)[0].output;
  EXPECT_EQ(std::count(masked.begin(), masked.end(), *a), 0);
  s.reasoning_gate = ReasoningGateSpec{false, "a", "\x01 never written"};
  const std::vector<int32_t> opened = engine.generate({{5, 6, 7}}, s)[0].output;
  EXPECT_EQ(opened, std::vector<int32_t>(8, *a));
}

}  // namespace
}  // namespace quench
