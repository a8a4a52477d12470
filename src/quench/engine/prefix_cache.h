// Automatic prefix caching: every full KV page a sequence computes is indexed by a hash chained
// over all tokens up to its end (the page's tokens and its parent page's hash), so a later
// request whose tokens start the same way takes those pages instead of computing them again:
// a shared system prompt or the turns of a chat are prefilled once. An entry stays valid while
// its page keeps its contents: in use, or free but not yet handed out again (PageAllocator keeps
// the least recently freed pages longest). Entries keep their tokens and parent, and a lookup
// compares them, so a hash collision can never hand out another prefix's keys and values.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace quench {

class PrefixCache {
 public:
  static constexpr uint64_t kRootHash = 0x6a09e667f3bcc908ull;  // the parent of a first page

  static uint64_t hash_page(uint64_t parent, std::span<const int32_t> tokens);

  // The page holding exactly these tokens after this parent, if cached.
  std::optional<int32_t> find(uint64_t hash, uint64_t parent,
                              std::span<const int32_t> tokens) const;
  // Records that `page` holds `tokens` after `parent`; a hash already cached keeps its page.
  void insert(uint64_t hash, uint64_t parent, std::span<const int32_t> tokens, int32_t page);
  // `page` is about to hold other tokens: forget what it held.
  void erase_page(int32_t page);
  size_t size() const { return by_hash_.size(); }

 private:
  struct Entry {
    int32_t page = 0;
    uint64_t parent = 0;
    std::vector<int32_t> tokens;
  };
  std::unordered_map<uint64_t, Entry> by_hash_;
  std::unordered_map<int32_t, uint64_t> hash_of_page_;
};

}  // namespace quench
