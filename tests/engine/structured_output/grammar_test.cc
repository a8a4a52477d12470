// Structured output over a GBNF grammar (guided_grammar; grammar.h, grammar_prefix.h): on every
// string up to a length over a small alphabet, the recogniser accepts exactly the prefixes of the
// language and may stop exactly on its sentences, checked against oracles written here (a regular
// grammar against std::regex, balanced parentheses, arithmetic expressions by recursive descent);
// no accepted prefix is a dead end; the syntax (escapes, classes, '.', counts, comments, rules
// over several lines, UTF-8); refusals by name; the vocabulary masks; and engine requests that
// end on a sentence.
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "harness/structured_output_checks.h"
#include "harness/tiny_engine.h"
#include "quench/core/error.h"
#include "quench/engine/llm_engine.h"
#include "quench/engine/structured_output/json_schema_prefix.h"
#include "quench/engine/structured_output/json_token_masks.h"

namespace quench {
namespace {

// Every string of length 0..max_length over `alphabet`.
std::vector<std::string> strings_up_to(const std::string& alphabet, size_t max_length) {
  std::vector<std::string> out = {""};
  for (size_t begin = 0; out[begin].size() < max_length;) {
    const size_t end = out.size();
    for (size_t i = begin; i < end; ++i)
      for (char c : alphabet)
        out.push_back(out[i] + c);
    begin = end;
  }
  return out;
}

struct Verdict {
  bool fed = false;       // every byte accepted
  bool may_stop = false;  // and the text is a sentence
};

Verdict run(const JsonSchema& grammar, const std::string& text) {
  JsonSchemaPrefix p(grammar);
  Verdict v;
  v.fed = p.feed(text);
  v.may_stop = v.fed && (p.may_stop() || p.complete());
  return v;
}

// On every string up to max_length: may_stop exactly on sentences (`member`), accepted exactly on
// prefixes of sentences (`prefix`, where given), and no accepted prefix without a next byte in the
// alphabet or a stop (the alphabet must hold every character of the language).
void expect_matches_oracle(const std::string& gbnf, const std::string& alphabet, size_t max_length,
                           const std::function<bool(const std::string&)>& member,
                           const std::function<bool(const std::string&)>& prefix) {
  const auto g = JsonSchema::text_grammar(gbnf);
  int sentences = 0, refused = 0;
  for (const std::string& text : strings_up_to(alphabet, max_length)) {
    const Verdict v = run(*g, text);
    EXPECT_EQ(v.may_stop, member(text)) << gbnf << " on \"" << text << "\"";
    if (prefix) {
      EXPECT_EQ(v.fed, prefix(text)) << gbnf << " on prefix \"" << text << "\"";
    }
    sentences += v.may_stop ? 1 : 0;
    refused += v.fed ? 0 : 1;
    if (!v.fed || v.may_stop) continue;
    bool goes_on = false;
    for (char c : alphabet)
      goes_on = goes_on || run(*g, text + c).fed;
    EXPECT_TRUE(goes_on) << gbnf << ": \"" << text << "\" is a dead end";
  }
  EXPECT_GT(sentences, 0) << gbnf;
  EXPECT_GT(refused, 0) << gbnf;
}

TEST(Grammar, ARegularGrammarAgreesWithItsRegex) {
  const std::regex whole("(a|bc*)+d?");
  expect_matches_oracle(
      "root ::= item+ \"d\"?\nitem ::= \"a\" | \"b\" \"c\"*", "abcd", 7,
      [&](const std::string& s) { return std::regex_match(s, whole); },
      // A prefix: empty, or a sentence, or a sentence's prefix before its 'd' ends it.
      [&](const std::string& s) { return s.empty() || std::regex_match(s, whole); });
}

TEST(Grammar, BalancedParenthesesAreContextFree) {
  auto depths = [](const std::string& s, bool whole) {
    int depth = 0;
    for (char c : s) {
      if (c == '[') return false;
      depth += c == '(' ? 1 : -1;
      if (depth < 0) return false;
    }
    return !whole || depth == 0;
  };
  // The '[' alternative never finishes, so it is dropped: no '[' is ever accepted.
  expect_matches_oracle(
      "root ::= pair*\npair ::= \"(\" root \")\" | \"[\" never\nnever ::= \"[\" never", "()[", 9,
      [&](const std::string& s) { return depths(s, true); },
      [&](const std::string& s) { return depths(s, false); });
}

// expr ::= term ("+" term)*, term ::= digits | "(" expr ")", by recursive descent.
bool parse_expr(const std::string& s, size_t& i);
bool parse_term(const std::string& s, size_t& i) {
  if (i < s.size() && s[i] == '(') {
    ++i;
    if (!parse_expr(s, i) || i >= s.size() || s[i] != ')') return false;
    ++i;
    return true;
  }
  const size_t start = i;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9')
    ++i;
  return i > start;
}
bool parse_expr(const std::string& s, size_t& i) {
  if (!parse_term(s, i)) return false;
  while (i < s.size() && s[i] == '+') {
    ++i;
    if (!parse_term(s, i)) return false;
  }
  return true;
}

TEST(Grammar, ArithmeticAgreesWithRecursiveDescent) {
  expect_matches_oracle(
      R"g(root ::= expr
         expr ::= term ("+" term)*
         term ::= [0-9]+ | "(" expr ")")g",
      "1+()", 7,
      [](const std::string& s) {
        size_t i = 0;
        return parse_expr(s, i) && i == s.size();
      },
      nullptr);
}

TEST(Grammar, SyntaxEscapesClassesCountsAndComments) {
  const auto g = JsonSchema::text_grammar(R"(# a comment line
root ::= "é" [^a-z\n]{ 1, 2 } "\x41\u00e9" tail  # after a rule
tail ::=
    "\"" . "\\"
  | [\]\-]
)");
  auto sentence = [&](const std::string& text) { return run(*g, text).may_stop; };
  EXPECT_TRUE(
      sentence("\xc3\xa9"
               "1"
               "A\xc3\xa9"
               "]"));
  EXPECT_TRUE(
      sentence("\xc3\xa9"
               "12"
               "A\xc3\xa9"
               "-"));
  EXPECT_TRUE(
      sentence("\xc3\xa9"
               "Z"
               "A\xc3\xa9"
               "\"\xe2\x82\xac\\"));  // '.' is any character
  EXPECT_FALSE(
      sentence("\xc3\xa9"
               "123"
               "A\xc3\xa9"
               "-"));  // {1,2}
  EXPECT_FALSE(
      sentence("\xc3\xa9"
               "a"
               "A\xc3\xa9"
               "-"));  // [^a-z\n]
  EXPECT_FALSE(
      sentence("\xc3\xa9"
               "\n"
               "A\xc3\xa9"
               "-"));
  // UTF-8: a lead byte only where a character it may begin fits; malformed sequences never.
  JsonSchemaPrefix p(*g);
  EXPECT_FALSE(p.feed("\xc3\xa8"));  // è is not é
  for (const char* malformed : {"\xc0\x80", "\xe0\x80\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80"}) {
    JsonSchemaPrefix q(*g);  // overlong forms, a surrogate, past U+10FFFF
    EXPECT_FALSE(q.feed(std::string("\xc3\xa9") + malformed)) << malformed;
  }
  // Complete where nothing may follow: the stop is not needed.
  JsonSchemaPrefix r(*g);
  EXPECT_TRUE(
      r.feed("\xc3\xa9"
             "1"
             "A\xc3\xa9"
             "]"));
  EXPECT_TRUE(r.complete());
}

