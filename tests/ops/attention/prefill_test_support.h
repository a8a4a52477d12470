// Helpers shared by the prefill attention GPU tests (generic and Hopper kernels): test-case
// construction, the run-and-compare step against the CPU reference, and an error map that
// locates a mismatch pattern (accumulator row, head-dim block, number of KV tiles) from one log.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "decode_test_support.h"
#include "harness/attention_device_problem.h"
#include "harness/attention_problem.h"
#include "harness/compare.h"
#include "harness/device_buffer.h"
#include "quench/core/error.h"
#include "quench/numerics/bf16.h"
#include "quench/ops/attention/attention_output.h"
#include "quench/ops/attention/attention_params.h"
#include "quench/ops/attention/attention_reference.h"
#include "quench/ops/attention/decode/decode_attention.h"
#include "quench/ops/attention/prefill/hopper/prefill_attention_hopper.h"

namespace quench::testing_support {

// A prefill kernel entry point (prefill_attention_generic, the Hopper runs below).
using PrefillKernel = void (*)(const AttentionParams&, cudaStream_t);

// The Hopper kernel with each P·V precision for an FP8 query (bf16 is its default).
inline void run_hopper_bf16_pv(const AttentionParams& params, cudaStream_t stream) {
  prefill_attention_hopper(params, stream, HopperPvPrecision::kBf16);
}
inline void run_hopper_fp8_pv(const AttentionParams& params, cudaStream_t stream) {
  prefill_attention_hopper(params, stream, HopperPvPrecision::kFp8);
}

// An LSE is a row's max plus the log of its sum, in fp32 in every kernel: held far tighter than
// the outputs (natural log units).
inline constexpr Tolerance kLseTolerance{1e-3, 1e-2};

// True when the current device is an sm_90 (Hopper) GPU, where the Hopper kernel runs.
inline bool device_is_sm90() {
  int device = 0;
  int major = 0;
  int minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  return major == 9 && minor == 0;
}

struct DtypeCase {
  DType q, kv, out;
};

// Skips a test unless the device runs the Hopper kernels.
#define SKIP_UNLESS_SM90() \
  if (!device_is_sm90()) GTEST_SKIP() << "the Hopper kernel needs an sm_90 device"

// An operand kind of the Hopper kernels: the dtypes and the entry that selects its P·V precision.
struct HopperKindCase {
  DtypeCase dtypes;
  PrefillKernel run;
  const char* name;
};

inline const HopperKindCase kHopperKinds[] = {
    {{DType::kFP8E4M3, DType::kFP8E4M3, DType::kBF16}, run_hopper_bf16_pv, "fp8 q, bf16 P·V"},
    {{DType::kFP8E4M3, DType::kFP8E4M3, DType::kBF16}, run_hopper_fp8_pv, "fp8 q, FP8 P·V"},
    {{DType::kBF16, DType::kBF16, DType::kBF16}, run_hopper_bf16_pv, "bf16 q, bf16 KV"},
    {{DType::kBF16, DType::kFP8E4M3, DType::kBF16}, run_hopper_bf16_pv, "bf16 q, fp8 KV"},
};

inline bool is_fp8_pv(const HopperKindCase& kind) {
  return kind.run == run_hopper_fp8_pv;
}

inline std::string describe(const AttentionProblemConfig& c) {
  return str_cat("q=", dtype_name(c.q_dtype), " kv=", dtype_name(c.kv_dtype),
                 " out=", dtype_name(c.out_dtype), " hq=", c.num_q_heads, " hkv=", c.num_kv_heads,
                 " d=", c.head_dim, " page=", c.page_size, " ", kv_layout_name(c.layout),
                 " window=", c.window_left, " cap=", c.logit_soft_cap, " sinks=", c.sinks,
                 " per_head=", c.per_head_kv_scales, " seqs=", c.seqs.size());
}

// Non-unit scales everywhere (SPEC §1.2 bugs hide behind scales of 1).
inline AttentionProblemConfig base_config(const DtypeCase& dtypes, int head_dim, uint64_t seed) {
  AttentionProblemConfig c;
  c.q_dtype = dtypes.q;
  c.kv_dtype = dtypes.kv;
  c.out_dtype = dtypes.out;
  c.head_dim = head_dim;
  c.q_scale = 0.75f;
  c.k_scale = 1.5f;
  c.v_scale = 0.6f;
  c.o_scale = 0.02f;
  c.seed = seed;
  return c;
}

// Where the errors of a failed run sit, as max |actual - expected| per class: packed row within
// a 128-row tile (8 classes of 16 rows = one warp's accumulator rows, then row % 16), head-dim
// block of 8 (one accumulator column block), number of 128-key tiles the row attends to, and
// whether the row is the diagonal's neighbourhood (position within 8 of the chunk's last key).
inline std::string error_map(const AttentionProblem& problem, const std::vector<float>& actual) {
  const AttentionProblemConfig& c = problem.config();
  const std::vector<float> expected = problem.expected_values();
  const int group = c.num_q_heads / c.num_kv_heads;
  std::vector<double> by_warp_rows(8, 0.0), by_row16(16, 0.0);
  std::vector<double> by_dim_block(static_cast<size_t>(c.head_dim / 8), 0.0);
  std::vector<double> by_tiles(4, 0.0);  // 1, 2, 3, 4+ tiles of 128 keys
  int64_t nans = 0;
  const std::vector<int32_t>& offsets = problem.q_offsets();
  for (int64_t t = 0; t < problem.num_tokens(); ++t) {
    const int32_t seq = problem.seq_of_token(t);
    const int64_t token_in_chunk = t - offsets[static_cast<size_t>(seq)];
    const int32_t pos = problem.pos_of_token(t);
    const size_t tiles = static_cast<size_t>(std::min(3, pos / 128));
    for (int h = 0; h < c.num_q_heads; ++h) {
      const int64_t m = token_in_chunk * group + h % group;
      const size_t tile_row = static_cast<size_t>(m % 128);
      for (int d = 0; d < c.head_dim; ++d) {
        const size_t i =
            (static_cast<size_t>(t) * static_cast<size_t>(c.num_q_heads) + static_cast<size_t>(h)) *
                static_cast<size_t>(c.head_dim) +
            static_cast<size_t>(d);
        if (std::isnan(actual[i])) {
          ++nans;
          continue;
        }
        const double err = std::fabs(static_cast<double>(actual[i]) - expected[i]);
        by_warp_rows[tile_row / 16] = std::max(by_warp_rows[tile_row / 16], err);
        by_row16[tile_row % 16] = std::max(by_row16[tile_row % 16], err);
        by_dim_block[static_cast<size_t>(d / 8)] =
            std::max(by_dim_block[static_cast<size_t>(d / 8)], err);
        by_tiles[tiles] = std::max(by_tiles[tiles], err);
      }
    }
  }
  const auto line = [](const char* name, const std::vector<double>& v) {
    std::string s = str_cat("  max err by ", name, ":");
    char buf[32];
    for (const double x : v) {
      std::snprintf(buf, sizeof(buf), " %.3g", x);
      s += buf;
    }
    return s + "\n";
  };
  return str_cat("error map (NaN outputs: ", nans, ")\n",
                 line("16-row warp slice of the 128-row tile", by_warp_rows),
                 line("row % 16 (accumulator row = lane/4 + 8r)", by_row16),
                 line("head-dim block of 8", by_dim_block),
                 line("128-key tiles before the row (0,1,2,3+)", by_tiles));
}

// The output and LSE of the run last made on `device` against the reference (computed): what
// keeps a test that compares runs with each other from passing when none of them is right, or
// none writes anything.
inline void expect_device_output_matches_reference(const AttentionProblem& problem,
                                                   const AttentionDeviceProblem& device,
                                                   const std::string& what) {
  const AttentionProblemConfig& config = problem.config();
  const CompareResult out = device.compare_output(
      attention_tolerance(false, config.q_dtype, config.kv_dtype, config.out_dtype));
  EXPECT_TRUE(out.ok) << what << " vs the reference: " << out.summary();
  if (config.lse) {
    const CompareResult lse = device.compare_lse(kLseTolerance);
    EXPECT_TRUE(lse.ok) << what << " (lse) vs the reference: " << lse.summary();
  }
}

// Runs `kernel` on `config` and checks output and LSE against the reference; on a mismatch the
// message adds the error map.
inline void expect_matches_reference(const AttentionProblemConfig& config, PrefillKernel kernel) {
  AttentionProblem problem(config);
  problem.compute_reference();
  AttentionDeviceProblem device(problem);
  kernel(device.params(), nullptr);
  QUENCH_CUDA_CHECK(cudaDeviceSynchronize());
  const Tolerance tolerance =
      attention_tolerance(false, config.q_dtype, config.kv_dtype, config.out_dtype);
  const CompareResult out = device.compare_output(tolerance);
  if (!out.ok) {
    const std::vector<uint8_t> bytes = device.download_out();
    const std::vector<uint8_t> scales = device.download_block_scales();
    const std::vector<float> actual =
        decode_outputs(problem.output_format(), problem.num_tokens(), bytes.data(),
                       scales.empty() ? nullptr : scales.data());
    ADD_FAILURE() << describe(config) << "\n" << out.summary() << error_map(problem, actual);
  }
  if (config.lse) {
    const CompareResult lse = device.compare_lse(kLseTolerance);
    EXPECT_TRUE(lse.ok) << describe(config) << " (lse)\n" << lse.summary();
  }
}

// Decode consistency (SPEC §1: decode and prefill kernels must not disagree on the same FP8 KV,
// vllm#54035): the last row of a prefill run by `kernel` equals the reference's decode of that
// token (decode tolerance; with FP8 P at its prefill one), the same kernel run as a one-row decode
// step bit for bit, and the decode kernel's result for the token (a bf16 query: the FP8 one
// dequantized where the prefill took FP8) within the two kernels' tolerances to the reference
// together.
inline void expect_last_prefill_row_equals_decode(const DtypeCase& kind, PrefillKernel kernel,
                                                  const char* kernel_name, uint64_t seed,
                                                  bool fp8_p) {
  SCOPED_TRACE(kernel_name);
  AttentionProblemConfig c = base_config(kind, 128, seed);
  c.num_q_heads = 32;
  c.num_kv_heads = 8;
  c.seqs = {{200, 1000}};
  c.lse = false;
  AttentionProblem problem(c);
  AttentionDeviceProblem device(problem);
  kernel(device.params(), nullptr);
  QUENCH_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<uint8_t> prefill_out = device.download_out();

  const AttentionOutputFormat format = problem.output_format();
  const int64_t row_bytes = attention_output_row_bytes(format);
  const int64_t last = problem.num_tokens() - 1;
  const int64_t q_row_bytes = static_cast<int64_t>(
      dtype_bytes(c.q_dtype, static_cast<size_t>(c.num_q_heads) * static_cast<size_t>(c.head_dim)));
  const std::vector<int32_t> decode_offsets = {0, 1};

  std::vector<uint8_t> reference_out(static_cast<size_t>(row_bytes));
  AttentionParams host = problem.host_params(reference_out.data(), nullptr, nullptr);
  host.q = problem.q_bytes().data() + last * q_row_bytes;
  host.q_offsets = decode_offsets.data();
  host.num_tokens = 1;
  host.max_q_len = 1;
  attention_reference(host);

  DeviceBuffer offsets = DeviceBuffer::from_host(decode_offsets);
  DeviceBuffer decode_out(static_cast<size_t>(row_bytes));
  AttentionParams step = device.params();
  step.q = static_cast<const uint8_t*>(step.q) + last * q_row_bytes;
  step.q_offsets = offsets.as<int32_t>();
  step.num_tokens = 1;
  step.max_q_len = 1;
  step.out = decode_out.get();
  kernel(step, nullptr);
  QUENCH_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<uint8_t> kernel_decode = decode_out.to_host<uint8_t>();

  // The decode kernel on the same token and cache.
  std::vector<uint16_t> q_bf16(static_cast<size_t>(c.num_q_heads) *
                               static_cast<size_t>(c.head_dim));
  for (int32_t h = 0; h < c.num_q_heads; ++h) {
    for (int32_t d = 0; d < c.head_dim; ++d)
      q_bf16[static_cast<size_t>(h) * c.head_dim + d] =
          float_to_bf16_bits(problem.q_value(last, h, d));
  }
  const DeviceBuffer q_decode = DeviceBuffer::from_host(q_bf16);
  DeviceBuffer decode_kernel_out(static_cast<size_t>(row_bytes));
  AttentionParams decode_step = step;
  decode_step.q = q_decode.get();
  decode_step.q_dtype = DType::kBF16;
  decode_step.q_scale = 1.0f;
  decode_step.out = decode_kernel_out.get();
  const DeviceBuffer workspace = zeroed_decode_workspace(decode_step);
  decode_attention(decode_step, workspace.get(), workspace.bytes(), nullptr);
  QUENCH_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<uint8_t> decode_kernel = decode_kernel_out.to_host<uint8_t>();

  const uint8_t* prefill_last = prefill_out.data() + last * row_bytes;
  // At the decode tolerance; a kernel that rounds P to e4m3 (fp8_p) at its own (prefill) one.
  const Tolerance prefill_tolerance =
      attention_tolerance(!fp8_p, c.q_dtype, c.kv_dtype, c.out_dtype);
  const CompareResult vs_reference =
      compare_outputs(format, 1, c.num_q_heads, prefill_last, nullptr, reference_out.data(),
                      nullptr, prefill_tolerance);
  EXPECT_TRUE(vs_reference.ok) << describe(c) << "\n" << vs_reference.summary();
  const CompareResult vs_kernel_decode = compare_outputs(
      format, 1, c.num_q_heads, prefill_last, nullptr, kernel_decode.data(), nullptr, {0.0, 0.0});
  EXPECT_TRUE(vs_kernel_decode.ok) << describe(c) << " (kernel decode)\n"
                                   << vs_kernel_decode.summary();
  const Tolerance decode_tolerance =
      attention_tolerance(true, DType::kBF16, c.kv_dtype, c.out_dtype);
  const Tolerance together{prefill_tolerance.rtol + decode_tolerance.rtol,
                           prefill_tolerance.atol + decode_tolerance.atol};
  const CompareResult vs_decode_kernel = compare_outputs(
      format, 1, c.num_q_heads, prefill_last, nullptr, decode_kernel.data(), nullptr, together);
  EXPECT_TRUE(vs_decode_kernel.ok) << describe(c) << " (decode kernel)\n"
                                   << vs_decode_kernel.summary();
}

}  // namespace quench::testing_support
