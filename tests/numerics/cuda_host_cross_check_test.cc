// Cross-checks quench's host conversions against the host implementations in CUDA's own headers
// (cuda_bf16.h, cuda_fp16.h, cuda_fp8.h, cuda_fp4.h) on a large sample of the 2^32 float bit
// patterns. The exhaustive device comparison is tests/gpu/numerics_exhaustive_gpu_test.cu; this
// one runs in CI without a GPU.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp4.h>
#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "quench/core/parallel_for.h"
#include "quench/numerics/bf16.h"
#include "quench/numerics/fp8.h"
#include "quench/numerics/nvfp4.h"

namespace quench {
namespace {

struct Conversion {
  const char* name;
  uint32_t (*ours)(float);
  uint32_t (*cuda)(float);
};

const Conversion kConversions[] = {
    {"bf16", [](float x) -> uint32_t { return float_to_bf16_bits(x); },
     [](float x) -> uint32_t { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }},
    {"f16", [](float x) -> uint32_t { return float_to_f16_bits(x); },
     [](float x) -> uint32_t { return __half_as_ushort(__float2half_rn(x)); }},
    {"fp8_e4m3", [](float x) -> uint32_t { return float_to_fp8_e4m3(x); },
     [](float x) -> uint32_t { return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3); }},
    {"fp8_e5m2", [](float x) -> uint32_t { return float_to_fp8_e5m2(x); },
     [](float x) -> uint32_t { return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2); }},
    {"e2m1", [](float x) -> uint32_t { return float_to_e2m1(x); },
     [](float x) -> uint32_t { return __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest); }},
};

// A set of float bit patterns given by an index -> pattern map.
struct PatternSet {
  std::string name;
  int64_t size;
  uint32_t (*pattern)(int64_t);
};

// Patterns spaced by the prime 31 (odd, so the 2^27 samples are distinct and spread over all
// exponents and signs).
uint32_t strided_pattern(int64_t i) {
  return static_cast<uint32_t>(i) * 31u;
}

// Patterns whose dropped low bits sit at or next to a rounding boundary, for every number of
// dropped bits d in [13, 31] (13 = f16 normals, 16 = bf16, 20 = e4m3, 21 = e5m2, 22 = e2m1;
// more for target subnormals): all 2^(32-d) high parts (so both parities of the kept bits), six
// low parts each (0, 1, half-1, half, half+1, all ones). Covers every tie of every format.
constexpr int kTieLowParts = 6;
int64_t tie_set_size() {
  int64_t total = 0;
  for (int d = 13; d <= 31; ++d)
    total += (int64_t{1} << (32 - d)) * kTieLowParts;
  return total;
}
uint32_t tie_pattern(int64_t i) {
  for (int d = 13; d <= 31; ++d) {
    const int64_t count = (int64_t{1} << (32 - d)) * kTieLowParts;
    if (i < count) {
      const uint32_t high = static_cast<uint32_t>(i / kTieLowParts) << d;
      const uint32_t half = 1u << (d - 1);
      const uint32_t lows[kTieLowParts] = {0u, 1u, half - 1u, half, half + 1u, (half << 1) - 1u};
      return high | lows[i % kTieLowParts];
    }
    i -= count;
  }
  return 0;
}

// Windows of 2^14 patterns on each side of each format's thresholds, both signs: max finite,
// the saturation/overflow boundaries, the smallest normals and subnormals, half the smallest
// subnormal, 1.0, and the float subnormals themselves (around 0).
constexpr float kAnchors[] = {448.0f,
                              464.0f,
                              480.0f,
                              57344.0f,
                              61440.0f,
                              65504.0f,
                              65520.0f,
                              6.0f,
                              5.0f,
                              7.0f,
                              0.25f,
                              0.5f,
                              1.0f,
                              0.015625f,
                              0.001953125f,
                              0.0009765625f,
                              6.103515625e-05f,
                              1.52587890625e-05f,
                              7.62939453125e-06f,
                              5.9604644775390625e-08f,
                              2.98023223876953125e-08f,
                              1.1754943508222875e-38f,
                              3.3895313892515355e+38f,
                              3.4028234663852886e+38f,
                              0.0f};
constexpr int64_t kWindowHalf = int64_t{1} << 14;
constexpr int64_t kNumAnchors = sizeof(kAnchors) / sizeof(kAnchors[0]);
uint32_t window_pattern(int64_t i) {
  const int64_t per_anchor = 4 * kWindowHalf;  // two signs x [-half, half)
  const int64_t anchor = i / per_anchor;
  const int64_t within = i % per_anchor;
  const uint32_t sign = within >= 2 * kWindowHalf ? 0x80000000u : 0u;
  const int64_t offset = within % (2 * kWindowHalf) - kWindowHalf;
  const uint32_t base = float_to_bits(kAnchors[anchor]);
  const int64_t bits = std::clamp<int64_t>(int64_t{base} + offset, 0, 0x7fffffff);
  return sign | static_cast<uint32_t>(bits);
}

