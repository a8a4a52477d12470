// Structured output: a string schema's "pattern" (regex_syntax.h) with its minLength / maxLength,
// compiled into an automaton over code points that JsonSchemaPrefix steps through a string
// value's decoded characters. The construction is Glushkov's: a position per class of the
// expression (repetitions expanded), no empty moves; positions that cannot reach the end are
// removed, and the sets of positions are determinized at compile time, so the recogniser carries
// one state number and steps it by a table lookup. With length bounds every state knows the
// lengths in which it can still reach the end: the
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
  // A state of the automaton the recogniser carries (a set of positions, determinized at
  // compile time); kDead: no string goes on from here.
  using State = int32_t;
  static constexpr State kDead = -1;
  // Expanded repetitions may make at most this many positions, and the determinized automaton
  // at most kMaxStates states (kMaxTableEntries transitions).
  static constexpr int32_t kMaxPositions = 4096;
  static constexpr int32_t kMaxStates = 16384;
  static constexpr int64_t kMaxTableEntries = int64_t{1} << 22;

  // Throws quench::Error for an unsupported or malformed pattern, one too large, or one that
  // admits no string of a length in [min_length, max_length] (max_length -1: no bound).
  // full_match: parse_regex's (the whole text must match, not a part of it).
  static std::shared_ptr<const StringPattern> compile(const std::string& pattern,
                                                      int64_t min_length, int64_t max_length,
                                                      bool full_match = false);

  State start() const { return start_; }
  // Whether the length bounds matter (else a string's length is never consulted, and a prefix
  // need not count its characters).
  bool bounded() const { return bounded_; }
  int32_t states() const { return static_cast<int32_t>(accepting_.size()); }
  // The state after code point `cp` (kDead where no string of the pattern goes on with it).
  State step(State s, uint32_t cp) const {
    return s == kDead ? kDead : table_[static_cast<size_t>(s) * atoms() + atom_of(cp)];
  }
  // Whether a string in state `s` after `chars` code points can still end admissibly: it
  // reaches the end in l more code points with min_length <= chars + l <= max_length.
  bool can_finish(State s, int64_t chars) const;
  // Whether some code point in [lo, hi] takes `s` (after `chars` code points) to a state that
  // can_finish: what a byte that leaves its character undecided (a UTF-8 lead, a \u digit) must
  // keep possible.
  bool any_live(State s, uint32_t lo, uint32_t hi, int64_t chars) const;
  // Whether the string may close here.
  bool may_end(State s, int64_t chars) const;
  // Whether the whole UTF-8 text is admitted (the pattern and the length bounds).
  bool matches(const std::string& utf8) const;
  // The first code point of each atom (a range of code points every step treats alike), for
  // automata built over several patterns (key_automaton.h).
  const std::vector<uint32_t>& atom_starts() const { return atom_starts_; }

 private:
  friend class StringPatternBuilder;
  // Construction works on sets of positions (bit i of word i / 64; bit positions_ is the end).
  using Positions = std::vector<uint64_t>;
  bool has(const Positions& s, int32_t bit) const { return (s[bit / 64] >> (bit % 64)) & 1; }
  void step_positions(const Positions& from, uint32_t cp, Positions& to) const;
  void determinize(const std::string& pattern);
  size_t atoms() const { return atom_starts_.size(); }
  size_t atom_of(uint32_t cp) const;

  // The position automaton (construction only).
  int32_t positions_ = 0;
  std::vector<CodePointClass> classes_;  // per position
  std::vector<Positions> follow_;        // per position: the positions after its code point
  Positions start_positions_;
  // Per element (position, then the end): the lengths l in which it reaches the end, as runs
  // [first, last] up to horizon_ (past which no query looks); with length bounds only.
  std::vector<std::vector<std::pair<int32_t, int32_t>>> reaches_;

  // The determinized automaton. Code points fall into atoms, ranges on which every class
  // agrees: atom i is [atom_starts_[i], atom_starts_[i + 1]) (the last up to U+10FFFF).
  std::vector<uint32_t> atom_starts_;
  std::vector<int32_t> ascii_atoms_;  // atom_of for code points below 128
  std::vector<State> table_;          // [state][atom] -> state
  std::vector<char> accepting_;       // per state: the end is in its set
  // Per state: the runs of lengths in which it reaches the end (the union of its positions').
  std::vector<std::vector<std::pair<int32_t, int32_t>>> state_reaches_;
  State start_ = kDead;
  int64_t min_length_ = 0;
  int64_t max_length_ = -1;
  bool bounded_ = false;  // a length bound: state_reaches_ is consulted
  int64_t horizon_ = 0;
};

}  // namespace quench
