#include "quench/engine/structured_output/grammar_steps.h"

#include <utility>

namespace quench {

int32_t GrammarSteps::start(const GrammarPrefix& start) {
  clear();
  key_.clear();
  start.append_key(key_);
  return add(GrammarPrefix(start));
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
      if (states_.size() >= max_states_ || key_bytes_ + key_.size() > kMaxKeyBytes) {
        keep_only(path);
        key_.clear();  // keep_only used it
        next.append_key(key_);
      }
      id = add(std::move(next));
    }
  }
  next_[static_cast<size_t>(path.back()) * 256 + c] = id;
  return id;
}

int32_t GrammarSteps::add(GrammarPrefix&& state) {
  const auto id = static_cast<int32_t>(states_.size());
  ids_.emplace(key_, id);
  key_bytes_ += key_.size();
  states_.push_back(std::move(state));
  next_.resize(next_.size() + 256, kUnknown);
  return id;
}

void GrammarSteps::clear() {
  states_.clear(), next_.clear(), ids_.clear();
  key_bytes_ = 0;
}

void GrammarSteps::keep_only(std::span<int32_t> path) {
  std::vector<GrammarPrefix> kept;
  kept.reserve(path.size());
  for (int32_t id : path)
    kept.push_back(states_[static_cast<size_t>(id)]);
  clear();
  for (size_t i = 0; i < path.size(); ++i) {
    key_.clear();
    kept[i].append_key(key_);
    // A path may hold one state twice (a byte that leads back to its own state).
    const auto it = ids_.find(key_);
    path[i] = it != ids_.end() ? it->second : add(std::move(kept[i]));
  }
}

}  // namespace quench
