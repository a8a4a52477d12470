#include "quench/core/parallel_for.h"

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace quench {

int parallel_threads() {
  if (const char* env = std::getenv("QUENCH_NUM_THREADS")) {
    const int n = std::atoi(env);
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
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
