// Hands out KV-cache pages and counts their references, so that sequences sharing a prefix can
// share its pages: a page returns to the free list when its last holder releases it. A free page
// keeps its contents until it is handed out again, least recently freed first, so that the prefix
// cache (engine/prefix_cache.h) can take a freed page back with reclaim() while it is still intact.
// Page kNullPage (0) is reserved for padding and is never handed out, retained or released.
// Not thread-safe: the scheduler owns it.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

namespace quench {

class PageAllocator {
 public:
  // num_pages >= 2: page 0 is the null page, pages 1 .. num_pages-1 are allocatable.
  explicit PageAllocator(int32_t num_pages);

  // Takes n free pages (n >= 0), each with reference count 1: lowest ids first on a fresh
  // allocator, then the least recently freed. Throws, changing nothing, when fewer than n pages
  // are free.
  std::vector<int32_t> allocate(int32_t n);
  // Takes the free page `page` back (reference count 1), contents intact. Throws when it is
  // allocated (retain it instead) or out of range.
  void reclaim(int32_t page);
  // Adds a reference to an allocated page (a second sequence now uses it).
  void retain(int32_t page);
  // Drops a reference; the page becomes free when its count reaches 0.
  void release(int32_t page);

  int32_t num_pages() const { return static_cast<int32_t>(ref_counts_.size()); }
  int32_t free_pages() const { return static_cast<int32_t>(free_list_.size()); }
  // 0 for free pages and for the null page.
  int32_t ref_count(int32_t page) const;

 private:
  // Throws unless page is in [1, num_pages); `action` names the call in the message.
  void check_allocatable(int32_t page, const char* action) const;

  std::vector<int32_t> ref_counts_;  // [num_pages]
  std::deque<int32_t> free_list_;    // free page ids; the front is handed out first
};

}  // namespace quench
