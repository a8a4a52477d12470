// Structured output's patterns: the automaton admits exactly the strings that std::regex
// (ECMAScript grammar, search semantics: JSON Schema's) finds a match in, over every string of a
// small alphabet up to length 5, for patterns covering each construct; length bounds cut that
// set exactly; and what the parser cannot enforce is refused by name.
#include "quench/engine/structured_output/string_pattern.h"

#include <gtest/gtest.h>

#include <random>
#include <regex>
#include <string>
#include <vector>

#include "quench/core/error.h"

namespace quench {
namespace {

// Every string over `alphabet` of length 0 to max_len.
std::vector<std::string> all_strings(const std::string& alphabet, size_t max_len) {
  std::vector<std::string> out = {""};
  size_t begin = 0;
  for (size_t len = 1; len <= max_len; ++len) {
    const size_t end = out.size();
    for (size_t i = begin; i < end; ++i) {
      for (char c : alphabet)
        out.push_back(out[i] + c);
    }
    begin = end;
  }
  return out;
}

const char* const kPatterns[] = {
    "^[a-c]+$",
    "ab|cd",
    "^(a|bc)*$",
    "a{2,3}",
    "^a{2,}b?$",
    "^[^ab]c$",
    "\\d+",
    "^\\w*\\s?$",
    "^(?:ab)+c{0,2}$",
    "b$",
    "^x.y$",
    "^[a-]+$",
    "^a+?b*?$",
    "^(a|b)(?<n>c)$",
    "^[\\d\\s]{1,3}$",
    "^\\D\\W?$",
    "a|^b|c$",
    "^$",
    "^(ab|a)(bc|c)$",
    "^[^\\d]{2}[.]$",
    "x\\.y",
    "^(a{0,2}b){2}$",
    "^\\x61\\u0062$",
    "^\\S+$",
    "^(|a)b$",
    "^a{0}$",
    "1{3}",
    "^[a\\-c]$",
};

TEST(StringPattern, MatchesAsStdRegexSearchDoes) {
  const std::vector<std::string> strings = all_strings("abcxy1 .-", 4);
  for (const char* pattern : kPatterns) {
    const auto compiled = StringPattern::compile(pattern, 0, -1);
    // std::regex has no named groups; a group's name does not change the language.
    std::string plain = pattern;
    if (const size_t named = plain.find("(?<n>"); named != std::string::npos)
      plain.replace(named, 5, "(?:");
    const std::regex reference(plain, std::regex::ECMAScript);
    for (const std::string& s : strings) {
      ASSERT_EQ(compiled->matches(s), std::regex_search(s, reference))
          << "pattern " << pattern << " on \"" << s << "\"";
    }
  }
}

TEST(StringPattern, LengthBoundsCutTheMatches) {
  const std::vector<std::string> strings = all_strings("abc1", 6);
  for (const char* pattern : {"^[a-c]+$", "a", "^(ab|c)*1?$", "^(a|bbbbb)$"}) {
    const std::regex reference(pattern, std::regex::ECMAScript);
    for (const auto& [min, max] :
         std::vector<std::pair<int64_t, int64_t>>{{0, 3}, {2, -1}, {1, 1}, {3, 5}}) {
      std::shared_ptr<const StringPattern> compiled;
      try {
        compiled = StringPattern::compile(pattern, min, max);
      } catch (const Error&) {
        continue;  // no string of those lengths: refused (checked below)
      }
      for (const std::string& s : strings) {
        const auto len = static_cast<int64_t>(s.size());
        const bool expected =
            std::regex_search(s, reference) && len >= min && (max < 0 || len <= max);
        ASSERT_EQ(compiled->matches(s), expected)
            << pattern << " [" << min << ", " << max << "] on \"" << s << "\"";
      }
    }
  }
  EXPECT_THROW(StringPattern::compile("^a{5}$", 0, 3), Error);
  EXPECT_THROW(StringPattern::compile("^(a|b)$", 2, -1), Error);
}

// can_finish and any_live agree with a search over the automaton's continuations: from every
// prefix of a small alphabet, a string can be finished iff some completion (within the length
// bound) matches.
TEST(StringPattern, CanFinishIsExact) {
  const std::string alphabet = "ab";
  const std::vector<std::string> strings = all_strings(alphabet, 7);
  for (const char* pattern : {"^(a|bbbb)+$", "^a{3}b*$", "^(ab){2,}$"}) {
    for (const auto& [min, max] :
         std::vector<std::pair<int64_t, int64_t>>{{0, 5}, {4, -1}, {2, 6}, {0, -1}}) {
      std::shared_ptr<const StringPattern> p;
      try {
        p = StringPattern::compile(pattern, min, max);
      } catch (const Error&) {
        continue;
      }
      for (const std::string& prefix : all_strings(alphabet, 4)) {
        StringPattern::State state = p->start();
        for (char c : prefix)
          state = p->step(state, static_cast<unsigned char>(c));
        // Completions of up to 7 characters suffice for these patterns and bounds.
        bool completes = false, extends = false;
        for (const std::string& s : strings) {
          if (s.rfind(prefix, 0) != 0 || !p->matches(s)) continue;
          completes = true;
          extends = extends || s.size() > prefix.size();
        }
        const auto chars = static_cast<int64_t>(prefix.size());
        EXPECT_EQ(p->can_finish(state, chars), completes)
            << pattern << " [" << min << ", " << max << "] after \"" << prefix << "\"";
        EXPECT_EQ(p->any_live(state, 'a', 'b', chars), extends)
            << pattern << " [" << min << ", " << max << "] after \"" << prefix << "\"";
      }
    }
  }
}

TEST(StringPattern, NonAsciiClassesAndDot) {
  const auto p = StringPattern::compile("^[\\u00e0-\\u00ff]\\.$", 0, -1);
  EXPECT_TRUE(p->matches("\xc3\xa9."));  // é
  EXPECT_FALSE(p->matches("e."));
  const auto dot = StringPattern::compile("^.{2}$", 0, -1);
  EXPECT_TRUE(dot->matches("\xf0\x9f\x98\x80x"));  // U+1F600 is one character
  EXPECT_FALSE(dot->matches("a\n"));               // '.' takes no line terminator
  const auto any = StringPattern::compile("^[^]$", 0, -1);
  EXPECT_TRUE(any->matches("\n"));
  const auto pair = StringPattern::compile("^\\ud83d\\ude00$", 0, -1);  // a surrogate pair
  EXPECT_TRUE(pair->matches("\xf0\x9f\x98\x80"));
  EXPECT_FALSE(StringPattern::compile("^\\w+$", 0, -1)->matches("caf\xc3\xa9"));  // \w is ASCII
}

void expect_refused(const char* pattern, const char* fragment) {
  try {
    StringPattern::compile(pattern, 0, -1);
    ADD_FAILURE() << "pattern " << pattern << " compiled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
        << pattern << ": " << e.what();
  }
}

TEST(StringPattern, RefusesWhatItCannotEnforceByName) {
  expect_refused("(?=a)b", "lookahead");
  expect_refused("(?<!a)b", "lookahead / lookbehind");
  expect_refused("(a)\\1", "backreferences");
  expect_refused("\\bword", "word boundaries");
  expect_refused("\\p{L}", "Unicode property");
  expect_refused("a**", "a quantifier after a quantifier");
  expect_refused("*a", "nothing to repeat");
  expect_refused("(a", "unterminated group");
  expect_refused("a)", "unbalanced ')'");
  expect_refused("[a", "unterminated class");
  expect_refused("x{5,2}", "m < n");
  expect_refused("a^b", "'^'");
  expect_refused("a$b", "'$'");
  expect_refused("(^a)", "'^' inside a group");
  expect_refused("a{1001}", "above 1000");
  expect_refused("[z-a]", "out of order");
  expect_refused("\\q", "\\q is unknown");
  expect_refused("[]", "admits no string");
  expect_refused("^(a{100}){100}$", "more than 4096");
  // 2^17 subsets of the last 17 positions: more states than the determinized automaton may have.
  expect_refused("^[ab]*a[ab]{16}$", "its automaton needs more than");
  EXPECT_NO_THROW(StringPattern::compile("^[ab]*a[ab]{10}$", 0, -1));
  // Every refusal names the offset and lists what is supported.
  expect_refused("ab(?=c)", "at offset 2; supported:");
}

// The nested-optional expansion keeps large bounded repetitions cheap, and long bounded
// strings stay exact.
TEST(StringPattern, LargeRepetitions) {
  const auto p = StringPattern::compile("^[a-z]{1,1000}$", 0, 300);
  EXPECT_TRUE(p->matches(std::string(300, 'q')));
  EXPECT_FALSE(p->matches(std::string(301, 'q')));
  EXPECT_FALSE(p->matches(""));
  std::mt19937 rng(5);
  std::string s;
  for (int i = 0; i < 200; ++i)
    s += static_cast<char>('a' + rng() % 26);
  EXPECT_TRUE(p->matches(s));
}

}  // namespace
}  // namespace quench
