#include "harness/attention_device_problem.h"

namespace quench::testing_support {

AttentionDeviceProblem::AttentionDeviceProblem(const AttentionProblem& problem)
    : problem_(problem),
      q_(DeviceBuffer::from_host(problem.q_bytes())),
      k_cache_(DeviceBuffer::from_host(problem.k_cache_bytes())),
      v_cache_(DeviceBuffer::from_host(problem.v_cache_bytes())),
      q_offsets_(DeviceBuffer::from_host(problem.q_offsets())),
      seq_lens_(DeviceBuffer::from_host(problem.seq_lens())),
      block_table_(DeviceBuffer::from_host(problem.block_table())),
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
