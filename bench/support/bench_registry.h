// Registry of the benchmarks in quench_bench. Each benchmark file registers a function that
// measures its cases and records one BenchRecord per case (see bench_result.h). Most need a GPU;
// host benchmarks (QUENCH_REGISTER_HOST_BENCH) also run where none is present.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "support/bench_result.h"

namespace quench::bench {

struct BenchOptions {
  std::string filter;  // run benchmarks whose name contains this
  bool quick = false;  // fewer cases, for smoke runs
  // Measure only cases whose name contains this (e.g. for ncu); a trailing '$' anchors it at the
  // name's end, so that "...hd128$" picks a case without also picking its "... HND" sibling.
  std::string case_filter;

  bool wants_case(const std::string& case_name) const {
    if (!case_filter.empty() && case_filter.back() == '$') {
      const std::string tail = case_filter.substr(0, case_filter.size() - 1);
      return case_name.size() >= tail.size() &&
             case_name.compare(case_name.size() - tail.size(), tail.size(), tail) == 0;
    }
    return case_filter.empty() || case_name.find(case_filter) != std::string::npos;
  }
};

using BenchFn = std::function<void(const BenchOptions&, BenchReporter&)>;

struct BenchEntry {
  std::string name;
  BenchFn fn;
  bool needs_gpu = true;
};

std::vector<BenchEntry>& bench_registry();
int register_bench(const std::string& name, BenchFn fn, bool needs_gpu = true);

}  // namespace quench::bench

#define QUENCH_BENCH_CONCAT2(a, b) a##b
#define QUENCH_BENCH_CONCAT(a, b) QUENCH_BENCH_CONCAT2(a, b)
// QUENCH_REGISTER_BENCH("decode", run_decode_bench);
#define QUENCH_REGISTER_BENCH(name, fn)                               \
  static const int QUENCH_BENCH_CONCAT(quench_bench_reg_, __LINE__) = \
      ::quench::bench::register_bench(name, fn)
// QUENCH_REGISTER_HOST_BENCH("json_masks", run_json_masks_bench): host code only.
#define QUENCH_REGISTER_HOST_BENCH(name, fn)                          \
  static const int QUENCH_BENCH_CONCAT(quench_bench_reg_, __LINE__) = \
      ::quench::bench::register_bench(name, fn, false)
