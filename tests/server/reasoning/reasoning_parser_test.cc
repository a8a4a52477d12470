// Reasoning split off chat output: each parser's whole-text split on the shapes the two model
// families write (a closed block, a block cut off, no block, markers split across tokens), and the
// stream fed byte by byte adding up to the whole split, never showing a marker.
#include "quench/server/reasoning/reasoning_parser.h"

#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <string>

#include "harness/expect_error.h"
#include "quench/server/reasoning/reasoning_streamer.h"

namespace quench {
namespace {

struct Case {
  std::string text;
  std::optional<std::string> reasoning;
  std::string content;
};

void expect_split(const std::string& parser, const Case& c) {
  SCOPED_TRACE(parser + ": " + c.text);
  const ReasoningOutput out = extract_reasoning(reasoning_parser(parser), c.text);
  EXPECT_EQ(out.reasoning, c.reasoning);
  EXPECT_EQ(out.content, c.content);
}

TEST(ReasoningParser, Qwen3SplitsOnlyAnOpenedBlock) {
  for (const Case& c : std::vector<Case>{
           {"<think>\nplan it\n</think>\n\nThe answer.", "\nplan it\n", "The answer."},
           {"<think></think>Hi", "", "Hi"},
           {"<think>\nstill thinking when the tokens ran out",
            "\nstill thinking when the tokens ran out", ""},
           {"<think>a</think>", "a", ""},
           // enable_thinking false: the template closed an empty block in the prompt.
           {"Just the answer.", std::nullopt, "Just the answer."},
           {"", std::nullopt, ""},
           {"<thin", std::nullopt, "<thin"},
           {" <think>a</think>b", std::nullopt, " <think>a</think>b"},
           {"<think>a</think>b</think>c", "a", "b</think>c"},
       }) {
    expect_split("qwen3", c);
  }
}

TEST(ReasoningParser, DeepseekR1ReasonsFromTheStart) {
  for (const Case& c : std::vector<Case>{
           {"plan it\n</think>\n\nThe answer.", "plan it\n", "The answer."},
           {"<think>\nplan\n</think>ok", "\nplan\n", "ok"},
           {"cut off while thinking", "cut off while thinking", ""},
           {"</think>answer only", "", "answer only"},
           {"", "", ""},
           {"a</think>  \n ", "a", ""},
       }) {
    expect_split("deepseek_r1", c);
  }
}

TEST(ReasoningParser, UnknownNameIsRefusedWithTheAllowedOnes) {
  EXPECT_QUENCH_ERROR(reasoning_parser("granite"), {"granite", "deepseek_r1, qwen3"});
}

// The stream, fed `text` in pieces (each piece boundary a possible token boundary).
struct Streamed {
  std::string reasoning;
  std::string content;
};
Streamed stream(const std::string& parser, const std::string& text,
                const std::vector<size_t>& cuts) {
  ReasoningStreamer s(reasoning_parser(parser));
  Streamed out;
  std::string content_seen;
  auto take = [&](ReasoningStreamer::Delta d) {
    EXPECT_EQ(d.reasoning.find("<think>"), std::string::npos) << d.reasoning;
    EXPECT_EQ(d.reasoning.find("</think>"), std::string::npos) << d.reasoning;
    out.reasoning += d.reasoning;
    // The content only grows: what was seen is kept.
    EXPECT_TRUE(std::string(d.content).starts_with(content_seen)) << d.content;
    content_seen = std::string(d.content);
  };
  for (const size_t n : cuts)
    take(s.update(std::string_view(text).substr(0, n), false));
  take(s.update(text, true));
  out.content = content_seen;
  return out;
}

TEST(ReasoningStreamer, AddsUpToTheWholeSplitAtEveryCut) {
  const std::vector<std::string> texts = {
      "<think>\nplan it\n</think>\n\nThe answer.",
      "<think>\ncut off </thin",
      "<think>a</think>b</think>c",
      "plan </think>\n\nanswer",
      "no block at all",
      "<th",
      "<think></think>",
      "x</thinkx</think>y",
  };
  std::mt19937 rng(7);
  for (const char* parser : {"qwen3", "deepseek_r1"}) {
    for (const std::string& text : texts) {
      SCOPED_TRACE(std::string(parser) + ": " + text);
      const ReasoningOutput whole = extract_reasoning(reasoning_parser(parser), text);
      // Byte by byte, then random pieces.
      std::vector<size_t> bytes;
      for (size_t n = 1; n <= text.size(); ++n)
        bytes.push_back(n);
      for (int trial = 0; trial < 20; ++trial) {
        std::vector<size_t> cuts = trial == 0 ? bytes : std::vector<size_t>{};
        if (trial > 0) {
          for (size_t n = 1 + rng() % 4; n <= text.size(); n += 1 + rng() % 4)
            cuts.push_back(n);
        }
        const Streamed s = stream(parser, text, cuts);
        EXPECT_EQ(s.reasoning, whole.reasoning.value_or(""));
        EXPECT_EQ(s.content, whole.content);
      }
    }
  }
}

TEST(ReasoningStreamer, SendsReasoningBeforeTheBlockCloses) {
  ReasoningStreamer s(reasoning_parser("qwen3"));
  EXPECT_EQ(s.update("<thi", false).reasoning, "");
  EXPECT_EQ(s.update("<think>Let me", false).reasoning, "Let me");
  // "</th" may be the closing marker: held back.
  ReasoningStreamer::Delta d = s.update("<think>Let me see</th", false);
  EXPECT_EQ(d.reasoning, " see");
  EXPECT_TRUE(d.content.empty());
  d = s.update("<think>Let me see</think>\n", false);
  EXPECT_EQ(d.reasoning, "");
  EXPECT_TRUE(d.content.empty());  // blank so far: content has not started
  d = s.update("<think>Let me see</think>\n42", false);
  EXPECT_EQ(d.content, "42");
}

}  // namespace
}  // namespace quench
