#include "harness/compare.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "quench/core/error.h"
#include "quench/numerics/fp8.h"
#include "quench/numerics/nvfp4.h"

namespace quench::testing_support {

Tolerance attention_tolerance(bool decode, DType q_dtype, DType kv_dtype, DType out_dtype) {
  if (out_dtype == DType::kNVFP4) {
    return decode ? tolerance::kDecodeFp8QNvfp4Out : tolerance::kPrefillFp8QNvfp4Out;
  }
  if (is_fp8(out_dtype))
    return decode ? tolerance::kDecodeFp8QFp8Out : tolerance::kPrefillFp8QFp8Out;
  if (is_fp8(q_dtype))
    return decode ? tolerance::kDecodeFp8QBf16Out : tolerance::kPrefillFp8QBf16Out;
  if (is_fp8(kv_dtype)) return tolerance::kDecodeBf16QFp8Kv;
  return decode ? tolerance::kDecodeBf16 : tolerance::kPrefillBf16;
}

std::string CompareResult::summary() const {
  std::ostringstream out;
  out << (ok ? "PASS" : "FAIL") << ": " << num_mismatches - num_block_scale_mismatches << " of "
      << num_compared << " elements out of tolerance; max abs error " << max_abs_error
      << ", max rel error " << max_rel_error;
  if (num_block_scale_mismatches > 0) {
    out << "; " << num_block_scale_mismatches << " NVFP4 block scales off the reference's";
  }
  for (const Mismatch& m : first_mismatches) {
    out << "\n  token " << m.token << " head " << m.head << " dim " << m.dim << ": actual "
        << m.actual << " expected " << m.expected;
  }
  return out.str();
}

double fp8_half_step(DType dtype, double value, double o_scale) {
  const bool e4m3 = dtype == DType::kFP8E4M3;
  QUENCH_REQUIRE(e4m3 || dtype == DType::kFP8E5M2, "fp8_half_step: dtype ", dtype_name(dtype),
                 " is not an FP8 format; allowed: fp8_e4m3, fp8_e5m2");
  const int mantissa_bits = e4m3 ? 3 : 2;
  const int min_exponent = e4m3 ? -6 : -14;  // below it the format is subnormal, evenly spaced
  const double stored = std::fabs(value) / o_scale;
  const int exponent = stored > 0.0 ? std::max(std::ilogb(stored), min_exponent) : min_exponent;
  return 0.5 * std::ldexp(1.0, exponent - mantissa_bits) * o_scale;
}

double e2m1_half_step(double value, double unit) {
  const double magnitude = unit > 0.0 ? std::fabs(value) / unit : 0.0;
  const double half = magnitude < 2.0 ? 0.25 : magnitude < 4.0 ? 0.5 : 1.0;
  return half * unit;
}

CompareResult compare_values(const float* actual, const float* expected, int64_t num_tokens,
                             int64_t num_heads, int64_t head_dim, Tolerance tolerance,
                             const RoundingSlack* slack) {
  CompareResult result;
  result.num_compared = num_tokens * num_heads * head_dim;
  for (int64_t i = 0; i < result.num_compared; ++i) {
    const double a = actual[i];
    const double b = expected[i];
    bool pass = false;
    if (!std::isnan(a) && !std::isnan(b)) {
      const double error = std::fabs(a - b);
      if (std::isfinite(error)) {
        result.max_abs_error = std::max(result.max_abs_error, error);
        if (b != 0.0) result.max_rel_error = std::max(result.max_rel_error, error / std::fabs(b));
      }
      pass = a == b || error <= tolerance.atol + tolerance.rtol * std::fabs(b);
      if (!pass && slack != nullptr && std::isfinite(a)) {
        const double u = slack->unrounded[i];
        const double half_step = slack->half_steps != nullptr
                                     ? slack->half_steps[i]
                                     : fp8_half_step(slack->dtype, a, slack->o_scale);
        pass = std::fabs(a - u) <= tolerance.atol + tolerance.rtol * std::fabs(u) + half_step;
      }
    }
    if (pass) continue;
    ++result.num_mismatches;
    if (static_cast<int>(result.first_mismatches.size()) < CompareResult::kMaxReported) {
      result.first_mismatches.push_back(Mismatch{i / (num_heads * head_dim),
                                                 (i / head_dim) % num_heads, i % head_dim,
                                                 actual[i], expected[i]});
    }
  }
  result.ok = result.num_mismatches == 0;
  return result;
}

namespace {

// Relative distance between neighbouring e4m3 codes, at most (2^-3 at the bottom of a binade).
constexpr double kE4m3OneCode = 1.125;

// compare_outputs' NVFP4 block-scale bounds: a block whose reference values reach amax may have a
// kernel maximum within the value tolerance of it, and its scale rounds to an e4m3 code from
// there, so its scale lies within (1 +- rtol +- atol / amax) and one code of the reference's.
// Blocks whose reference is all zeros (or scale zero) bound nothing.
void check_nvfp4_block_scales(const AttentionOutputFormat& format, int64_t num_tokens,
                              const uint8_t* actual_scales, const uint8_t* expected_scales,
                              const std::vector<float>& expected, Tolerance tolerance,
                              CompareResult& result) {
  const int64_t scale_cols = format.row_elems / kNvfp4BlockSize;
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (int64_t col = 0; col < scale_cols; ++col) {
      const int64_t at = nvfp4_scale_offset(format.scale_row_offset + t, col, scale_cols);
      const double actual = fp8_e4m3_to_float(actual_scales[at]);
      const double reference = fp8_e4m3_to_float(expected_scales[at]);
      double amax = 0.0;
      for (int64_t i = 0; i < kNvfp4BlockSize; ++i) {
        amax = std::max(amax, std::fabs(static_cast<double>(
                                  expected[t * format.row_elems + col * kNvfp4BlockSize + i])));
      }
      if (!(amax > 0.0) || !(reference > 0.0)) continue;
      const double spread = tolerance.rtol + tolerance.atol / amax;
      const double ratio = actual / reference;
      if (ratio <= (1.0 + spread) * kE4m3OneCode && ratio >= (1.0 - spread) / kE4m3OneCode) {
        continue;  // NaN fails both
      }
      ++result.num_block_scale_mismatches;
      ++result.num_mismatches;
      result.ok = false;
    }
  }
}

}  // namespace

