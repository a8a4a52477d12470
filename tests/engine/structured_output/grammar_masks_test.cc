// A grammar's vocabulary masks (json_token_masks.h, whose walk numbers the recogniser's states in
// GrammarSteps) against the recogniser itself: for several grammars and random prefixes (ending
// mid-character too, and where the grammar has finished), a token is allowed exactly where a copy
// of the prefix takes its bytes one by one. The vocabulary: every single byte, the grammars'
// punctuation runs, and random strings over their characters (multi-byte ones, whole and cut).
// And GrammarSteps emptied to make room (a table of a few states) steps as the recogniser does.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "harness/byte_level_tokenizer_json.h"
#include "harness/structured_output_checks.h"
#include "quench/engine/structured_output/grammar_steps.h"
#include "quench/engine/structured_output/json_schema.h"
#include "quench/engine/structured_output/json_schema_prefix.h"
#include "quench/engine/structured_output/json_token_masks.h"
#include "quench/tokenizer/tokenizer.h"

namespace quench {
namespace {

struct GrammarCase {
  const char* gbnf;
  std::vector<std::string> pieces;  // what its texts are made of (a character or a run)
};

const std::vector<GrammarCase>& grammar_cases() {
  static const std::vector<GrammarCase> cases = {
      // JSON-like text with a string's '*' rule, as the json_masks bench has it.
      {R"g(root ::= "{" ws pair ("," ws pair)* ws "}"
pair ::= str ws ":" ws val
val  ::= str | num | "true" | "false" | "null"
str  ::= "\"" [^"\\]* "\""
num  ::= "-"? [0-9]+
ws   ::= [ \n]{0,4})g",
       {"{", "}", "\"", ":", ",", " ", "\n", "a", "x", "1", "-", "true", "null", "\\", "\xc3\xa9"}},
      // Context-free nesting.
      {R"g(root ::= expr
expr ::= term ("+" term)*
term ::= [0-9]{1,3} | "(" expr ")")g",
       {"(", ")", "+", "1", "23", "9"}},
      // Characters outside ASCII in classes and literals, '.', counts.
      {R"g(root ::= "é" [^a-z\n]{ 1, 2 } "\x41\u00e9" tail
tail ::= "\"" . "\\" | [\]\-] | [€-₿😀]+)g",
       {"\xc3\xa9", "1", "A", "\"", "\\", "]", "-", "\xe2\x82\xac", "\xe2\x82\xbf",
        "\xf0\x9f\x98\x80", "a", "\n"}},
      // Ambiguous alternatives that share their starts.
      {R"g(root ::= (word " ")* word
word ::= "ab" | "abc" | "a" [b-d]* "x" | [a-c]{2})g",
       {"a", "b", "c", "d", "x", " ", "ab", "abc"}},
  };
  return cases;
}

// Every byte; each piece, and random runs of 2-8 pieces, whole and with their last byte cut (a
// character half-written).
std::set<std::string> vocabulary(const std::vector<std::string>& pieces, std::mt19937& rng) {
  std::set<std::string> tokens;
  for (int b = 0; b < 256; ++b)
    tokens.insert(std::string(1, static_cast<char>(b)));
  tokens.insert(pieces.begin(), pieces.end());
  for (int i = 0; i < 1500; ++i) {
    std::string t;
    const int n = 2 + static_cast<int>(rng() % 7);
    for (int k = 0; k < n; ++k)
      t += pieces[rng() % pieces.size()];
    tokens.insert(t);
    tokens.insert(t.substr(0, t.size() - 1));
  }
  return tokens;
}

// A random text the grammar takes: pieces fed while they are taken, up to `length` tries; some
// cut inside a character, some run on until the grammar has finished.
std::string random_prefix(const JsonSchema& g, const std::vector<std::string>& pieces,
                          size_t length, std::mt19937& rng) {
  JsonSchemaPrefix p(g);
  std::string text;
  for (size_t i = 0; i < length && !p.complete(); ++i) {
    const std::string& piece = pieces[rng() % pieces.size()];
    JsonSchemaPrefix next = p;
    if (next.feed(piece)) p = next, text += piece;
  }
  if (rng() % 4 == 0) {  // a multi-byte character's first byte, where one is taken
    for (const std::string& piece : pieces) {
      JsonSchemaPrefix next = p;
      if (piece.size() > 1 && static_cast<unsigned char>(piece[0]) >= 0xC0 &&
          next.feed(piece.substr(0, 1)))
        return text + piece.substr(0, 1);
    }
  }
  return text;
}

