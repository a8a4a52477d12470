// Splits [0, n) into contiguous chunks run on all hardware threads. The CPU reference ops use
// it where iterations are independent, so that a many-core host checks large cases quickly;
// results never depend on the thread count.
#pragma once

#include <cstdint>
#include <functional>

namespace quench {

// Calls body(i) for every i in [0, n). Exceptions thrown by body are rethrown (the first one).
void parallel_for(int64_t n, const std::function<void(int64_t)>& body);

// The most worker threads QUENCH_NUM_THREADS may ask for.
inline constexpr int kMaxParallelThreads = 1024;

// Number of worker threads parallel_for uses: QUENCH_NUM_THREADS=1..kMaxParallelThreads (read
// once; any other value throws quench::Error naming the range), else the hardware count.
int parallel_threads();

}  // namespace quench
