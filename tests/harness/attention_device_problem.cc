#include "harness/attention_device_problem.h"

#include <cstdint>
#include <vector>

namespace quench::testing_support {
namespace {

// A device pool of first_page pages of NaN bytes (0xff: NaN in bf16, e4m3 and e5m2) followed by
// `cache` (the problem's pages).
DeviceBuffer pool_with_cache_at(const std::vector<uint8_t>& cache, int64_t first_page_byte) {
  DeviceBuffer pool(static_cast<size_t>(first_page_byte) + cache.size());
  if (first_page_byte > 0) {
    QUENCH_CUDA_CHECK(cudaMemset(pool.get(), 0xff, static_cast<size_t>(first_page_byte)));
  }
  if (!cache.empty()) {
    QUENCH_CUDA_CHECK(cudaMemcpy(pool.as<uint8_t>() + first_page_byte, cache.data(), cache.size(),
                                 cudaMemcpyHostToDevice));
  }
  return pool;
}

std::vector<int32_t> shifted_block_table(std::vector<int32_t> table, int32_t first_page) {
  for (int32_t& page : table)
    page += first_page;
  return table;
}

// The pool's byte offset of the problem's page 0.
int64_t first_page_byte(const AttentionProblem& problem, int32_t first_page) {
  const KvCacheLayout& kv = problem.kv_layout();
  QUENCH_REQUIRE(first_page >= 0 && int64_t{first_page} + kv.num_pages <= INT32_MAX,
                 "AttentionDeviceProblem: first_page ", first_page, " with ", kv.num_pages,
                 " pages; allowed: 0 <= first_page and first_page + num_pages <= 2^31 - 1");
  return first_page * (kv.tensor_bytes() / kv.num_pages);
}

}  // namespace

AttentionDeviceProblem::AttentionDeviceProblem(const AttentionProblem& problem, int32_t first_page)
    : problem_(problem),
      q_(DeviceBuffer::from_host(problem.q_bytes())),
      k_cache_(pool_with_cache_at(problem.k_cache_bytes(), first_page_byte(problem, first_page))),
      v_cache_(pool_with_cache_at(problem.v_cache_bytes(), first_page_byte(problem, first_page))),
      q_offsets_(DeviceBuffer::from_host(problem.q_offsets())),
      seq_lens_(DeviceBuffer::from_host(problem.seq_lens())),
      block_table_(DeviceBuffer::from_host(shifted_block_table(problem.block_table(), first_page))),
      k_head_scales_(DeviceBuffer::from_host(problem.k_head_scales())),
      v_head_scales_(DeviceBuffer::from_host(problem.v_head_scales())),
      sinks_(DeviceBuffer::from_host(problem.sinks())),
      out_(DeviceBuffer::from_host(problem.poisoned_out())),
      block_scales_(DeviceBuffer::from_host(problem.poisoned_block_scales())),
      lse_(DeviceBuffer::from_host(problem.poisoned_lse())) {
  AttentionPointers pointers;
  pointers.q = q_.get();
  pointers.k_cache = k_cache_.get();
  pointers.v_cache = v_cache_.get();
  pointers.q_offsets = q_offsets_.as<int32_t>();
  pointers.seq_lens = seq_lens_.as<int32_t>();
  pointers.block_table = block_table_.as<int32_t>();
  pointers.k_head_scales = k_head_scales_.as<float>();
  pointers.v_head_scales = v_head_scales_.as<float>();
  pointers.sinks = sinks_.as<float>();
  pointers.out = out_.get();
  pointers.out_block_scales = block_scales_.as<uint8_t>();
  pointers.lse = lse_.as<float>();
  params_ = problem.params_with(pointers);
  params_.kv.num_pages += first_page;
}

void AttentionDeviceProblem::poison_outputs() {
  out_.upload(problem_.poisoned_out().data(), out_.bytes());
  block_scales_.upload(problem_.poisoned_block_scales().data(), block_scales_.bytes());
  lse_.upload(problem_.poisoned_lse().data(), lse_.bytes());
}

CompareResult AttentionDeviceProblem::compare_output(Tolerance tolerance) const {
  const std::vector<uint8_t> out = download_out();
  const std::vector<uint8_t> scales = download_block_scales();
  return problem_.compare_output(out.data(), scales.empty() ? nullptr : scales.data(), tolerance);
}

CompareResult AttentionDeviceProblem::compare_lse(Tolerance tolerance) const {
  const std::vector<float> lse = download_lse();
  return problem_.compare_lse(lse.data(), tolerance);
}

}  // namespace quench::testing_support
