#include "quench/engine/structured_output/grammar_steps.h"

#include <utility>

namespace quench {

int32_t GrammarSteps::start(const GrammarPrefix& start) {
  states_.clear(), next_.clear(), ids_.clear();
  key_bytes_ = 0;
  return intern(GrammarPrefix(start));
}

int32_t GrammarSteps::compute(std::span<int32_t> path, unsigned char c) {
  int32_t id = kRefused;
  GrammarPrefix next = states_[static_cast<size_t>(path.back())];
  if (next.feed_byte(c)) {
    key_.clear();
    next.append_key(key_);
    const auto it = ids_.find(key_);
    if (it != ids_.end()) {
      id = it->second;
    } else {
      if (states_.size() >= max_states_ || key_bytes_ + key_.size() > kMaxKeyBytes) keep_only(path);
      id = intern(std::move(next));
    }
  }
  next_[static_cast<size_t>(path.back()) * 256 + c] = id;
  return id;
}

int32_t GrammarSteps::intern(GrammarPrefix&& state) {
  key_.clear();
  state.append_key(key_);
  const auto [it, added] = ids_.emplace(key_, static_cast<int32_t>(states_.size()));
  if (!added) return it->second;
  key_bytes_ += key_.size();
  states_.push_back(std::move(state));
  next_.resize(next_.size() + 256, kUnknown);
  return it->second;
}

void GrammarSteps::keep_only(std::span<int32_t> path) {
  std::vector<GrammarPrefix> kept;
  kept.reserve(path.size());
  for (int32_t id : path)
    kept.push_back(states_[static_cast<size_t>(id)]);
  states_.clear(), next_.clear(), ids_.clear();
  key_bytes_ = 0;
  for (size_t i = 0; i < path.size(); ++i)
    path[i] = intern(std::move(kept[i]));
}

}  // namespace quench
