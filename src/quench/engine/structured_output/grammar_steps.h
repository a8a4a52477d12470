// Structured output: a GrammarPrefix's states as a byte automaton, built as it is walked, for
// JsonTokenMasks' walk over the vocabulary. Fed a byte, a GrammarPrefix copies its stacks,
// expands the rules on top (inside a grammar's string, the '*' rule again for every character)
// and sorts what they become; a mask feeds every byte of every token, though from a few states
// only (inside a string, every character but the quote leads back to the same one). Here each
// state met (its stacks and its UTF-8 character under way, told apart by
// GrammarPrefix::append_key) is numbered once, and its successor by each byte is computed once by
// GrammarPrefix::feed_byte and then looked up: the same answers, each computed once per walk.
// At most max_states states (and kMaxKeyBytes of their keys) are held; where a new one would pass
// that, the table is emptied but for the states the walk still holds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "quench/engine/structured_output/grammar_prefix.h"

namespace quench {

class GrammarSteps {
 public:
  static constexpr int32_t kRefused = -1;
  static constexpr size_t kMaxStates = 4096;
  static constexpr size_t kMaxKeyBytes = size_t{8} << 20;

  explicit GrammarSteps(size_t max_states = kMaxStates) : max_states_(max_states) {}

  // Forgets every state (keeping the memory) and numbers `start` as the first: returns its id.
  int32_t start(const GrammarPrefix& start);
  // The state after byte c from path.back(), or kRefused. `path`: the states the caller still
  // holds (a walk's states by depth), renumbered in place where the table is emptied.
  int32_t step(std::span<int32_t> path, unsigned char c) {
    const int32_t next = next_[static_cast<size_t>(path.back()) * 256 + c];
    return next != kUnknown ? next : compute(path, c);
  }
  size_t size() const { return states_.size(); }

 private:
  static constexpr int32_t kUnknown = -2;
  int32_t compute(std::span<int32_t> path, unsigned char c);
  // Numbers `state`, new, whose key key_ holds.
  int32_t add(GrammarPrefix&& state);
  void clear();
  // Empties the table but for path's states, renumbered in place.
  void keep_only(std::span<int32_t> path);

  size_t max_states_;
  std::vector<GrammarPrefix> states_;             // by id
  std::vector<int32_t> next_;                     // [id * 256 + byte]: an id, kRefused or kUnknown
  std::unordered_map<std::string, int32_t> ids_;  // by GrammarPrefix::append_key
  size_t key_bytes_ = 0;                          // the keys' bytes in ids_
  std::string key_;                               // scratch
};

}  // namespace quench