struct Mismatch {
  uint32_t input, ours, cuda;
};

// Compares every conversion on every pattern of `set`; returns one failure line per format.
std::vector<std::string> compare_on(const PatternSet& set) {
  constexpr int64_t kChunk = 1 << 16;
  const int64_t chunks = (set.size + kChunk - 1) / kChunk;
  constexpr size_t kFormats = sizeof(kConversions) / sizeof(kConversions[0]);
  std::vector<int64_t> counts(kFormats, 0);
  std::vector<std::vector<Mismatch>> firsts(kFormats);
  std::mutex mutex;
  parallel_for(chunks, [&](int64_t chunk) {
    const int64_t end = std::min(set.size, (chunk + 1) * kChunk);
    for (size_t f = 0; f < kFormats; ++f) {
      std::vector<Mismatch> local;
      int64_t local_count = 0;
      for (int64_t i = chunk * kChunk; i < end; ++i) {
        const uint32_t bits = set.pattern(i);
        const float x = bits_to_float(bits);
        const uint32_t ours = kConversions[f].ours(x);
        const uint32_t cuda = kConversions[f].cuda(x);
        if (ours != cuda) {
          ++local_count;
          if (local.size() < 5) local.push_back({bits, ours, cuda});
        }
      }
      if (local_count == 0) continue;
      std::lock_guard<std::mutex> lock(mutex);
      counts[f] += local_count;
      firsts[f].insert(firsts[f].end(), local.begin(), local.end());
    }
  });
  std::vector<std::string> failures;
  for (size_t f = 0; f < kFormats; ++f) {
    if (counts[f] == 0) continue;
    std::sort(firsts[f].begin(), firsts[f].end(),
              [](const Mismatch& a, const Mismatch& b) { return a.input < b.input; });
    firsts[f].erase(
        std::unique(firsts[f].begin(), firsts[f].end(),
                    [](const Mismatch& a, const Mismatch& b) { return a.input == b.input; }),
        firsts[f].end());
    std::string line = std::string(kConversions[f].name) + " on " + set.name + ": " +
                       std::to_string(counts[f]) + " mismatches;";
    char buf[96];
    for (size_t k = 0; k < std::min<size_t>(5, firsts[f].size()); ++k) {
      std::snprintf(buf, sizeof(buf), " [x=0x%08x ours=0x%x cuda=0x%x]", firsts[f][k].input,
                    firsts[f][k].ours, firsts[f][k].cuda);
      line += buf;
    }
    failures.push_back(line);
  }
  return failures;
}

TEST(NumericsCudaHostCrossCheck, StridedPatterns) {
  const PatternSet set{"strided patterns", int64_t{1} << 27, strided_pattern};
  for (const std::string& failure : compare_on(set))
    ADD_FAILURE() << failure;
}

TEST(NumericsCudaHostCrossCheck, PatternsAtEveryRoundingBoundary) {
  const PatternSet set{"rounding-boundary patterns", tie_set_size(), tie_pattern};
  for (const std::string& failure : compare_on(set))
    ADD_FAILURE() << failure;
}

TEST(NumericsCudaHostCrossCheck, WindowsAroundThresholds) {
  const PatternSet set{"threshold windows", kNumAnchors * 4 * kWindowHalf, window_pattern};
  for (const std::string& failure : compare_on(set))
    ADD_FAILURE() << failure;
}

TEST(NumericsCudaHostCrossCheck, DecodeOfEveryFp8CodeMatchesCuda) {
  for (int code = 0; code < 256; ++code) {
    const auto v = static_cast<uint8_t>(code);
    const float cuda_e4m3 = __half2float(__half(__nv_cvt_fp8_to_halfraw(v, __NV_E4M3)));
    const float cuda_e5m2 = __half2float(__half(__nv_cvt_fp8_to_halfraw(v, __NV_E5M2)));
    EXPECT_EQ(float_to_bits(fp8_e4m3_to_float(v)), float_to_bits(cuda_e4m3))
        << "e4m3 code 0x" << std::hex << code;
    EXPECT_EQ(float_to_bits(fp8_e5m2_to_float(v)), float_to_bits(cuda_e5m2))
        << "e5m2 code 0x" << std::hex << code;
  }
}

TEST(NumericsCudaHostCrossCheck, DecodeOfEveryE2m1CodeMatchesCuda) {
  for (int code = 0; code < 16; ++code) {
    const auto v = static_cast<__nv_fp4_storage_t>(code);
    const float cuda = __half2float(__half(__nv_cvt_fp4_to_halfraw(v, __NV_E2M1)));
    EXPECT_EQ(float_to_bits(e2m1_to_float(static_cast<uint8_t>(code))), float_to_bits(cuda))
        << "e2m1 code 0x" << std::hex << code;
  }
}

}  // namespace
}  // namespace quench
