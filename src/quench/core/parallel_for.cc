#include "quench/core/parallel_for.h"

#include <algorithm>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "quench/core/env_switch.h"

namespace quench {

int parallel_threads() {
  // Read once through the switches' one reader: "2x", "0" or "-1" used to be taken as 2 or
  // silently replaced by the hardware count; now they fail naming the allowed range.
  static const int threads = [] {
    const int forced = env_switch_int("QUENCH_NUM_THREADS", 1, kMaxParallelThreads, 0);
    if (forced > 0) return forced;
    return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }();
  return threads;
}

void parallel_for(int64_t n, const std::function<void(int64_t)>& body) {
  if (n <= 0) return;
  const int64_t workers = std::min<int64_t>(parallel_threads(), n);
  if (workers == 1) {
    for (int64_t i = 0; i < n; ++i)
      body(i);
    return;
  }
  std::exception_ptr first_error;
  std::mutex error_mutex;
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(workers));
  for (int64_t w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      const int64_t begin = n * w / workers;
      const int64_t end = n * (w + 1) / workers;
      try {
        for (int64_t i = begin; i < end; ++i)
          body(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!first_error) first_error = std::current_exception();
      }
    });
  }
  for (auto& t : threads)
    t.join();
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace quench