TEST(GrammarMasks, EachTokenAllowedExactlyWhereTheRecogniserTakesItsBytes) {
  std::mt19937 rng(23);
  const std::vector<int32_t> no_stops;
  int prefixes = 0, finished = 0;
  for (const GrammarCase& c : grammar_cases()) {
    const auto g = JsonSchema::text_grammar(c.gbnf);
    const Tokenizer tokenizer =
        testing_support::byte_level_tokenizer(vocabulary(c.pieces, rng), "grammar_masks_test");
    JsonTokenMasks masks(tokenizer, no_stops);  // one walker for every prefix: its memory reused
    std::set<std::string> texts = {""};
    for (int i = 0; i < 24; ++i)
      texts.insert(random_prefix(*g, c.pieces, 1 + rng() % 24, rng));
    for (const std::string& text : texts) {
      JsonSchemaPrefix prefix(*g);
      ASSERT_TRUE(prefix.feed(text)) << c.gbnf << " on \"" << text << "\"";
      finished += prefix.complete() ? 1 : 0;
      if (prefix.complete()) {
        // Nothing may follow: no token is allowed (the check below wants one).
        const std::vector<uint32_t>& bits = masks.allowed_bits(prefix);
        for (uint32_t w : bits)
          EXPECT_EQ(w, 0u) << c.gbnf << " after \"" << text << "\"";
        continue;
      }
      testing_support::expect_mask_follows_prefix(tokenizer, masks, prefix, no_stops,
                                                  std::string(c.gbnf) + " after \"" + text + "\"");
      ++prefixes;
    }
  }
  EXPECT_GT(prefixes, 60);
  EXPECT_GT(finished, 0);
}

// The recogniser's answer to `text` byte by byte: how many bytes it takes.
size_t bytes_taken(const GrammarPrefix& start, const std::string& text) {
  GrammarPrefix p = start;
  for (size_t i = 0; i < text.size(); ++i) {
    if (p.finished() || !p.feed_byte(static_cast<unsigned char>(text[i]))) return i;
  }
  return text.size();
}

TEST(GrammarMasks, StepsEmptiedToMakeRoomAnswerAsTheRecogniser) {
  std::mt19937 rng(29);
  for (const GrammarCase& c : grammar_cases()) {
    const auto g = JsonSchema::text_grammar(c.gbnf);
    JsonSchemaPrefix json(*g);
    const GrammarPrefix& start = *json.grammar();
    for (size_t max_states : {size_t{2}, size_t{3}, size_t{5}, GrammarSteps::kMaxStates}) {
      GrammarSteps steps(max_states);
      std::vector<int32_t> path = {steps.start(start)};
      size_t longest = 0;  // the table holds at most max_states, or a walk's path and one more
      for (int t = 0; t < 400; ++t) {
        std::string text;
        const int n = 1 + static_cast<int>(rng() % 12);
        for (int k = 0; k < n; ++k)
          text += c.pieces[rng() % c.pieces.size()];
        if (rng() % 3 == 0) text[rng() % text.size()] = static_cast<char>(rng() % 256);
        // From the start each time, over the states the texts before left in the table.
        path.resize(1);
        size_t taken = 0;
        for (; taken < text.size(); ++taken) {
          const int32_t next =
              steps.step(std::span<int32_t>(path), static_cast<unsigned char>(text[taken]));
          if (next == GrammarSteps::kRefused) break;
          path.push_back(next);
        }
        EXPECT_EQ(taken, bytes_taken(start, text)) << c.gbnf << " on \"" << text << "\"";
        longest = std::max(longest, taken + 1);
        EXPECT_LE(steps.size(), std::max(max_states, longest + 1));
      }
    }
  }
}

}  // namespace
}  // namespace quench
