#include "quench/kv_cache/page_allocator.h"

#include "quench/core/error.h"
#include "quench/kv_cache/kv_cache_layout.h"

namespace quench {

PageAllocator::PageAllocator(int32_t num_pages) {
  QUENCH_REQUIRE(num_pages >= 2, "PageAllocator: num_pages ", num_pages,
                 " must be >= 2 (page 0 is the reserved null page)");
  ref_counts_.assign(static_cast<size_t>(num_pages), 0);
  for (int32_t page = kNullPage + 1; page < num_pages; ++page)
    free_list_.push_back(page);
}

std::vector<int32_t> PageAllocator::allocate(int32_t n) {
  QUENCH_REQUIRE(n >= 0, "PageAllocator::allocate: requested ", n, " pages; must be >= 0");
  QUENCH_REQUIRE(n <= free_pages(), "PageAllocator::allocate: requested ", n, " pages but only ",
                 free_pages(), " of ", num_pages() - 1, " allocatable pages are free");
  std::vector<int32_t> pages;
  pages.reserve(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    const int32_t page = free_list_.front();
    free_list_.pop_front();
    ref_counts_[static_cast<size_t>(page)] = 1;
    pages.push_back(page);
  }
  return pages;
}

void PageAllocator::retain(int32_t page) {
  check_allocatable(page, "retain");
  int32_t& count = ref_counts_[static_cast<size_t>(page)];
  QUENCH_REQUIRE(count > 0, "PageAllocator::retain: page ", page,
                 " is free; only allocated pages can be retained");
  ++count;
}

void PageAllocator::release(int32_t page) {
  check_allocatable(page, "release");
  int32_t& count = ref_counts_[static_cast<size_t>(page)];
  QUENCH_REQUIRE(count > 0, "PageAllocator::release: page ", page,
                 " is already free; only allocated pages can be released");
  if (--count == 0) free_list_.push_back(page);
}

void PageAllocator::reclaim(int32_t page) {
  check_allocatable(page, "reclaim");
  int32_t& count = ref_counts_[static_cast<size_t>(page)];
  QUENCH_REQUIRE(count == 0, "PageAllocator::reclaim: page ", page,
                 " is allocated; only free pages can be reclaimed (retain an allocated one)");
  // Linear in the free pages: a reclaim happens once per reused page of a prompt, next to the
  // model step that the page saves.
  for (auto it = free_list_.begin(); it != free_list_.end(); ++it) {
    if (*it == page) {
      free_list_.erase(it);
      break;
    }
  }
  count = 1;
}

int32_t PageAllocator::ref_count(int32_t page) const {
  QUENCH_REQUIRE(page >= 0 && page < num_pages(), "PageAllocator::ref_count: page ", page,
                 " is out of range; valid pages: [0, ", num_pages(), ")");
  return ref_counts_[static_cast<size_t>(page)];
}

void PageAllocator::check_allocatable(int32_t page, const char* action) const {
  QUENCH_REQUIRE(page != kNullPage, "PageAllocator::", action,
                 ": page 0 is the reserved null page; valid pages: [1, ", num_pages(), ")");
  QUENCH_REQUIRE(page > kNullPage && page < num_pages(), "PageAllocator::", action, ": page ", page,
                 " is out of range; valid pages: [1, ", num_pages(), ")");
}

}  // namespace quench
