#include "quench/engine/prefix_cache.h"

#include <algorithm>

namespace quench {
namespace {

uint64_t mix(uint64_t x) {  // SplitMix64's finalizer
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t PrefixCache::hash_page(uint64_t parent, std::span<const int32_t> tokens) {
  uint64_t h = mix(parent);
  for (int32_t t : tokens)
    h = mix(h ^ (static_cast<uint64_t>(static_cast<uint32_t>(t)) + 0x9E3779B97F4A7C15ull));
  return h;
}

std::optional<int32_t> PrefixCache::find(uint64_t hash, uint64_t parent,
                                         std::span<const int32_t> tokens) const {
  const auto it = by_hash_.find(hash);
  if (it == by_hash_.end() || it->second.parent != parent ||
      !std::equal(tokens.begin(), tokens.end(), it->second.tokens.begin(),
                  it->second.tokens.end())) {
    return std::nullopt;
  }
  return it->second.page;
}

void PrefixCache::insert(uint64_t hash, uint64_t parent, std::span<const int32_t> tokens,
                         int32_t page) {
  if (by_hash_.count(hash) != 0 || hash_of_page_.count(page) != 0) return;
  by_hash_.emplace(hash, Entry{page, parent, std::vector<int32_t>(tokens.begin(), tokens.end())});
  hash_of_page_.emplace(page, hash);
}

void PrefixCache::erase_page(int32_t page) {
  const auto it = hash_of_page_.find(page);
  if (it == hash_of_page_.end()) return;
  by_hash_.erase(it->second);
  hash_of_page_.erase(it);
}

}  // namespace quench
