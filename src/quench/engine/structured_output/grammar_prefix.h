// Structured output: a byte-at-a-time recogniser of the prefixes of a Grammar's sentences. Its
// state is the set of stacks a pushdown recogniser may be in: each stack the grammar positions
// still to match, innermost on top, every top a character class (a rule on top is expanded into
// its alternatives at once, a finished alternative popped, a rule called last in its
// alternative replaces its caller: right recursion does not deepen the stack). A character
// keeps the stacks whose top admits it; the text may end where a stack is empty. UTF-8 is
// decoded as it comes (well-formed sequences only): a lead byte is admitted only where some top
// admits a character it may begin. The compiled grammar drops alternatives that cannot finish,
// so every stack kept can still end.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "quench/engine/structured_output/grammar.h"

namespace quench {

class GrammarPrefix {
 public:
  // A character that would need more stacks than kMaxStacks (a very ambiguous grammar), or a
  // stack deeper than kMaxDepth (nesting), is refused.
  static constexpr size_t kMaxStacks = 1024;
  static constexpr size_t kMaxDepth = 256;

  // Holds a reference: `grammar` must outlive the prefix.
  explicit GrammarPrefix(const Grammar& grammar);
  // False where the start itself passes the limits (rules nested deeper than kMaxDepth before the
  // first character, say): such a grammar is refused when it is compiled (JsonSchema::
  // text_grammar).
  bool started() const { return started_; }

  // False (the state is then unusable) where the byte leaves the grammar's prefixes.
  bool feed_byte(unsigned char c);
  // The text so far is a sentence (no character half-decoded).
  bool may_stop() const;
  // A sentence that nothing may extend.
  bool finished() const;
  // Appends what tells this state's continuations apart (for a mask cache key).
  void append_key(std::string& key) const;

 private:
  // Stacks being built for the next character: positions and ends as below, and one saved stack
  // per branching level of expand(). Kept per thread across characters, so that a step reuses
  // their memory (the prefix's own are reused where prefixes are assigned into one another).
  struct Scratch {
    std::vector<int32_t> positions;
    std::vector<uint32_t> ends;
    std::vector<int32_t> work;
    std::vector<std::vector<int32_t>> saved;
    std::vector<uint32_t> order;
  };
  static Scratch& scratch();
  // Moves the stack in `work` on until its top is a character class (or it is empty: the text
  // may end), each rule on top replaced by its alternatives, and appends what it becomes to
  // out's stacks. False where a limit is passed.
  bool expand(std::vector<int32_t>& work, size_t level, Scratch& out) const;
  // Makes out's stacks this prefix's, sorted and distinct.
  void adopt(Scratch& out);
  bool take(uint32_t cp);
  bool any_live(uint32_t lo, uint32_t hi) const;
  size_t stacks() const { return ends_.size(); }
  size_t stack_begin(size_t i) const { return i == 0 ? 0 : ends_[i - 1]; }

  const Grammar* grammar_;
  // The stacks, one after another, each bottom first: stack i is positions_[stack_begin(i) ..
  // ends_[i]); sorted and distinct (an empty stack, the text's end, sorts first).
  std::vector<int32_t> positions_;
  std::vector<uint32_t> ends_;
  uint32_t code_point_ = 0;  // a UTF-8 sequence's bits so far
  int utf8_left_ = 0;        // its bytes still to come
  uint32_t utf8_min_ = 0;    // the least code point its length may encode
  bool started_ = true;
};

}  // namespace quench
