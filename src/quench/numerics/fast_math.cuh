// One-instruction (MUFU) math for the attention kernels' softmax, shared by decode and prefill.
#pragma once

namespace quench {

// 2^x in one MUFU op (relative error ~2^-22, results under 2^-126 flush to 0, 2^-inf = 0),
// without exp2f's full-range fix-ups: the softmax's hottest instruction. Far below the bf16
// rounding of P, so it cannot change a P * V sum.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// tanh(x) in one MUFU op (tanh.approx.f32, sm_75+: maximum relative error ~2^-11), for
// soft-capped scores cap * tanh(s / cap): at cap 30 a score moves by at most ~0.02 in log2
// units, P by ~1.5% before its normalisation, inside the SPEC tolerances. tanhf cost ~20
// instructions per score, the soft-capped prefill's bottleneck (bf16 325 against 520 TFLOP/s
// uncapped at b2 x 8k on the H200, sixth session; 461 with this, seventh).
__device__ __forceinline__ float fast_tanh(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace quench
