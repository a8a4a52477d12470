// A configurable attention kernel for tests: stands in for GPU kernels in selection tests (its
// checks are plain functions) and, as a host kernel, runs the CPU reference with whatever query
// dtype it declares (so FP8-query paths run on the CPU). It records every run's parameters.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "quench/attention/attention_kernel_registry.h"

namespace quench::testing_support {

struct FakeKernelSpec {
  std::string name;
  bool prefill = true;
  bool decode = true;
  int32_t priority = 0;
  MemorySpace memory_space = MemorySpace::kHost;
  // Query dtype; default: config.model_dtype.
  std::function<DType(const AttentionConfig&, AttentionPhase)> query_dtype;
  // Support check; default: may("fake").
  std::function<SupportCheck(const AttentionConfig&, AttentionPhase)> check;
  // Whether run() calls the CPU reference (host kernels only).
  bool run_reference = true;
  // Parameters of every run, in call order (shared so that tests keep it after registration).
  std::shared_ptr<std::vector<AttentionParams>> runs =
      std::make_shared<std::vector<AttentionParams>>();
};

std::unique_ptr<AttentionKernel> make_fake_kernel(FakeKernelSpec spec);

// The query dtype of a kernel that takes an FP8 query over an FP8 cache when allowed (like a
// Hopper FP8 prefill kernel), and the model dtype otherwise.
DType fp8_query_over_fp8_kv(const AttentionConfig& config, AttentionPhase phase);

// Stand-ins (device kernels that never run) for the GPU kernels being written, with the
// constraints the selection must handle: "prefill_hopper" (sm_90 only, FP8 query over an FP8
// cache, also bf16), "prefill_mma" (sm_80+, query in the model dtype) and "decode_gqa" (sm_80+,
// query in the model dtype, required for attention sinks).
void register_gpu_standin_kernels(AttentionKernelRegistry& registry);

}  // namespace quench::testing_support
