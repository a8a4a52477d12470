#include "support/bench_registry.h"

#include <utility>

namespace quench::bench {

std::vector<BenchEntry>& bench_registry() {
  static std::vector<BenchEntry> entries;
  return entries;
}

int register_bench(const std::string& name, BenchFn fn, bool needs_gpu) {
  bench_registry().push_back({name, std::move(fn), needs_gpu});
  return static_cast<int>(bench_registry().size());
}

}  // namespace quench::bench