std::vector<float> decode_outputs(const AttentionOutputFormat& format, int64_t num_tokens,
                                  const void* data, const uint8_t* block_scales) {
  std::vector<float> values(static_cast<size_t>(num_tokens * format.row_elems));
  for (int64_t t = 0; t < num_tokens; ++t) {
    read_attention_output_row(format, t, data, block_scales, &values[t * format.row_elems]);
  }
  return values;
}

CompareResult compare_outputs(const AttentionOutputFormat& format, int64_t num_tokens,
                              int64_t num_heads, const void* actual,
                              const uint8_t* actual_block_scales, const void* expected,
                              const uint8_t* expected_block_scales, Tolerance tolerance,
                              const float* unrounded) {
  const std::vector<float> a = decode_outputs(format, num_tokens, actual, actual_block_scales);
  const std::vector<float> b = decode_outputs(format, num_tokens, expected, expected_block_scales);
  RoundingSlack slack;
  slack.unrounded = unrounded;
  slack.dtype = format.dtype;
  slack.o_scale = format.o_scale;
  const bool nvfp4 = format.dtype == DType::kNVFP4;
  const bool with_slack =
      unrounded != nullptr && (is_fp8(format.dtype) || (nvfp4 && actual_block_scales != nullptr));
  std::vector<float> half_steps;
  if (with_slack && nvfp4) {
    // Each element's half step in its block, from the kernel's block scale.
    const int64_t scale_cols = format.row_elems / kNvfp4BlockSize;
    half_steps.resize(a.size());
    for (int64_t t = 0; t < num_tokens; ++t) {
      for (int64_t i = 0; i < format.row_elems; ++i) {
        const int64_t col = i / kNvfp4BlockSize;
        const uint8_t block_scale =
            actual_block_scales[nvfp4_scale_offset(format.scale_row_offset + t, col, scale_cols)];
        const double unit = fp8_e4m3_to_float(block_scale) / format.nvfp4_global_scale;
        const size_t at = static_cast<size_t>(t * format.row_elems + i);
        half_steps[at] = static_cast<float>(e2m1_half_step(a[at], unit));
      }
    }
    slack.half_steps = half_steps.data();
  }
  CompareResult result =
      compare_values(a.data(), b.data(), num_tokens, num_heads, format.row_elems / num_heads,
                     tolerance, with_slack ? &slack : nullptr);
  if (nvfp4 && actual_block_scales != nullptr && expected_block_scales != nullptr) {
    check_nvfp4_block_scales(format, num_tokens, actual_block_scales, expected_block_scales, b,
                             tolerance, result);
  }
  return result;
}

}  // namespace quench::testing_support
