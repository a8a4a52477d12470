#include "support/bench_result.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <utility>

namespace quench::bench {
namespace {

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

std::string json_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

}  // namespace

BenchReporter::BenchReporter(std::string jsonl_path, std::string commit, std::string date)
    : jsonl_path_(std::move(jsonl_path)), commit_(std::move(commit)), date_(std::move(date)) {}

void BenchReporter::record(const BenchRecord& r) {
  rows_.push_back(r);
  std::ostringstream line;
  line << "{\"bench\":\"" << json_escape(r.bench) << "\",\"case\":\"" << json_escape(r.case_name)
       << "\",\"metric\":\"" << json_escape(r.metric) << "\",\"value\":" << json_number(r.value);
  if (r.ceiling) line << ",\"ceiling\":" << json_number(*r.ceiling);
  if (!r.peer.empty()) line << ",\"peer\":\"" << json_escape(r.peer) << "\"";
  if (r.peer_value) line << ",\"peer_value\":" << json_number(*r.peer_value);
  if (!r.note.empty()) line << ",\"note\":\"" << json_escape(r.note) << "\"";
  // Wall-clock seconds when the case finished: lines up a result with a clock / power log taken
  // beside the run (tools/gpu_check.sh writes one).
  const double unix_time =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  char time_text[32];
  std::snprintf(time_text, sizeof(time_text), "%.3f", unix_time);
  line << ",\"commit\":\"" << json_escape(commit_) << "\",\"date\":\"" << json_escape(date_)
       << "\",\"unix_time\":" << time_text << "}";
  std::printf("%s\n", line.str().c_str());
  if (!jsonl_path_.empty()) {
    std::ofstream out(jsonl_path_, std::ios::app);
    out << line.str() << "\n";
  }
}

void BenchReporter::print_table() const {
  std::printf("\n%-10s %-58s %10s %-8s %10s %10s\n", "bench", "case", "value", "metric", "ceiling",
              "peer");
  for (const auto& r : rows_) {
    std::printf("%-10s %-58s %10.3f %-8s %10s %10s\n", r.bench.c_str(), r.case_name.c_str(),
                r.value, r.metric.c_str(), r.ceiling ? json_number(*r.ceiling).c_str() : "-",
                r.peer_value ? json_number(*r.peer_value).c_str() : "-");
  }
}

}  // namespace quench::bench
