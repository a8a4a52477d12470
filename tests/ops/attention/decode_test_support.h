// Shared steps of the decode GPU tests.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "harness/attention_device_problem.h"
#include "harness/attention_problem.h"
#include "harness/compare.h"
#include "harness/device_buffer.h"
#include "quench/core/error.h"
#include "quench/ops/attention/attention_reference.h"
#include "quench/ops/attention/decode/decode_attention.h"

namespace quench::testing_support {

// A workspace for `params`, zeroed as decode_attention_workspace_bytes asks.
inline DeviceBuffer zeroed_decode_workspace(const AttentionParams& params) {
  DeviceBuffer workspace(decode_attention_workspace_bytes(params));
  if (workspace.bytes() > 0) QUENCH_CUDA_CHECK(cudaMemset(workspace.get(), 0, workspace.bytes()));
  return workspace;
}

// A CUDA graph of what `enqueue(stream)` launches on a stream of its own, replayed by replay():
// the decode tests check that captured launches (CUDA-graph serving) match the reference.
class CapturedDecodeGraph {
 public:
  template <class Enqueue>
  explicit CapturedDecodeGraph(Enqueue&& enqueue) {
    QUENCH_CUDA_CHECK(cudaStreamCreate(&stream_));
    QUENCH_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
    enqueue(stream_);
    QUENCH_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph_));
    QUENCH_CUDA_CHECK(cudaGraphInstantiate(&exec_, graph_, 0));
  }
  ~CapturedDecodeGraph() {
    QUENCH_CUDA_CHECK(cudaGraphExecDestroy(exec_));
    QUENCH_CUDA_CHECK(cudaGraphDestroy(graph_));
    QUENCH_CUDA_CHECK(cudaStreamDestroy(stream_));
  }
  CapturedDecodeGraph(const CapturedDecodeGraph&) = delete;
  CapturedDecodeGraph& operator=(const CapturedDecodeGraph&) = delete;

  // Launches the graph once and waits for it.
  void replay() {
    QUENCH_CUDA_CHECK(cudaGraphLaunch(exec_, stream_));
    QUENCH_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

 private:
  cudaStream_t stream_ = nullptr;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

// The workspace's merge counters are zero again (every call must leave them so).
inline void expect_merge_counters_zero(const DeviceBuffer& workspace) {
  if (workspace.bytes() == 0) return;
  std::vector<uint32_t> counters(kDecodeWorkspaceCounterBytes / sizeof(uint32_t));
  QUENCH_CUDA_CHECK(cudaMemcpy(counters.data(), workspace.get(), kDecodeWorkspaceCounterBytes,
                               cudaMemcpyDeviceToHost));
  int64_t nonzero = 0;
  std::string first;
  for (size_t i = 0; i < counters.size(); ++i) {
    if (counters[i] != 0 && nonzero++ < 4) {
      first += " [" + std::to_string(i) + "]=" + std::to_string(counters[i]);
    }
  }
  EXPECT_EQ(nonzero, 0) << "merge counters left nonzero:" << first;
}

// A way to run decode_attention: with one workspace (the KV splits the launcher chooses) merged
// by the last split CTAs twice (the second run finds the counters the first left), by the merge
// kernel on the splits' arrival counts, and by the merge kernel after the main grid; and without
// a workspace (one split).
struct DecodeWorkspaceMode {
  const char* name;
  bool use_workspace;
  DecodeSplitMerge merge;
};

inline const std::vector<DecodeWorkspaceMode>& decode_workspace_modes() {
  static const std::vector<DecodeWorkspaceMode> modes = {
      {"merged by the last split CTAs", true, DecodeSplitMerge::kLastSplitCta},
      {"merged by the last split CTAs, second run on the same workspace", true,
       DecodeSplitMerge::kLastSplitCta},
      {"merged by the merge kernel on arrival", true, DecodeSplitMerge::kMergeKernel},
      {"merged by the merge kernel after the main grid", true,
       DecodeSplitMerge::kMergeKernelAfterGrid},
      {"without workspace: 1 KV split", false, DecodeSplitMerge::kDefault}};
  return modes;
}

// The trace of a run in `mode` over a launch of `splits` KV splits.
inline std::string decode_workspace_mode_trace(const DecodeWorkspaceMode& mode, int splits) {
  return mode.use_workspace
             ? "with workspace, " + std::to_string(splits) + " KV splits, " + mode.name
             : std::string(mode.name);
}

// One decode_attention run of `params` in `mode` over `workspace` (zeroed_decode_workspace's),
// synchronized; the merge counters must be zero again after it.
inline void run_decode_in_workspace_mode(const AttentionParams& params,
                                         const DeviceBuffer& workspace,
                                         const DecodeWorkspaceMode& mode) {
  decode_attention(params, mode.use_workspace ? workspace.get() : nullptr,
                   mode.use_workspace ? workspace.bytes() : 0, nullptr, mode.merge);
  QUENCH_CUDA_CHECK(cudaGetLastError());
  QUENCH_CUDA_CHECK(cudaDeviceSynchronize());
  expect_merge_counters_zero(workspace);
}

// Runs decode_attention on `device` over poisoned outputs in every workspace mode
// (decode_workspace_modes), calling check() after each run under a trace that names the mode.
template <class Check>
void run_decode_in_all_workspace_modes(AttentionDeviceProblem& device, const Check& check) {
  const AttentionParams& params = device.params();
  const DeviceBuffer workspace = zeroed_decode_workspace(params);
  const int splits = decode_attention_num_splits(params);
  for (const DecodeWorkspaceMode& mode : decode_workspace_modes()) {
    SCOPED_TRACE(decode_workspace_mode_trace(mode, splits));
    device.poison_outputs();
    run_decode_in_workspace_mode(params, workspace, mode);
    check();
  }
}

// The reference's output before storage (fp32 rounded to bf16): the truth an NVFP4 output is
// judged against.
inline std::vector<float> reference_bf16_values(const AttentionProblem& problem) {
  const int64_t row_elems = int64_t{problem.config().num_q_heads} * problem.config().head_dim;
  std::vector<uint8_t> out(static_cast<size_t>(problem.num_tokens() * row_elems * 2 + 16));
  AttentionParams p = problem.host_params(out.data(), nullptr, nullptr);
  p.out_dtype = DType::kBF16;
  attention_reference(p);
  AttentionOutputFormat format;
  format.dtype = DType::kBF16;
  format.row_elems = row_elems;
  return decode_outputs(format, problem.num_tokens(), out.data(), nullptr);
}

// NVFP4 output: a value that sits near an e2m1 rounding boundary may round to the neighbouring
// code on the GPU (its fp32 sums differ from the reference's doubles by ~1e-3), and one code is
// up to a third of the block's amax. So: every decoded value within tolerance + amax/3 of the
// truth, and at most 3% of the values differing from the reference's stored output at all.
inline void expect_nvfp4_close(const AttentionProblem& problem, const std::vector<float>& truth,
                               const std::vector<uint8_t>& out, const std::vector<uint8_t>& scales,
                               Tolerance tolerance) {
  const std::vector<float> actual =
      decode_outputs(problem.output_format(), problem.num_tokens(), out.data(), scales.data());
  const std::vector<float> expected = problem.expected_values();
  int64_t differing = 0, bad = 0;
  std::string first_bad;
  for (size_t block = 0; block < truth.size() / 16; ++block) {
    float amax = 0.0f;
    for (size_t i = 16 * block; i < 16 * block + 16; ++i)
      amax = std::max(amax, std::fabs(truth[i]));
    for (size_t i = 16 * block; i < 16 * block + 16; ++i) {
      if (actual[i] != expected[i]) ++differing;
      const double bound = tolerance.atol + tolerance.rtol * std::fabs(truth[i]) + amax / 3.0;
      if (!(std::fabs(actual[i] - truth[i]) <= bound)) {
        if (bad++ < 4) {
          first_bad += " [" + std::to_string(i) + "] got " + std::to_string(actual[i]) + " truth " +
                       std::to_string(truth[i]) + ";";
        }
      }
    }
  }
  EXPECT_EQ(bad, 0) << "NVFP4 values off by more than one code:" << first_bad;
  EXPECT_LE(differing, static_cast<int64_t>(actual.size()) * 3 / 100)
      << differing << " of " << actual.size() << " NVFP4 values differ from the reference's";
}

// FP8 output: the kernel rounds P to bf16 before P·V while the reference keeps fp32, so a value
// within ~1e-3 of an FP8 rounding boundary may land on the neighbouring code; one e4m3 code is up
// to 12.5% of the value (25% for e5m2), more than the SPEC tolerance. So: every value within
// tolerance or exactly one code from the reference's stored code, and at most 1% such flips.
inline void expect_fp8_close(const AttentionProblem& problem, const std::vector<uint8_t>& out,
                             Tolerance tolerance) {
  const std::vector<uint8_t>& expected_bytes = problem.expected_out();
  const std::vector<float> actual =
      decode_outputs(problem.output_format(), problem.num_tokens(), out.data(), nullptr);
  const std::vector<float> expected = problem.expected_values();
  int64_t flips = 0, bad = 0;
  std::string first_bad;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double bound = tolerance.atol + tolerance.rtol * std::fabs(expected[i]);
    if (std::fabs(actual[i] - expected[i]) <= bound) continue;
    const int a = out[i], e = expected_bytes[i];
    if ((a & 0x80) == (e & 0x80) && std::abs((a & 0x7f) - (e & 0x7f)) == 1) {
      ++flips;
      continue;
    }
    if (bad++ < 4) {
      first_bad += " [" + std::to_string(i) + "] got " + std::to_string(actual[i]) + " expected " +
                   std::to_string(expected[i]) + ";";
    }
  }
  EXPECT_EQ(bad, 0) << "FP8 outputs off by more than tolerance and one code:" << first_bad;
  EXPECT_LE(flips, static_cast<int64_t>(actual.size()) / 100)
      << flips << " of " << actual.size() << " FP8 outputs are one code from the reference's";
}

