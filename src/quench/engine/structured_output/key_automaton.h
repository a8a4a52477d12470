// Structured output: what an object's unlisted keys may be and which schema their values follow,
// for objects with patternProperties or propertyNames. One automaton over a key's code points,
// built at compile time as the product of
//   - each patternProperties pattern (search semantics: a key matches where the pattern occurs
//     in it),
//   - each of propertyNames' patterns (pattern, format, enum / const as an alternation of
//     literals), all of which every key must match,
//   - a count of the key's code points up to propertyNames' minLength / maxLength,
// so that the recogniser carries one state number per key. A key that ends in a state gets that
// state's outcome: the value's node (additionalProperties' where no pattern matched, else the
// merge of the matching patterns' schemas), or none (the key may not appear). States from which
// no key reaches an outcome are removed, and each state knows how many keys (capped) still reach
// one: that count lets the recogniser refuse a byte whose only completions are listed properties,
// which are not unlisted keys (JsonSchemaPrefix::feed_automaton_key).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "quench/engine/structured_output/string_pattern.h"

namespace quench {

class KeyAutomaton {
 public:
  using State = int32_t;
  static constexpr State kDead = -1;
  // Completions are counted up to this (more than the 64 properties an object may list).
  static constexpr int64_t kCountCap = 1 << 16;

  struct Spec {
    // patternProperties' patterns, in order (bit i of a match set is pattern i); at most 16.
    std::vector<std::shared_ptr<const StringPattern>> patterns;
    // propertyNames' patterns, every one of which a key must match.
    std::vector<std::shared_ptr<const StringPattern>> names;
    int64_t min_length = 0;   // propertyNames' minLength
    int64_t max_length = -1;  // propertyNames' maxLength; -1: none
    // The value's node of a key that ends with the patterns of `matched` matching it (0: none
    // matched), or JsonSchema::kNoNode where such a key may not appear. Called once per set
    // that some key reaches.
    std::function<int32_t(uint64_t matched)> outcome;
    // The object's listed properties, decoded (UTF-8): keys that follow their own schemas.
    std::vector<std::string> listed;
  };
  static constexpr size_t kMaxPatterns = 16;

  // Throws quench::Error (naming `path`) where the product grows past StringPattern's limits.
  static std::shared_ptr<const KeyAutomaton> build(const Spec& spec, const std::string& path);

  State start() const { return start_; }
  State step(State s, uint32_t cp) const {
    return s == kDead ? kDead : table_[static_cast<size_t>(s) * atoms() + atom_of(cp)];
  }
  // The value's node for a key that ends in `s`; JsonSchema::kNoNode: none may.
  int32_t outcome(State s) const;
  // How many keys (code-point strings) go on from `s` to an outcome, capped at kCountCap.
  int64_t completions(State s) const {
    return s == kDead ? 0 : completions_[static_cast<size_t>(s)];
  }
  // The same for the keys that go on from `s` with a code point in [lo, hi] (Unicode scalar
  // values only), capped at kCountCap.
  int64_t completions_via(State s, uint32_t lo, uint32_t hi) const;
  // The outcome of a whole key (UTF-8); JsonSchema::kNoNode where it reaches none.
  int32_t outcome_of(const std::string& key) const;
  // Bit i: listed property i's name reaches an outcome as a key (the count of a state includes
  // it, so the recogniser subtracts it).
  uint64_t listed_reaching() const { return listed_reaching_; }
  // Whether some key that is not a listed property reaches an outcome.
  bool unlisted_keys() const { return unlisted_keys_; }
  // Every key (UTF-8) that reaches an outcome, in code-point order, where there are at most
  // `limit` of them; empty otherwise. An object whose keys are so few lists them as properties
  // instead, so that the recogniser keeps each to one appearance.
  std::vector<std::string> finite_keys(int64_t limit) const;

 private:
  size_t atoms() const { return atom_starts_.size(); }
  size_t atom_of(uint32_t cp) const;
  // Code points of atom a that a key can hold (its scalar values: no surrogates).
  int64_t atom_size(size_t a) const;

  std::vector<uint32_t> atom_starts_;  // as StringPattern's: every component agrees on an atom
  std::vector<int32_t> ascii_atoms_;
  std::vector<State> table_;  // [state][atom]
  std::vector<int32_t> outcomes_;
  std::vector<int64_t> completions_;
  State start_ = kDead;
  uint64_t listed_reaching_ = 0;
  bool unlisted_keys_ = false;
};

}  // namespace quench
