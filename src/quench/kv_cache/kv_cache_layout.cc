#include "quench/kv_cache/kv_cache_layout.h"

#include <algorithm>
#include <cctype>
#include <cstdint>

#include "quench/core/error.h"

namespace quench {

const char* kv_layout_name(KvLayout layout) {
  return layout == KvLayout::kNHD ? "NHD" : "HND";
}

KvLayout parse_kv_layout(const std::string& name) {
  std::string upper = name;
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  if (upper == "NHD") return KvLayout::kNHD;
  if (upper == "HND") return KvLayout::kHND;
  fail(str_cat("unknown KV layout '", name, "'; allowed: NHD, HND"));
}

void KvCacheLayout::validate() const {
  QUENCH_REQUIRE(page_size == 16 || page_size == 32 || page_size == 64, "KV page_size ", page_size,
                 " is not supported; allowed: 16, 32, 64");
  QUENCH_REQUIRE(head_dim == 64 || head_dim == 128 || head_dim == 256, "KV head_dim ", head_dim,
                 " is not supported; allowed: 64, 128, 256");
  // offset() reads any value other than kNHD as HND, so a corrupt enum would pass silently.
  QUENCH_REQUIRE(layout == KvLayout::kNHD || layout == KvLayout::kHND, "KV layout ",
                 static_cast<int>(layout), " is not supported; allowed: NHD (",
                 static_cast<int>(KvLayout::kNHD), "), HND (", static_cast<int>(KvLayout::kHND),
                 ")");
  QUENCH_REQUIRE(num_kv_heads >= 1, "num_kv_heads ", num_kv_heads, " must be >= 1");
  QUENCH_REQUIRE(num_pages >= 2, "num_pages ", num_pages,
                 " must be >= 2 (page 0 is the reserved null page)");
  QUENCH_REQUIRE(dtype == DType::kBF16 || dtype == DType::kFP8E4M3 || dtype == DType::kFP8E5M2,
                 "KV dtype ", dtype_name(dtype),
                 " is not supported; allowed: bf16, fp8_e4m3, fp8_e5m2");
  // Kernels index pages in 64 bits but bytes within one page of one tensor in 32.
  const int64_t page_bytes = page_elems() * (dtype == DType::kBF16 ? 2 : 1);
  QUENCH_REQUIRE(page_bytes <= INT32_MAX, "KV page of ", page_bytes, " bytes (", num_kv_heads,
                 " kv heads x ", page_size, " tokens x ", head_dim,
                 " dims) is too large; allowed: at most 2^31 - 1 bytes per page of one tensor");
}

std::string KvCacheLayout::describe() const {
  return str_cat(kv_layout_name(layout), " pages=", num_pages, " page_size=", page_size,
                 " kv_heads=", num_kv_heads, " head_dim=", head_dim, " dtype=", dtype_name(dtype));
}

}  // namespace quench
