#include "quench/kv_cache/page_allocator.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "harness/expect_error.h"

namespace quench {
namespace {

TEST(PageAllocator, NeverHandsOutTheNullPage) {
  PageAllocator allocator(5);
  EXPECT_EQ(allocator.num_pages(), 5);
  EXPECT_EQ(allocator.free_pages(), 4);
  const std::vector<int32_t> pages = allocator.allocate(4);
  EXPECT_EQ(pages, (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(allocator.free_pages(), 0);
  EXPECT_EQ(allocator.ref_count(0), 0);
  for (int32_t page : pages)
    EXPECT_EQ(allocator.ref_count(page), 1);
}

TEST(PageAllocator, RefCountsKeepSharedPagesAlive) {
  PageAllocator allocator(8);
  const std::vector<int32_t> prefix = allocator.allocate(3);
  EXPECT_EQ(allocator.free_pages(), 4);
  // A second sequence shares the prefix.
  for (int32_t page : prefix)
    allocator.retain(page);
  EXPECT_EQ(allocator.ref_count(prefix[0]), 2);
  // The first sequence finishes: pages stay allocated.
  for (int32_t page : prefix)
    allocator.release(page);
  EXPECT_EQ(allocator.ref_count(prefix[1]), 1);
  EXPECT_EQ(allocator.free_pages(), 4);
  // The second finishes: pages return and are handed out again.
  for (int32_t page : prefix)
    allocator.release(page);
  EXPECT_EQ(allocator.free_pages(), 7);
  EXPECT_EQ(allocator.ref_count(prefix[2]), 0);
  std::vector<int32_t> all = allocator.allocate(7);
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, (std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7}));
  EXPECT_TRUE(allocator.allocate(0).empty());
}

TEST(PageAllocator, FreedPagesWaitLongestFirstAndCanBeReclaimed) {
  PageAllocator allocator(6);
  const std::vector<int32_t> a = allocator.allocate(3);  // 1 2 3
  allocator.release(a[1]);
  allocator.release(a[0]);
  // Pages 4 and 5 were never used, then 2 and 1 in the order they were freed.
  EXPECT_EQ(allocator.allocate(3), (std::vector<int32_t>{4, 5, 2}));
  allocator.reclaim(1);  // freed, still intact: taken back for a cached prefix
  EXPECT_EQ(allocator.ref_count(1), 1);
  EXPECT_EQ(allocator.free_pages(), 0);
  EXPECT_QUENCH_ERROR(allocator.reclaim(3), {"reclaim", "page 3 is allocated"});
  EXPECT_QUENCH_ERROR(allocator.reclaim(0), {"reclaim", "null page"});
}

TEST(PageAllocator, FailedAllocationChangesNothing) {
  PageAllocator allocator(4);
  allocator.allocate(1);
  EXPECT_QUENCH_ERROR(allocator.allocate(3),
                      {"requested 3 pages", "only 2 of 3 allocatable pages are free"});
  EXPECT_EQ(allocator.free_pages(), 2);
  EXPECT_QUENCH_ERROR(allocator.allocate(-1), {"requested -1 pages", ">= 0"});
}

TEST(PageAllocator, ErrorPathsNameThePageAndTheValidRange) {
  EXPECT_QUENCH_ERROR(PageAllocator allocator(1), {"num_pages 1", ">= 2", "null page"});
  PageAllocator allocator(4);
  const int32_t page = allocator.allocate(1)[0];
  EXPECT_QUENCH_ERROR(allocator.retain(0), {"retain", "page 0", "null page", "[1, 4)"});
  EXPECT_QUENCH_ERROR(allocator.release(0), {"release", "page 0", "null page", "[1, 4)"});
  EXPECT_QUENCH_ERROR(allocator.retain(4), {"retain", "page 4", "out of range", "[1, 4)"});
  EXPECT_QUENCH_ERROR(allocator.release(-2), {"release", "page -2", "out of range", "[1, 4)"});
  EXPECT_QUENCH_ERROR(allocator.retain(3), {"retain", "page 3 is free"});
  EXPECT_QUENCH_ERROR(allocator.ref_count(9), {"page 9", "[0, 4)"});
  allocator.release(page);
  EXPECT_QUENCH_ERROR(allocator.release(page),
                      {"release", ("page " + std::to_string(page)).c_str(), "already free"});
}

}  // namespace
}  // namespace quench