TEST(Grammar, LongListsDoNotDeepenTheStacks) {
  // A 5000-item list through '*' and through right recursion both stay within the stack limit.
  for (const char* gbnf : {"root ::= (\"a\" \",\")* \"z\"", "root ::= \"a\" \",\" root | \"z\""}) {
    const auto g = JsonSchema::text_grammar(gbnf);
    std::string text;
    for (int i = 0; i < 5000; ++i)
      text += "a,";
    JsonSchemaPrefix p(*g);
    EXPECT_TRUE(p.feed(text + "z")) << gbnf;
    EXPECT_TRUE(p.complete()) << gbnf;
  }
}

TEST(Grammar, RefusesWhatItCannotRecogniseByName) {
  auto expect_error = [](const std::string& gbnf, const std::string& needle) {
    try {
      JsonSchema::text_grammar(gbnf);
      ADD_FAILURE() << gbnf << " compiled";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error("root ::= item", "rule 'item' is used but not defined");
  expect_error("start ::= \"a\"", "no rule named 'root'");
  expect_error("root ::= root \"+\" \"1\" | \"1\"", "rule 'root' is left-recursive");
  expect_error("root ::= (\"a\"?)*", "repeats something that may match the empty text");
  expect_error("root ::= \"a\\q\"", "unknown escape '\\q'");
  expect_error("root ::= \"abc", "line 1, column 10: unterminated literal");
  expect_error("root ::= r\nr ::= \"a\" r", "rule 'root' admits no text");
  expect_error("root ::= \"a\"{3,2}", "max < min");
  expect_error("root ::= \"a\"\nroot ::= \"b\"", "defined twice");
  expect_error("root ::= [z-a]", "runs backwards");
}

TEST(Grammar, HostileTextsAreRefusedNotCrashed) {
  // Nesting and expansion that would exhaust the stack or the memory are refused by name.
  auto refused = [](const std::string& gbnf, const std::string& needle) {
    try {
      JsonSchema::text_grammar(gbnf);
      return false;
    } catch (const Error& e) {
      return std::string(e.what()).find(needle) != std::string::npos;
    }
  };
  EXPECT_TRUE(refused("root ::= " + std::string(100000, '(') + "\"a\"", "groups nest deeper"));
  std::string counts = "root ::= \"a\"";
  for (int i = 0; i < 2000; ++i)
    counts += " \"b\"{1000}";
  EXPECT_TRUE(refused(counts, "repetitions expand to more than"));
  // A long chain of rules, each starting with the next: no recursion in the checks, and a start
  // nested deeper than the recogniser's limit is refused when the grammar is compiled.
  std::string chain;
  for (int i = 0; i < 20000; ++i) {
    chain += str_cat("r", i, " ::= r", i + 1, " | \"x\"\n");
  }
  chain += "r20000 ::= \"y\"\nroot ::= r0\n";
  EXPECT_TRUE(refused(chain, "nests rules deeper than 256"));
  // Random texts: each compiles or is refused with quench::Error, and random bytes fed to what
  // compiles are taken or refused.
  std::mt19937 rng(5);
  const std::string pieces[] = {"root",   " ::= ", "a", "|",    "(",   ")",    "\"x\"",
                                "[a-c]",  "*",     "+", "?",    "{2}", "{1,}", "\n",
                                "b ::= ", "b",     ".", "[^z]", "#c\n"};
  int compiled = 0;
  for (int t = 0; t < 2000; ++t) {
    std::string text = "root ::= ";
    const int n = 1 + static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i)
      text += pieces[rng() % std::size(pieces)];
    std::shared_ptr<const JsonSchema> grammar;
    try {
      grammar = JsonSchema::text_grammar(text);
    } catch (const Error&) {
      continue;
    }
    ++compiled;
    JsonSchemaPrefix prefix(*grammar);
    for (int i = 0; i < 16; ++i) {
      const char byte = "abcxz()\xc3\xa9"[rng() % 9];
      if (!prefix.feed(std::string_view(&byte, 1))) break;
    }
  }
  EXPECT_GT(compiled, 100);
}

TEST(Grammar, MasksFollowThePrefixAndRequestsEndOnASentence) {
  LlmEngine engine(testing_support::tiny_engine_options(
      testing_support::tiny_model_dir("quench_grammar_test", "engine")));
  const Tokenizer& tokenizer = *engine.tokenizer();
  const std::vector<int32_t>& stops = engine.eos_token_ids();
  JsonTokenMasks masks(tokenizer, stops);
  const std::string gbnf = R"g(root ::= "(" list ")"
list ::= item ("," item){0,3}
item ::= [0-9]{1,2} | "(" [0-9] ")")g";
  const auto g = JsonSchema::text_grammar(gbnf);
  for (const std::string text : {"", "(", "(1", "(12,(3", "(1,2"}) {
    JsonSchemaPrefix prefix(*g);
    ASSERT_TRUE(prefix.feed(text)) << text;
    testing_support::expect_mask_follows_prefix(tokenizer, masks, prefix, stops, text);
  }
  SamplingParams params = testing_support::greedy(96);
  params.text_pattern = g;
  for (const auto& [text, finish] :
       testing_support::greedy_and_sampled_outputs(engine, params, 9)) {
    EXPECT_EQ(finish, FinishReason::kStop) << text;
    EXPECT_TRUE(run(*g, text).may_stop) << text;
  }
}

}  // namespace
}  // namespace quench
