// Structured output: a string schema's "pattern" (regex_syntax.h) with its minLength / maxLength,
// compiled into an automaton over code points that JsonSchemaPrefix steps through a string
// value's decoded characters. The automaton is Glushkov's: a position per class of the expression
// (repetitions expanded), no empty moves, so a set of positions (a bit each, plus one bit for the
// end of the expression) is the whole state. Positions that cannot reach the end are removed, and
// with length bounds every state knows the lengths in which it can still reach the end: the
// recogniser admits a character only where the string can still be finished admissibly, so a
// structured request never writes itself into a dead end.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "quench/engine/structured_output/regex_syntax.h"

namespace quench {

class StringPattern {
 public:
  // A set of positions: bit i of word i / 64; bit positions() is the end.
  using States = std::vector<uint64_t>;
  // Expanded repetitions may make at most this many positions.
  static constexpr int32_t kMaxPositions = 4096;

  // Throws quench::Error for an unsupported or malformed pattern, one too large, or one that
  // admits no string of a length in [min_length, max_length] (max_length -1: no bound).
  static std::shared_ptr<const StringPattern> compile(const std::string& pattern,
                                                      int64_t min_length, int64_t max_length);

  int32_t positions() const { return positions_; }
  const States& start() const { return start_; }
  // The states after code point `cp` (none set where `cp` fits no position of `from`).
  void step(const States& from, uint32_t cp, States& to) const;
  // Whether a string in `states` after `chars` code points can still end admissibly: some state
  // reaches the end in l more code points with min_length <= chars + l <= max_length.
  bool can_finish(const States& states, int64_t chars) const;
  // Whether some code point in [lo, hi] takes `states` (after `chars` code points) to states that
  // can_finish: what a byte that leaves its character undecided (a UTF-8 lead, a \u digit) must
  // keep possible.
  bool any_live(const States& states, uint32_t lo, uint32_t hi, int64_t chars) const;
  // Whether the string may close here.
  bool may_end(const States& states, int64_t chars) const;
  // Whether the whole UTF-8 text is admitted (the pattern and the length bounds).
  bool matches(const std::string& utf8) const;

 private:
  friend class StringPatternBuilder;
  bool has(const States& s, int32_t bit) const { return (s[bit / 64] >> (bit % 64)) & 1; }
  bool reaches_end_within(int32_t element, int64_t lo, int64_t hi) const;

  int32_t positions_ = 0;
  std::vector<CodePointClass> classes_;  // per position
  std::vector<States> follow_;           // per position: the states after its code point
  States start_;
  int64_t min_length_ = 0;
  int64_t max_length_ = -1;
  bool bounded_ = false;  // a length bound: reaches_ is consulted
  // Per element (position, then the end): the lengths l in which it reaches the end, as runs
  // [first, last] up to horizon_ (past which no query looks).
  std::vector<std::vector<std::pair<int32_t, int32_t>>> reaches_;
  int64_t horizon_ = 0;
};

}  // namespace quench
