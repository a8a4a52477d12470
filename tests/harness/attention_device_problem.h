// An AttentionProblem copied to the GPU: every input and poisoned output in device memory, and
// params() pointing at them, so a kernel test is: upload, launch, download, compare.
#pragma once

#include <cstdint>
#include <vector>

#include "harness/attention_problem.h"
#include "harness/device_buffer.h"

namespace quench::testing_support {

class AttentionDeviceProblem {
 public:
  // Uploads the problem's inputs and its poisoned outputs (cudaMemcpy, synchronous). The problem
  // must outlive this object (comparisons read its reference output).
  // first_page > 0 places the caches in a larger pool: the problem's page p is the pool's page
  // first_page + p (its block table shifted to match, kv.num_pages grown), and the pages below
  // first_page hold NaN bytes. The same problem far into a large cache is how tests reach
  // offsets past 2^32 bytes (kernels must index pages in 64 bits).
  explicit AttentionDeviceProblem(const AttentionProblem& problem, int32_t first_page = 0);

  // AttentionParams over the device buffers.
  const AttentionParams& params() const { return params_; }

  // Resets the outputs to the poisoned contents (between two launches).
  void poison_outputs();

  std::vector<uint8_t> download_out() const { return out_.to_host<uint8_t>(); }
  std::vector<uint8_t> download_block_scales() const { return block_scales_.to_host<uint8_t>(); }
  std::vector<float> download_lse() const { return lse_.to_host<float>(); }

  // Downloads the output (and block scales) and compares them with the problem's reference.
  CompareResult compare_output(Tolerance tolerance) const;
  // Downloads the lse and compares it with the reference's (the problem must have lse on).
  CompareResult compare_lse(Tolerance tolerance) const;

 private:
  const AttentionProblem& problem_;
  DeviceBuffer q_, k_cache_, v_cache_, q_offsets_, seq_lens_, block_table_;
  DeviceBuffer k_head_scales_, v_head_scales_, sinks_;
  DeviceBuffer out_, block_scales_, lse_;
  AttentionParams params_;
};

}  // namespace quench::testing_support
