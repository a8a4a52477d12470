// Register-level building blocks of the decode kernel: the m16n8k16 tensor-core product,
// FP8 -> bf16/f16 pair conversion in registers, packing, exp2/tanh, and cp.async.
//
// All of it is sm_80 PTX (mma.sync, cp.async, prmt), so the compute_80 pass compiles the same
// code the sm_90a pass does.
#pragma once

#include <cstdint>

#include "quench/numerics/half_pair.cuh"

namespace quench::decode {

// Which 16-bit type the tensor cores multiply in: bf16 over a bf16 cache, f16 over an FP8 cache
// (every FP8 value is exact in f16; a bf16 query is scaled into f16 range exactly first).
enum class MmaType { kBF16, kF16 };

// c += a * b for one m16n8k16 tile. a: 16x16 row-major fragment (4 regs), b: 16x8 column
// fragment (2 regs), c: 16x8 fp32 accumulator (4 regs), PTX ISA fragment layouts.
template <MmaType kType>
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                          uint32_t b1) {
  if constexpr (kType == MmaType::kBF16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// Byte permute: result byte i = byte (selector nibble i) of the 8-byte value {b, a}.
__device__ __forceinline__ uint32_t byte_perm(uint32_t a, uint32_t b, uint32_t selector) {
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(r) : "r"(a), "r"(b), "r"(selector));
  return r;
}

// Selector placing byte `lo` of {b,a} in result byte 1 and byte `hi` in result byte 3: each
// 16-bit half then holds fp8 << 8, the start of the conversion below.
__host__ __device__ constexpr uint32_t fp8_pair_selector(uint32_t lo, uint32_t hi) {
  return (lo << 4) | (hi << 12);
}

enum class Fp8Kind { kE4M3, kE5M2 };

// Converts two FP8 values, held as the high bytes of the two halves of `x` (fp8 << 8), into a
// packed pair of the MMA type with the exact same values. The FP8 bits are moved into the wider
// format's fields, which divides the value by a power of two (the exponent-bias difference);
// a power-of-two multiply (exact, subnormals included) restores it, so the tensor cores never
// see values near fp32's subnormal range.
template <Fp8Kind kKind, MmaType kType>
__device__ __forceinline__ uint32_t fp8x2_bits_to_mma_pair(uint32_t x) {
  if constexpr (kKind == Fp8Kind::kE5M2 && kType == MmaType::kF16) {
    return x & 0xff00ff00u;  // e5m2 is the top byte of an f16
  } else {
    constexpr int kShift = kType == MmaType::kF16 ? 1 : (kKind == Fp8Kind::kE4M3 ? 4 : 3);
    const uint32_t r = (x & 0x80008000u) | ((x & 0x7f007f00u) >> kShift);
    uint32_t out;
    if constexpr (kType == MmaType::kF16) {
      // e4m3 -> f16 fields: value / 2^8; 256.0 as an f16 pair.
      asm("fma.rn.f16x2 %0, %1, %2, %3;\n"
          : "=r"(out)
          : "r"(r), "r"(0x5c005c00u), "r"(0x80008000u));
    } else {
      // 2^120 (e4m3: bias 127 - 7) or 2^112 (e5m2: bias 127 - 15), as bf16 pairs.
      constexpr uint32_t kRestore = kKind == Fp8Kind::kE4M3 ? 0x7b807b80u : 0x77807780u;
      asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(out) : "r"(r), "r"(kRestore), "r"(0x80008000u));
    }
    return out;
  }
}

// The pair (byte `lo` of {b,a}, byte `hi` of {b,a}) of FP8 values as a pair of the MMA type,
// `lo` in the low half. sm_89+ converts to f16 with one instruction; bf16 (and older GPUs) use
// the bit moves above. lo and hi are compile-time constants after unrolling.
template <Fp8Kind kKind, MmaType kType>
__device__ __forceinline__ uint32_t fp8_pair_to_mma(uint32_t a, uint32_t b, uint32_t lo,
                                                    uint32_t hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  if constexpr (kType == MmaType::kF16) {
    const uint32_t packed = byte_perm(a, b, lo | (hi << 4));
    uint32_t out;
    if constexpr (kKind == Fp8Kind::kE4M3) {
      asm("{\n .reg .b16 lo16, hi16;\n mov.b32 {lo16, hi16}, %1;\n"
          " cvt.rn.f16x2.e4m3x2 %0, lo16;\n}\n"
          : "=r"(out)
          : "r"(packed));
    } else {
      asm("{\n .reg .b16 lo16, hi16;\n mov.b32 {lo16, hi16}, %1;\n"
          " cvt.rn.f16x2.e5m2x2 %0, lo16;\n}\n"
          : "=r"(out)
          : "r"(packed));
    }
    return out;
  }
#endif
  return fp8x2_bits_to_mma_pair<kKind, kType>(byte_perm(a, b, fp8_pair_selector(lo, hi)));
}

