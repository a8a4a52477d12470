// Structured output: a context-free grammar in GBNF, the grammar format of llama.cpp (vLLM's
// guided_grammar takes it too), that the whole output must be a sentence of:
//   root   ::= "{" ws pair ("," ws pair)* "}"     # rules; the one named root is the output
//   pair   ::= [a-z]+ ":" ws value
//   value  ::= [0-9]+ | "\"" [^"\\]* "\"" | ( "true" | "false" )
//   ws     ::= [ \t\n]{0,4}
// Literals ("..." with \n \r \t \\ \" \xHH \uHHHH \UHHHHHHHH), classes ([...] with ranges and ^,
// the same escapes), '.' (any character), rule names, groups, alternation, the repetitions
// * + ? {m} {m,} {m,n}, and # comments. A rule ends where the next one starts (NAME ::=).
// Compiled into one array of elements, each alternative a run of them closed by an end marker,
// so that the recogniser (grammar_prefix.h) names a place in the grammar by one index; a
// repetition becomes a rule of its own (right-recursive, so a long list does not deepen the
// recogniser's stacks). Refused with quench::Error, by name: undefined rules, left recursion
// (the recogniser would expand it forever), repeating what may match the empty text, a grammar
// without root or that admits no text. Alternatives that cannot finish (a rule that never
// derives a finite text, an empty class) are dropped, so that every place the recogniser
// reaches can still finish.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "quench/engine/structured_output/regex_syntax.h"

namespace quench {

class Grammar {
 public:
  enum class Kind : uint8_t {
    kChars,  // one code point of `chars`
    kRule,   // a sentence of rule `rule`
    kEnd,    // the end of an alternative
  };
  struct Element {
    Kind kind = Kind::kEnd;
    int32_t rule = -1;
    CodePointClass chars;
  };
  // Repetition bounds above this are refused (each repetition is a copy).
  static constexpr int32_t kMaxRepeat = 1000;
  // Groups nest at most this deep, and a grammar has at most kMaxElements elements.
  static constexpr int kMaxNesting = 64;
  static constexpr size_t kMaxElements = size_t{1} << 20;

  // Throws quench::Error naming the problem and where (the rule, or the line and column).
  static std::shared_ptr<const Grammar> compile(const std::string& text);

  const Element& element(int32_t position) const {
    return elements_[static_cast<size_t>(position)];
  }
  // The first positions of rule r's alternatives.
  const std::vector<int32_t>& alternatives(int32_t rule) const {
    return alternatives_[static_cast<size_t>(rule)];
  }
  int32_t root() const { return root_; }

 private:
  friend class GrammarCompiler;
  std::vector<Element> elements_;
  std::vector<std::vector<int32_t>> alternatives_;  // per rule
  int32_t root_ = -1;
};

}  // namespace quench
