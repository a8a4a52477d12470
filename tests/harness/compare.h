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
  // NVFP4 (compare_outputs): block scales outside the reference's block scale's bounds, also
  // counted in num_mismatches (first_mismatches reports only elements).
  int64_t num_block_scale_mismatches = 0;

  static constexpr int kMaxReported = 8;
  // One line of counts and maxima, then one line per reported mismatch.
  std::string summary() const;
};

// An FP8 output's stored value is its kernel's value rounded to the format, and so is the
// reference's. Where the two sit on either side of a rounding midpoint they differ by a whole
// step (12.5% in e4m3) although the values before rounding agree to far inside the tolerance.
// With a slack, an element that misses the tolerance against the reference's stored value still
// passes when |actual - unrounded| <= tolerance + half a step of the format at |actual|: some
// value the kernel could have rounded to `actual` lies within tolerance of the reference before
// its rounding. `unrounded` is the reference computed with bf16 output.
// NVFP4 outputs flip the same way between neighbouring e2m1 codes (up to a third of the value),
// with the half step taken from the kernel's own block scale (half_steps).
struct RoundingSlack {
  const float* unrounded = nullptr;   // [num_tokens, num_heads, head_dim]
  DType dtype = DType::kFP8E4M3;      // fp8_e4m3 or fp8_e5m2 (unused with half_steps)
  double o_scale = 1.0;               // stored = fp8(value / o_scale)
  const float* half_steps = nullptr;  // NVFP4: each element's half step; null: fp8_half_step
};

// Half the spacing of `dtype` (fp8_e4m3 or fp8_e5m2) at the stored magnitude |value| / o_scale,
// in units of value.
double fp8_half_step(DType dtype, double value, double o_scale);

// Half the spacing of e2m1 (0, 0.5, 1, 1.5, 2, 3, 4, 6) at |value| in a block whose code 1 is
// worth `unit` (block scale / global scale), in units of value.
double e2m1_half_step(double value, double unit);

// Compares float tensors of shape [num_tokens, num_heads, head_dim] (lse: head_dim = 1).
CompareResult compare_values(const float* actual, const float* expected, int64_t num_tokens,
                             int64_t num_heads, int64_t head_dim, Tolerance tolerance,
                             const RoundingSlack* slack = nullptr);

// Decodes two stored attention outputs of the same format (bf16; fp8 times o_scale; nvfp4 with
// its block scales, may be null otherwise) for tokens [0, num_tokens) and compares the values.
// `unrounded` (FP8 and NVFP4 formats, may be null): the reference's values before the output's
// rounding, for the RoundingSlack above (NVFP4: half steps from actual_block_scales).
// NVFP4 with both block scales given: every block scale must also lie within the value
// tolerance and one e4m3 code of the reference's (a kernel picking larger scales rounds its
// blocks more coarsely, and the slack from its own scales would grow with it).
CompareResult compare_outputs(const AttentionOutputFormat& format, int64_t num_tokens,
                              int64_t num_heads, const void* actual,
                              const uint8_t* actual_block_scales, const void* expected,
                              const uint8_t* expected_block_scales, Tolerance tolerance,
                              const float* unrounded = nullptr);

// Decodes tokens [0, num_tokens) of a stored attention output to floats [num_tokens, row_elems].
std::vector<float> decode_outputs(const AttentionOutputFormat& format, int64_t num_tokens,
                                  const void* data, const uint8_t* block_scales);

}  // namespace quench::testing_support
