#include "quench/model/step_profiler.h"

#include <algorithm>
#include <cstdio>

#include "quench/core/device_buffer.h"
#include "quench/core/env_switch.h"

namespace quench {
namespace {

// Holds the stream for ~4 ms so that the host is done enqueueing the step before it runs.
__global__ void spin_kernel(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

}  // namespace

StepProfiler::StepProfiler() : enabled_(env_switch("QUENCH_PROFILE_STEPS", {"0", "1"}) == "1") {}

StepProfiler::~StepProfiler() {
  for (cudaEvent_t e : events_)
    cudaEventDestroy(e);
  if (steps_ == 0) return;
  std::vector<std::pair<std::string, std::pair<double, int64_t>>> rows(totals_.begin(),
                                                                       totals_.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  double all = 0.0;
  for (const auto& r : rows)
    all += r.second.first;
  std::fprintf(stderr, "step profile: %lld eager steps, %.3f ms of GPU time per step\n",
               static_cast<long long>(steps_), all / static_cast<double>(steps_));
  std::fprintf(stderr, "%-22s %10s %8s %10s %6s\n", "op", "ms/step", "calls", "us/call", "share");
  for (const auto& [name, t] : rows) {
    std::fprintf(stderr, "%-22s %10.4f %8lld %10.2f %5.1f%%\n", name.c_str(),
                 t.first / static_cast<double>(steps_), static_cast<long long>(t.second),
                 1000.0 * t.first / static_cast<double>(t.second), 100.0 * t.first / all);
  }
}

cudaEvent_t StepProfiler::event_at(size_t i) {
  while (events_.size() <= i) {
    cudaEvent_t e = nullptr;
    check_cuda(cudaEventCreate(&e), "cudaEventCreate (step profiler)");
    events_.push_back(e);
  }
  return events_[i];
}

void StepProfiler::begin(cudaStream_t stream) {
  if (!enabled_) return;
  spin_kernel<<<1, 1, 0, stream>>>(8'000'000);  // ~4 ms at ~2 GHz
  check_cuda(cudaGetLastError(), "the step profiler's spin kernel");
  used_ = 0;
  names_.clear();
  check_cuda(cudaEventRecord(event_at(used_++), stream), "cudaEventRecord (step profiler)");
  active_ = true;
}

void StepProfiler::mark(cudaStream_t stream, const char* name) {
  if (!active_) return;
  check_cuda(cudaEventRecord(event_at(used_++), stream), "cudaEventRecord (step profiler)");
  names_.push_back(name);
}

void StepProfiler::end() {
  if (!active_) return;
  active_ = false;
  for (size_t i = 0; i + 1 < used_; ++i) {
    float ms = 0.0f;
    check_cuda(cudaEventElapsedTime(&ms, events_[i], events_[i + 1]), "cudaEventElapsedTime");
    auto& t = totals_[names_[i]];
    t.first += ms;
    t.second += 1;
  }
  ++steps_;
}

}  // namespace quench
