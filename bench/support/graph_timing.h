// Timing for GPU benchmarks: a case's launches captured into a CUDA graph and replayed, timed
// with events, so that host launch gaps stay out of the figure (decode runs under graphs too).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "quench/core/error.h"

namespace quench::bench {

// A failed CUDA call ends the benchmark with the call named.
inline void cuda_check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) fail(str_cat(what, ": ", cudaGetErrorString(status)));
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median seconds of one call of `launch(r)`, captured for r = 0 .. reps - 1 into one graph that
// is replayed 3 times to warm up and then `replays` times.
template <typename Launch>
double time_graph(cudaStream_t stream, int32_t reps, int32_t replays, Launch&& launch) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cuda_check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "begin capture");
  for (int32_t r = 0; r < reps; ++r)
    launch(r);
  cuda_check(cudaStreamEndCapture(stream, &graph), "end capture");
  cuda_check(cudaGraphInstantiate(&exec, graph, 0), "graph instantiate");
  cudaEvent_t start, stop;
  cuda_check(cudaEventCreate(&start), "event");
  cuda_check(cudaEventCreate(&stop), "event");
  std::vector<double> seconds;
  for (int32_t i = 0; i < replays + 3; ++i) {
    cuda_check(cudaEventRecord(start, stream), "record");
    cuda_check(cudaGraphLaunch(exec, stream), "graph launch");
    cuda_check(cudaEventRecord(stop, stream), "record");
    cuda_check(cudaEventSynchronize(stop), "sync");
    float ms = 0.0f;
    cuda_check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
    if (i >= 3) seconds.push_back(ms * 1e-3 / reps);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return median(seconds);
}

}  // namespace quench::bench
