// Shared steps of the decode GPU tests.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>

#include "harness/attention_device_problem.h"
#include "harness/device_buffer.h"
#include "quench/ops/attention/decode/decode_attention.h"

namespace quench::testing_support {

// Runs decode_attention on `device` twice over poisoned outputs: with a workspace (the KV splits
// the launcher chooses, and their merge) and without one (one split), calling check() after
// each run under a trace that names the mode.
template <class Check>
void run_decode_in_both_workspace_modes(AttentionDeviceProblem& device, const Check& check) {
  const AttentionParams& params = device.params();
  const size_t workspace_bytes = decode_attention_workspace_bytes(params);
  DeviceBuffer workspace(workspace_bytes);
  const int splits = decode_attention_num_splits(params);
  for (bool use_workspace : {true, false}) {
    SCOPED_TRACE(use_workspace ? "with workspace: " + std::to_string(splits) + " KV splits"
                               : std::string("without workspace: 1 KV split"));
    device.poison_outputs();
    decode_attention(params, use_workspace ? workspace.get() : nullptr,
                     use_workspace ? workspace_bytes : 0, nullptr);
    QUENCH_CUDA_CHECK(cudaGetLastError());
    QUENCH_CUDA_CHECK(cudaDeviceSynchronize());
    check();
  }
}

}  // namespace quench::testing_support
