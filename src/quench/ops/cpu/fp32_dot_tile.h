// The inner loop the CPU backend's fast ops share (linear_cpu, attention_cpu): dot products of a
// tile of R rows of one matrix with T rows of another, in fp32, each sum kept in kLanes
// interleaved partial sums so that the multiply-adds vectorise and do not wait on each other.
//
// Callers compile it inside QUENCH_CPU_CLONES functions: the always_inline body then takes the
// clone's instruction set (AVX2 + FMA, or the x86-64 baseline).
#pragma once

#include <cstdint>
#include <cstring>

// x86-64: one clone of a function for AVX2 + FMA machines, one for the baseline, chosen at load
// time (the build targets the baseline; the GPU hosts and CI run either).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define QUENCH_CPU_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define QUENCH_CPU_CLONES
#endif

namespace quench::cpu {

// Partial sums per dot product (a 256-bit vector of fp32).
inline constexpr int kLanes = 8;

// kLanes fp32 values in one vector (GCC's vector extension: one 256-bit register where the clone
// has AVX2, two 128-bit ones in the baseline).
using Lanes = float __attribute__((vector_size(kLanes * sizeof(float))));

// The same vector at 4-byte alignment: how rows of floats are loaded.
using UnalignedLanes = float __attribute__((vector_size(kLanes * sizeof(float)), aligned(4)));

// kLanes floats at p as one vector (a reference, not a value: passing 256-bit vectors by value
// would depend on the clone's ABI).
[[gnu::always_inline]] inline const UnalignedLanes& lanes_at(const float* p) {
  return *reinterpret_cast<const UnalignedLanes*>(p);
}
[[gnu::always_inline]] inline UnalignedLanes& lanes_at(float* p) {
  return *reinterpret_cast<UnalignedLanes*>(p);
}

// sums[r * T + t] = dot(a row r, b row t) over n elements, for R rows of a and T rows of b, each
// `stride` floats apart. Element k joins partial k % kLanes; the partials are added pairwise at
// the end. R * T accumulators plus R + T operands must fit the 16 vector registers of AVX2.
template <int R, int T>
[[gnu::always_inline]] inline void dot_tile(const float* a, const float* b, int64_t n,
                                            int64_t stride, float* sums) {
  Lanes acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t)
      acc[r][t] = Lanes{};
  int64_t k = 0;
  for (; k + kLanes <= n; k += kLanes) {
    Lanes av[R], bv[T];
    for (int r = 0; r < R; ++r)
      av[r] = lanes_at(a + r * stride + k);
    for (int t = 0; t < T; ++t)
      bv[t] = lanes_at(b + t * stride + k);
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t)
        acc[r][t] += av[r] * bv[t];
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) {
      float p[kLanes];
      std::memcpy(p, &acc[r][t], sizeof(p));
      for (int l = 0; k + l < n; ++l)  // the tail: elements k + l join partial l
        p[l] += a[r * stride + k + l] * b[t * stride + k + l];
      sums[r * T + t] = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
    }
  }
}

}  // namespace quench::cpu
