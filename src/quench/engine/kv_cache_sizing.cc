#include "quench/engine/kv_cache_sizing.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "quench/core/error.h"
#include "quench/kv_cache/block_table.h"

namespace quench {
namespace {

std::string gib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(bytes) / (1ull << 30));
  return text;
}

}  // namespace

int32_t kv_pages_for_memory_budget(const KvMemoryBudget& b) {
  QUENCH_REQUIRE(b.utilization > 0.0 && b.utilization <= 1.0, "--gpu-memory-utilization ",
                 b.utilization, " is outside (0, 1]");
  QUENCH_REQUIRE(b.device_total_bytes > 0 && b.device_free_bytes >= 0 &&
                     b.device_free_bytes <= b.device_total_bytes && b.page_bytes > 0 &&
                     b.page_size > 0 && b.max_model_len > 0,
                 "KV cache sizing: inconsistent inputs (total ", b.device_total_bytes, ", free ",
                 b.device_free_bytes, ", page ", b.page_bytes, " bytes)");
  const auto requested =
      static_cast<int64_t>(std::floor(b.utilization * static_cast<double>(b.device_total_bytes)));
  if (requested > b.device_free_bytes) {
    const double most =
        static_cast<double>(b.device_free_bytes) / static_cast<double>(b.device_total_bytes);
    char at_most[32];
    std::snprintf(at_most, sizeof at_most, "%.2f", std::floor(most * 100.0) / 100.0);
    throw Error(str_cat("--gpu-memory-utilization ", b.utilization, " asks for ", gib(requested),
                        " of the GPU's ", gib(b.device_total_bytes), ", but only ",
                        gib(b.device_free_bytes),
                        " are free (another process holds the rest); lower it to at most ", at_most,
                        " or free the GPU"));
  }
  const int64_t kv_bytes = requested - b.weight_bytes - b.step_bytes;
  const int64_t pages = std::max<int64_t>(kv_bytes, 0) / b.page_bytes;
  const int64_t needed = 1 + pages_for_tokens(b.max_model_len, b.page_size);  // + the null page
  if (pages < needed) {
    throw Error(str_cat(
        "the KV cache would hold ", std::max<int64_t>(pages - 1, 0) * b.page_size,
        " tokens, fewer than one max_model_len (", b.max_model_len, ") request: of the ",
        gib(requested), " that --gpu-memory-utilization ", b.utilization,
        " allows, the weights take ", gib(b.weight_bytes), " and the step buffers ",
        gib(b.step_bytes),
        "; raise --gpu-memory-utilization, lower --max-model-len or --max-num-batched-tokens, or "
        "give --num-kv-pages"));
  }
  // Page indices are int32 in the block table.
  return static_cast<int32_t>(std::min<int64_t>(pages, std::numeric_limits<int32_t>::max()));
}

}  // namespace quench