// decode_attention on `config` matches the CPU reference in every workspace mode: the output at
// SPEC's decode tolerance (FP8 / NVFP4 outputs by the rules above) and the LSE.
inline void expect_decode_matches_reference(const AttentionProblemConfig& config) {
  AttentionProblem problem(config);
  problem.compute_reference();
  AttentionDeviceProblem device(problem);
  const Tolerance out_tolerance =
      attention_tolerance(true, config.q_dtype, config.kv_dtype, config.out_dtype);
  // Scores go through tanh.approx with a soft-cap; otherwise lse is near-exact fp32.
  const Tolerance lse_tolerance =
      config.logit_soft_cap > 0.0f ? Tolerance{1e-2, 5e-2} : Tolerance{2e-3, 5e-3};

  const std::vector<float> truth =
      config.out_dtype == DType::kNVFP4 ? reference_bf16_values(problem) : std::vector<float>();
  run_decode_in_all_workspace_modes(device, [&] {
    if (config.out_dtype == DType::kNVFP4) {
      expect_nvfp4_close(problem, truth, device.download_out(), device.download_block_scales(),
                         out_tolerance);
    } else if (is_fp8(config.out_dtype)) {
      expect_fp8_close(problem, device.download_out(), out_tolerance);
    } else {
      const CompareResult out = device.compare_output(out_tolerance);
      EXPECT_TRUE(out.ok) << "output: " << out.summary();
    }
    const CompareResult lse = device.compare_lse(lse_tolerance);
    EXPECT_TRUE(lse.ok) << "lse: " << lse.summary();
  });
}

}  // namespace quench::testing_support
