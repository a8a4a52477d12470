#include "quench/engine/structured_output/json_token_masks.h"

#include <algorithm>
#include <climits>
#include <utility>

#include "quench/tokenizer/tokenizer.h"

namespace quench {

JsonTokenMasks::JsonTokenMasks(const Tokenizer& tokenizer, std::vector<int32_t> stop_ids)
    : stop_ids_(std::move(stop_ids)) {
  bytes_.resize(static_cast<size_t>(tokenizer.vocab_size()));
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    if (tokenizer.is_special(id)) continue;
    bytes_[static_cast<size_t>(id)] = tokenizer.token_bytes(id, true, true);
    if (!bytes_[static_cast<size_t>(id)].empty()) sorted_.push_back(id);
  }
  std::sort(sorted_.begin(), sorted_.end(), [&](int32_t a, int32_t b) {
    return bytes_[static_cast<size_t>(a)] < bytes_[static_cast<size_t>(b)];
  });
  shared_.assign(sorted_.size(), 0);
  for (size_t i = 1; i < sorted_.size(); ++i) {
    const std::string& a = bytes_[static_cast<size_t>(sorted_[i - 1])];
    const std::string& b = bytes_[static_cast<size_t>(sorted_[i])];
    size_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n])
      ++n;
    shared_[i] = static_cast<int32_t>(n);
  }
}

const std::vector<uint32_t>& JsonTokenMasks::allowed_bits(const JsonSchemaPrefix& prefix) {
  const std::string key = prefix.key();
  auto it = cache_.find(key);
  if (it != cache_.end()) return *it->second;
  auto mask = std::make_shared<std::vector<uint32_t>>((bytes_.size() + 31) / 32, 0u);
  // depth_states_[d]: the prefix after the first d bytes of the last token fed. refused: the
  // length of that token's refused start (none: INT32_MAX). shared: the bytes the current token
  // shares with that token (the least shared_ since, the tokens being sorted).
  if (depth_states_.empty()) depth_states_.assign(1, prefix);
  depth_states_[0] = prefix;
  int32_t refused = INT32_MAX, shared = 0;
  for (size_t i = 0; i < sorted_.size(); ++i) {
    const int32_t id = sorted_[i];
    const std::string& bytes = bytes_[static_cast<size_t>(id)];
    shared = std::min(shared, shared_[i]);
    if (shared >= refused) continue;  // starts with a refused start
    // The shared bytes were fed (a token is fed up to its refused start, and one that shares
    // that start was skipped above).
    int32_t d = shared;
    const auto length = static_cast<int32_t>(bytes.size());
    if (depth_states_.size() <= static_cast<size_t>(length))
      depth_states_.resize(static_cast<size_t>(length) + 1, prefix);
    refused = INT32_MAX;
    for (; d < length; ++d) {
      JsonSchemaPrefix& next = depth_states_[static_cast<size_t>(d) + 1];
      next = depth_states_[static_cast<size_t>(d)];
      if (!next.feed(std::string_view(bytes).substr(static_cast<size_t>(d), 1))) {
        refused = d + 1;
        break;
      }
    }
    shared = length;
    if (refused == INT32_MAX) (*mask)[static_cast<size_t>(id) / 32] |= 1u << (id % 32);
  }
  if (prefix.may_stop()) {
    for (int32_t id : stop_ids_) {
      if (id >= 0 && static_cast<size_t>(id) < bytes_.size())
        (*mask)[static_cast<size_t>(id) / 32] |= 1u << (id % 32);
    }
  }
  if (cache_.size() >= kMaxCached) cache_.clear();
  return *cache_.emplace(key, std::move(mask)).first->second;
}

}  // namespace quench
