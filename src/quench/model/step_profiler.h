// QUENCH_PROFILE_STEPS=1: the GPU runner's eager steps timed op by op on the device, for finding
// where a step's GPU time goes where no profiler is installed. Each profiled step starts with a
// short spin kernel so that the host enqueues the whole step while the GPU waits; the events
// between the ops then measure the GPU's time per op (gaps between kernels included), not the
// host's launch rate. The totals per op name are printed when the runner is destroyed. Off by
// default (the spin costs ~4 ms a step); graphs are not profiled (run with --enforce-eager).
#pragma once

#include <cuda_runtime.h>

#include <map>
#include <string>
#include <vector>

namespace quench {

class StepProfiler {
 public:
  StepProfiler();  // reads QUENCH_PROFILE_STEPS
  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;
  ~StepProfiler();  // prints the totals (stderr) when any step was profiled

  bool enabled() const { return enabled_; }
  // Starts a step on `stream`: the spin kernel, then the first mark.
  void begin(cudaStream_t stream);
  // Records the end of the op called `name` (the time since the last mark is its).
  void mark(cudaStream_t stream, const char* name);
  // After the stream synchronized: adds this step's times to the totals.
  void end();

 private:
  cudaEvent_t event_at(size_t i);

  bool enabled_ = false;
  bool active_ = false;
  std::vector<cudaEvent_t> events_;
  std::vector<const char*> names_;  // names_[i]: the op between events i and i + 1
  size_t used_ = 0;
  int64_t steps_ = 0;
  std::map<std::string, std::pair<double, int64_t>> totals_;  // ms, count
};

}  // namespace quench
