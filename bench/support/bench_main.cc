// quench_bench [--filter NAME] [--case SUBSTR] [--quick] [--jsonl PATH] [--commit SHA]
//              [--date YYYY-MM-DD]
// Runs every registered benchmark (or those whose name contains NAME) and prints a table; without
// a GPU, only the host benchmarks run.
// --case keeps only the cases whose name contains SUBSTR, so that a profiler sees one shape; a
// trailing $ anchors SUBSTR at the end of the name (one case, not its HND or q=f16 siblings).
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "support/bench_registry.h"

int main(int argc, char** argv) {
  quench::bench::BenchOptions options;
  std::string jsonl, commit = "unknown", date = "unknown";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--filter") {
      options.filter = value();
    } else if (arg == "--case") {
      options.case_filter = value();
    } else if (arg == "--quick") {
      options.quick = true;
    } else if (arg == "--jsonl") {
      jsonl = value();
    } else if (arg == "--commit") {
      commit = value();
    } else if (arg == "--date") {
      date = value();
    } else {
      std::fprintf(
          stderr,
          "unknown argument '%s'; allowed: --filter, --case, --quick, --jsonl, --commit, --date\n",
          arg.c_str());
      return 2;
    }
  }
  int devices = 0;
  const bool gpu = cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
  auto selected = [&](const quench::bench::BenchEntry& entry) {
    return (gpu || !entry.needs_gpu) &&
           (options.filter.empty() || entry.name.find(options.filter) != std::string::npos);
  };
  bool any = false;
  for (const auto& entry : quench::bench::bench_registry())
    any = any || selected(entry);
  if (!any) {
    std::printf("SKIPPED: %s\n", gpu ? "no benchmark matches the filter"
                                     : "no CUDA GPU visible and no host benchmark matches; "
                                       "no benchmark ran");
    return 77;
  }
  quench::bench::BenchReporter reporter(jsonl, commit, date);
  int failures = 0;
  for (const auto& entry : quench::bench::bench_registry()) {
    if (!selected(entry)) continue;
    std::printf("== %s\n", entry.name.c_str());
    try {
      entry.fn(options, reporter);
    } catch (const std::exception& e) {
      std::printf("FAILED %s: %s\n", entry.name.c_str(), e.what());
      ++failures;
    }
  }
  reporter.print_table();
  return failures == 0 ? 0 : 1;
}
