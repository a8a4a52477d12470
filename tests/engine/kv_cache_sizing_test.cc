// --gpu-memory-utilization's arithmetic: the share of the GPU's memory, less the weights and the
// step buffers, in whole pages (the null page counted); too little room for one max_model_len
// request, or a share larger than what is free, is an error with the figures and the flags.
#include "quench/engine/kv_cache_sizing.h"

#include <gtest/gtest.h>

#include <limits>

#include "harness/expect_error.h"

namespace quench {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

KvMemoryBudget h200_like() {
  KvMemoryBudget b;
  b.device_total_bytes = 140 * kGiB;
  b.device_free_bytes = 139 * kGiB;  // the CUDA context holds some
  b.utilization = 0.9;
  b.weight_bytes = 16 * kGiB;
  b.step_bytes = 2 * kGiB;
  b.page_bytes = 2 * 32 * 16 * 8 * 128;  // K and V, 32 layers, page 16, 8 heads x 128, FP8
  b.page_size = 16;
  b.max_model_len = 8192;
  return b;
}

TEST(KvCacheSizing, TheShareLessWeightsAndStepBuffersInWholePages) {
  KvMemoryBudget b = h200_like();
  const int64_t share = static_cast<int64_t>(0.9 * static_cast<double>(140 * kGiB));
  const int64_t expected = (share - 18 * kGiB) / b.page_bytes;
  EXPECT_EQ(kv_pages_for_memory_budget(b), expected);
  // Every byte counts: a larger step reserve loses exactly its pages.
  b.step_bytes += 10 * b.page_bytes;
  EXPECT_EQ(kv_pages_for_memory_budget(b), expected - 10);
  // A bf16 cache (twice the page bytes) holds half the pages.
  b = h200_like();
  b.page_bytes *= 2;
  EXPECT_EQ(kv_pages_for_memory_budget(b), expected / 2);
}

TEST(KvCacheSizing, ExactlyOneMaxLengthRequestIsEnoughOneTokenLessIsNot) {
  KvMemoryBudget b = h200_like();
  b.device_total_bytes = b.device_free_bytes = 100 * kGiB;
  b.utilization = 1.0;
  b.weight_bytes = 100 * kGiB - (1 + 8192 / 16) * b.page_bytes - b.step_bytes;
  EXPECT_EQ(kv_pages_for_memory_budget(b), 1 + 8192 / 16);
  b.weight_bytes += 1;
  EXPECT_QUENCH_ERROR(kv_pages_for_memory_budget(b),
                      {"would hold 8176 tokens", "max_model_len (8192)", "--gpu-memory-utilization",
                       "--max-model-len", "--num-kv-pages"});
}

TEST(KvCacheSizing, WeightsLargerThanTheShareNameTheFigures) {
  KvMemoryBudget b = h200_like();
  b.weight_bytes = 130 * kGiB;
  EXPECT_QUENCH_ERROR(kv_pages_for_memory_budget(b),
                      {"would hold 0 tokens", "the weights take 130.00 GiB"});
}

TEST(KvCacheSizing, AskingForMoreThanIsFreeIsAnError) {
  KvMemoryBudget b = h200_like();
  b.device_free_bytes = 70 * kGiB;  // another process holds half the GPU
  EXPECT_QUENCH_ERROR(kv_pages_for_memory_budget(b),
                      {"asks for 126.00 GiB", "only 70.00 GiB are free", "at most 0.50"});
}

TEST(KvCacheSizing, UtilizationOutsideTheUnitIntervalIsAnError) {
  for (double u : {0.0, -0.5, 1.01, std::numeric_limits<double>::quiet_NaN()}) {
    KvMemoryBudget b = h200_like();
    b.utilization = u;
    EXPECT_QUENCH_ERROR(kv_pages_for_memory_budget(b), {"--gpu-memory-utilization", "(0, 1]"});
  }
}

TEST(KvCacheSizing, PageCountStaysWithinTheBlockTablesInt32) {
  KvMemoryBudget b = h200_like();
  b.page_bytes = 1;  // absurdly small pages: more than int32 can index
  b.max_model_len = 16;
  EXPECT_EQ(kv_pages_for_memory_budget(b), std::numeric_limits<int32_t>::max());
}

}  // namespace
}  // namespace quench
