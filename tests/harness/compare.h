// Elementwise comparison of an implementation's output against the reference's, with the
// tolerances FlashInfer/vLLM kernel tests use (SPEC §3). An element passes when
// |actual - expected| <= atol + rtol * |expected|, or when both are equal (infinities); NaN on
// either side never passes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "quench/core/dtype.h"
#include "quench/ops/attention/attention_output.h"

namespace quench::testing_support {

struct Tolerance {
  double rtol = 0.0;
  double atol = 0.0;
};

// SPEC §3 (rtol, atol), decode / prefill, named by query dtype, KV dtype and output dtype.
namespace tolerance {
inline constexpr Tolerance kDecodeBf16{1e-2, 1e-2};
inline constexpr Tolerance kPrefillBf16{1e-2, 1e-2};
inline constexpr Tolerance kDecodeFp8QBf16Out{2e-2, 2e-2};
inline constexpr Tolerance kPrefillFp8QBf16Out{2e-2, 3e-2};
inline constexpr Tolerance kDecodeFp8QFp8Out{3e-2, 4e-2};
inline constexpr Tolerance kPrefillFp8QFp8Out{4e-2, 6e-2};
inline constexpr Tolerance kDecodeFp8QNvfp4Out{7e-2, 9e-2};
inline constexpr Tolerance kPrefillFp8QNvfp4Out{3e-1, 4e-1};
inline constexpr Tolerance kDecodeBf16QFp8Kv{4e-2, 6e-2};
}  // namespace tolerance

// The SPEC §3 entry for a kernel: the output dtype decides first (nvfp4, then fp8), then an FP8
// query, then a 16-bit query over an FP8 cache (the table only has decode; prefill uses it
// too), else bf16.
Tolerance attention_tolerance(bool decode, DType q_dtype, DType kv_dtype, DType out_dtype);

struct Mismatch {
  int64_t token = 0;
  int64_t head = 0;
  int64_t dim = 0;
  float actual = 0.0f;
  float expected = 0.0f;
};

struct CompareResult {
  bool ok = true;
  int64_t num_compared = 0;
  int64_t num_mismatches = 0;
  double max_abs_error = 0.0;              // over finite pairs
  double max_rel_error = 0.0;              // |a - b| / |b| over finite pairs with b != 0
  std::vector<Mismatch> first_mismatches;  // at most kMaxReported, in index order

  static constexpr int kMaxReported = 8;
  // One line of counts and maxima, then one line per reported mismatch.
  std::string summary() const;
};

// Compares float tensors of shape [num_tokens, num_heads, head_dim] (lse: head_dim = 1).
CompareResult compare_values(const float* actual, const float* expected, int64_t num_tokens,
                             int64_t num_heads, int64_t head_dim, Tolerance tolerance);

// Decodes two stored attention outputs of the same format (bf16; fp8 times o_scale; nvfp4 with
// its block scales, may be null otherwise) for tokens [0, num_tokens) and compares the values.
CompareResult compare_outputs(const AttentionOutputFormat& format, int64_t num_tokens,
                              int64_t num_heads, const void* actual,
                              const uint8_t* actual_block_scales, const void* expected,
                              const uint8_t* expected_block_scales, Tolerance tolerance);

// Decodes tokens [0, num_tokens) of a stored attention output to floats [num_tokens, row_elems].
std::vector<float> decode_outputs(const AttentionOutputFormat& format, int64_t num_tokens,
                                  const void* data, const uint8_t* block_scales);

}  // namespace quench::testing_support
