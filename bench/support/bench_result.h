// One measured case of a benchmark, written as a JSON line to bench/results/*.jsonl and as a
// row of the table quench_bench prints last.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace quench::bench {

struct BenchRecord {
  std::string bench;      // e.g. "decode"
  std::string case_name;  // shape and dtypes in words
  std::string metric;     // "TB/s", "TFLOP/s" or "us"
  double value = 0.0;
  std::optional<double> ceiling;  // same unit, measured in the same run
  std::string peer;               // e.g. "cudnn_bf16 (torch sdpa)"
  std::optional<double> peer_value;
  std::string note;  // anything else worth a word (e.g. "time_us=12.3")
};

class BenchReporter {
 public:
  BenchReporter(std::string jsonl_path, std::string commit, std::string date);
  // Appends to the JSON-lines file and keeps the row for the summary table.
  void record(const BenchRecord& r);
  void print_table() const;

 private:
  std::string jsonl_path_;
  std::string commit_;
  std::string date_;
  std::vector<BenchRecord> rows_;
};

}  // namespace quench::bench