// The four FP8 values of word w (byte 0 first) as two MMA pairs: lo_pair = bytes 0, 1 and
// hi_pair = bytes 2, 3. On sm_89+ with f16 this is two conversions reading the word's halves
// directly, without the byte permutes fp8_pair_to_mma needs for arbitrary bytes.
template <Fp8Kind kKind, MmaType kType>
__device__ __forceinline__ void fp8_quad_to_mma(uint32_t w, uint32_t& lo_pair, uint32_t& hi_pair) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  if constexpr (kType == MmaType::kF16) {
    if constexpr (kKind == Fp8Kind::kE4M3) {
      asm("{\n .reg .b16 lo16, hi16;\n mov.b32 {lo16, hi16}, %2;\n"
          " cvt.rn.f16x2.e4m3x2 %0, lo16;\n cvt.rn.f16x2.e4m3x2 %1, hi16;\n}\n"
          : "=r"(lo_pair), "=r"(hi_pair)
          : "r"(w));
    } else {
      asm("{\n .reg .b16 lo16, hi16;\n mov.b32 {lo16, hi16}, %2;\n"
          " cvt.rn.f16x2.e5m2x2 %0, lo16;\n cvt.rn.f16x2.e5m2x2 %1, hi16;\n}\n"
          : "=r"(lo_pair), "=r"(hi_pair)
          : "r"(w));
    }
    return;
  }
#endif
  lo_pair = fp8_pair_to_mma<kKind, kType>(w, w, 0, 1);
  hi_pair = fp8_pair_to_mma<kKind, kType>(w, w, 2, 3);
}

// The FP8 values of bytes 2h and 2h + 1 of words a and b, paired across the words (the same
// column of two tile rows): lo_pair = (byte 2h of a, byte 2h of b), hi_pair = (byte 2h + 1 of a,
// byte 2h + 1 of b), a's value in the low half. On sm_89+ with f16 one byte permute feeds both
// conversions (fp8_pair_to_mma would permute once per pair).
template <Fp8Kind kKind, MmaType kType>
__device__ __forceinline__ void fp8_column_pairs_to_mma(uint32_t a, uint32_t b, int h,
                                                        uint32_t& lo_pair, uint32_t& hi_pair) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  if constexpr (kType == MmaType::kF16) {
    fp8_quad_to_mma<kKind, kType>(byte_perm(a, b, h == 0 ? 0x5140u : 0x7362u), lo_pair, hi_pair);
    return;
  }
#endif
  lo_pair = fp8_pair_to_mma<kKind, kType>(a, b, 2 * h, 4 + 2 * h);
  hi_pair = fp8_pair_to_mma<kKind, kType>(a, b, 2 * h + 1, 5 + 2 * h);
}

// Transposes an 8x8 matrix of 16-bit values held in the accumulator layout (lane 4 g + c holds
// row g, columns 2c and 2c + 1): returns row g, columns 2c, 2c + 1 of the transpose (sm_75+).
__device__ __forceinline__ uint32_t transpose_8x8_b16(uint32_t x) {
  uint32_t r;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(r) : "r"(x));
  return r;
}

// Loads kBytes (8, 16 or 32; 8-byte aligned) of shared memory into words w[0, kBytes / 4).
template <int kBytes>
__device__ __forceinline__ void load_words(const uint8_t* src, uint32_t* w) {
  if constexpr (kBytes == 8) {
    const uint2 v = *reinterpret_cast<const uint2*>(src);
    w[0] = v.x, w[1] = v.y;
  } else {
    static_assert(kBytes % 16 == 0);
#pragma unroll
    for (int i = 0; i < kBytes / 16; ++i) {
      const uint4 v = reinterpret_cast<const uint4*>(src)[i];
      w[4 * i] = v.x, w[4 * i + 1] = v.y, w[4 * i + 2] = v.z, w[4 * i + 3] = v.w;
    }
  }
}

// ldmatrix.x4 (sm_75+): lanes 8i .. 8i + 7 give the shared addresses of the 8 rows (16 bytes
// each) of 8x8 matrix i of 16-bit values; r[i] of lane 4 g + c = row g, columns 2c, 2c + 1 of
// matrix i (kTrans: of its transpose, i.e. column g, rows 2c, 2c + 1).
template <bool kTrans>
__device__ __forceinline__ void load_matrix_x4(uint32_t smem_addr, uint32_t (&r)[4]) {
  if constexpr (kTrans) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr));
  }
}

// Packs two floats into a pair of the MMA type (round to nearest even); `lo` in the low half.
template <MmaType kType>
__device__ __forceinline__ uint32_t pack_pair(float lo, float hi) {
  return pack_half_pair<kType == MmaType::kBF16>(lo, hi);
}

// 16-byte global -> shared copy that bypasses L1; when !valid nothing is read and the 16 bytes
// are zero-filled (masked tokens must hold finite values: 0 * NaN would poison P.V).
__device__ __forceinline__ void cp_async_16(uint32_t smem_addr, const void* global_ptr,
                                            bool valid) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr), "l"(global_ptr),
               "r"(src_bytes));
}

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}

// Waits until at most `pending` committed groups are still in flight (pending is a runtime
// stage count; the instruction needs an immediate).
__device__ __forceinline__ void cp_async_wait_pending(int pending) {
  switch (pending) {
    case 0:
      asm volatile("cp.async.wait_group 0;\n" ::);
      break;
    case 1:
      asm volatile("cp.async.wait_group 1;\n" ::);
      break;
    case 2:
      asm volatile("cp.async.wait_group 2;\n" ::);
      break;
    case 3:
      asm volatile("cp.async.wait_group 3;\n" ::);
      break;
    case 4:
      asm volatile("cp.async.wait_group 4;\n" ::);
      break;
    case 5:
      asm volatile("cp.async.wait_group 5;\n" ::);
      break;
    default:
      asm volatile("cp.async.wait_group 6;\n" ::);
      break;
  }
}

__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

}  // namespace quench::decode
