// Thin wrappers over the sm_90a PTX of warpgroup MMA, which the Hopper prefill kernels are built
// from and the decode kernel's FP8 Q·Kᵀ variant uses: wgmma.mma_async with its fence / commit /
// wait, shared-memory matrix descriptors for the 128-byte swizzle, and the async-proxy fence.
// Only compiled for sm_90a (the caller guards with QUENCH_SM90A_ENABLED).
//
// Layouts (PTX ISA "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"):
// - Accumulator of m64nN: warp w of the warpgroup owns rows 16w..16w+15; lane l holds
//   d[4j + 2r + c] = D[16w + l/4 + 8r][8j + 2(l%4) + c], j < N/8, r and c in {0, 1}
//   (the mma.sync m16n8 C layout repeated over N/8 column blocks).
// - A K-major operand tile in shared memory with 128-byte swizzle: row r (an M or N index) is
//   128 bytes of K; its 16-byte chunk c is stored at r * 128 + ((c ^ (r % 8)) * 16); the tile
//   starts 1024-byte aligned, 8-row groups are 1024 bytes apart. One k32 (FP8) or k16 (bf16)
//   step covers 32 bytes of each row, so step s starts 32 * s bytes into the tile. Rows longer
//   than 128 bytes are split into column blocks of 128 bytes, each its own swizzled tile.
#pragma once

#include <cstdint>

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define QUENCH_SM90A_ENABLED 1
#endif

namespace quench::sm90 {

#ifdef QUENCH_SM90A_ENABLED

inline constexpr int kSwizzleAtomBytes = 1024;  // 8 rows of 128 bytes

__device__ __forceinline__ uint32_t smem_address(const void* ptr) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(ptr));
}

// Byte offset of 16-byte chunk `chunk` of row `row` in a 128-byte-swizzled K-major tile.
__device__ __forceinline__ int swizzle128_offset(int row, int chunk) {
  return row * 128 + ((chunk ^ (row & 7)) << 4);
}

// Matrix descriptor of a K-major, 128-byte-swizzled tile starting at shared byte address
// `address` (1024-aligned, or 32 * s past an aligned tile for k-step s): start address >> 4 in
// bits 0-13, leading byte offset (unused for this layout, conventionally 1) in bits 16-29,
// stride byte offset 1024 >> 4 (between 8-row groups) in bits 32-45, base offset 0 in bits
// 49-51, layout type 1 (SWIZZLE_128B) in bits 62-63.
__device__ __forceinline__ uint64_t smem_descriptor_sw128(uint32_t address) {
  return static_cast<uint64_t>((address & 0x3ffffu) >> 4) | (uint64_t{1} << 16) |
         (static_cast<uint64_t>(kSwizzleAtomBytes >> 4) << 32) | (uint64_t{1} << 62);
}

// The descriptor of the tile `bytes` past `desc`'s start: the start address field (bits 0-13,
// 16-byte units) of the low word only. Shared addresses stay below 2^18, so it never carries
// out of the field; one uniform add per wgmma instead of rebuilding the descriptor.
__device__ __forceinline__ uint64_t descriptor_plus(uint64_t desc, uint32_t bytes) {
  const uint32_t lo = static_cast<uint32_t>(desc) + (bytes >> 4);
  return (desc & 0xffffffff00000000ull) | lo;
}

// Matrix descriptor of an MN-major (N contiguous: imm-trans-b), 128-byte-swizzled 16-bit tile
// at `address` (1024-aligned): each K row holds 64 N elements in 128 bytes, chunk c of row r
// at r * 128 + ((c ^ (r % 8)) * 16) as in the K-major tile; 8-row K groups are 1024 bytes
// apart (stride byte offset) and 64-element N blocks `n_block_bytes` apart (leading byte
// offset). PTX ISA canonical layout ((8,8,m),(8,k)):((1,8,LBO),(64,SBO)) in elements.
__device__ __forceinline__ uint64_t smem_descriptor_sw128_mn_major(uint32_t address,
                                                                   uint32_t n_block_bytes) {
  return static_cast<uint64_t>((address & 0x3ffffu) >> 4) |
         (static_cast<uint64_t>((n_block_bytes & 0x3ffffu) >> 4) << 16) |
         (static_cast<uint64_t>(kSwizzleAtomBytes >> 4) << 32) | (uint64_t{1} << 62);
}

// Stores four 8x8 b16 matrices: lane l gives the (shared) row address of matrix l / 8, row l % 8
// (16 bytes, 16-byte aligned), and holds in r[m] row l / 4, bytes 4 (l % 4)..+3 of matrix m (the
// ldmatrix fragment layout).
__device__ __forceinline__ void stmatrix_x4(const uint32_t (&r)[4], uint32_t row_address) {
  asm volatile(
      "stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(row_address),
      "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
      : "memory");
}

// Orders this thread's generic-proxy shared-memory writes (st.shared, cp.async) before later
// async-proxy reads (wgmma operands); followed by a barrier for other threads' writes.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Makes prior register writes (accumulators, A fragments) visible to the next wgmma.
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void wgmma_commit_group() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

// Waits until at most kPending committed wgmma groups are still in flight.
template <int kPending>
__device__ __forceinline__ void wgmma_wait_group() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

// Pins an accumulator register at this point of the program so the compiler cannot move its
// reads or writes across the asynchronous wgmma that owns it.
template <int N>
__device__ __forceinline__ void fence_registers(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
    asm volatile("" : "+f"(r[i])::"memory");
}

// Same for register A fragments, which must stay live and unchanged until the wgmma completes.
template <int M, int N>
__device__ __forceinline__ void fence_registers(uint32_t (&r)[M][N]) {
#pragma unroll
  for (int i = 0; i < M; ++i) {
#pragma unroll
    for (int j = 0; j < N; ++j)
      asm volatile("" : "+r"(r[i][j])::"memory");
  }
}

// wgmma m64n128k32 e4m3 x e4m3 -> f32, A and B from shared memory (both K-major descriptors).
// d (64x128 f32, accumulator layout above) = (accumulate ? d : 0) + A (64x32) * B (128x32)^T.
__device__ __forceinline__ void wgmma_m64n128k32_e4m3_ss(float (&d)[64], uint64_t desc_a,
                                                         uint64_t desc_b, bool accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "
      "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "
      "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "
      "%56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
        "+f"(d[63])
      : "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate)));
}

// One asm statement for both A types of wgmma_m64n16k32_f8_e4m3_ss (ATYPE: its PTX type).
#define QUENCH_WGMMA_M64N16K32_F8_SS(ATYPE)                                                 \
  asm volatile(                                                                             \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"                                          \
      "wgmma.mma_async.sync.aligned.m64n16k32.f32." ATYPE                                   \
      ".e4m3 {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1;\n}\n"                       \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), \
        "+f"(d[7])                                                                          \
      : "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate)))

// wgmma m64n16k32 FP8 x e4m3 -> f32, A (kAIsE5m2: e5m2, else e4m3; the dtype of an FP8 KV cache)
// and B (e4m3) from shared memory (K-major descriptors): d (64x16 f32, accumulator layout above:
// d[4j + 2r + c] = D[16w + l/4 + 8r][8j + 2(l%4) + c]) = (accumulate ? d : 0) + A (64x32) *
// B (16x32)^T.
template <bool kAIsE5m2>
__device__ __forceinline__ void wgmma_m64n16k32_f8_e4m3_ss(float (&d)[8], uint64_t desc_a,
                                                           uint64_t desc_b, bool accumulate) {
  if constexpr (kAIsE5m2) {
    QUENCH_WGMMA_M64N16K32_F8_SS("e5m2");
  } else {
    QUENCH_WGMMA_M64N16K32_F8_SS("e4m3");
  }
}
#undef QUENCH_WGMMA_M64N16K32_F8_SS

// Same with A from registers: a holds this thread's 16 e4m3 values of the 64x32 A tile
// (register i, byte v: row 16 * warp + lane / 4 + 8 * (i % 2), k = 4 * (lane % 4) + v +
// 16 * (i / 2); PTX ISA "Register fragment for matrix A", 8-bit types).
__device__ __forceinline__ void wgmma_m64n128k32_e4m3_rs(float (&d)[64], const uint32_t (&a)[4],
                                                         uint64_t desc_b, bool accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "
      "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "
      "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "
      "%56, %57, %58, %59, %60, %61, %62, %63}, "
      "{%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
        "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(static_cast<int>(accumulate)));
}

// Accumulator operand lists of the 16-bit wgmma forms below (N / 2 fp32 registers per thread).

#define QUENCH_WGMMA_D32                                                                          \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),    \
      "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),  \
      "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),  \
      "+f"(d[29]), "+f"(d[30]), "+f"(d[31])

#define QUENCH_WGMMA_D64                                                                          \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),    \
      "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),  \
      "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),  \
      "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),  \
      "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),  \
      "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),  \
      "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),  \
      "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

#define QUENCH_WGMMA_D128                                                                         \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),    \
      "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),  \
      "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),  \
      "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),  \
      "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),  \
      "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),  \
      "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),  \
      "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),  \
      "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]),  \
      "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]),  \
      "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]),  \
      "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]),  \
      "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]),  \
      "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]),          \
      "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]),         \
      "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]),         \
      "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]),         \
      "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

// wgmma m64n64k32 e4m3 x e4m3 -> f32, A and B from shared memory (K-major): the m64n128k32 product
// above for a 64-row B (Q K^T over 64-key tiles: bf16 q over FP8 KV at head_dim 256).
__device__ __forceinline__ void wgmma_m64n64k32_e4m3_ss(float (&d)[32], uint64_t desc_a,
                                                        uint64_t desc_b, bool accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "
      "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "%32, %33, p, 1, 1;\n}\n"
      : QUENCH_WGMMA_D32
      : "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate)));
}

// One asm statement per element type: FORM(TYPE) is an instruction macro above, D its
// accumulator list, the rest its inputs.
#define QUENCH_WGMMA_16BIT(FORM, D, ...)          \
  if constexpr (kF16) {                           \
    asm volatile(FORM("f16") : D : __VA_ARGS__);  \
  } else {                                        \
    asm volatile(FORM("bf16") : D : __VA_ARGS__); \
  }
#define QUENCH_WGMMA_SS_INPUTS "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate))
#define QUENCH_WGMMA_RS_INPUTS                                                                \
  "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(static_cast<int>(accumulate)), \
      "n"(kBMnMajor ? 1 : 0)

#define QUENCH_WGMMA_M64N128K16_SS(TYPE)                                         \
  "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                   \
  "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE                   \
  " "                                                                            \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, " \
  "%17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "  \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, "  \
  "%47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, "  \
  "%62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"

#define QUENCH_WGMMA_M64N128K16_RS(TYPE)                                         \
  "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"                                   \
  "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE                   \
  " "                                                                            \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, " \
  "%17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "  \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, "  \
  "%47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, "  \
  "%62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"

#define QUENCH_WGMMA_M64N64K16_SS(TYPE)                                          \
  "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                   \
  "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE                    \
  " "                                                                            \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, " \
  "%17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, " \
  "%32, %33, p, 1, 1, 0, 0;\n}\n"

#define QUENCH_WGMMA_M64N64K16_RS(TYPE)                                          \
  "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                   \
  "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE                    \
  " "                                                                            \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, " \
  "%17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, " \
  "{%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"

#define QUENCH_WGMMA_M64N256K16_RS(TYPE)                                           \
  "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"                                    \
  "wgmma.mma_async.sync.aligned.m64n256k16.f32." TYPE "." TYPE                     \
  " "                                                                              \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, "   \
  "%17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "    \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, "    \
  "%47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, "    \
  "%62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, "    \
  "%77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, "    \
  "%92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, "   \
  "%106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, " \
  "%119, %120, %121, %122, %123, %124, %125, %126, %127}, {%128, %129, %130, "     \
  "%131}, %132, p, 1, 1, %134;\n}\n"

// wgmma m64n128k16 over 16-bit operands -> f32: bf16 x bf16, or f16 x f16 (kF16), A and B from
// shared memory, both K-major (no transpose). The element type is part of the instruction text,
// so each form is written once (the macros above) and instantiated per type.
template <bool kF16 = false>
__device__ __forceinline__ void wgmma_m64n128k16_16bit_ss(float (&d)[64], uint64_t desc_a,
                                                          uint64_t desc_b, bool accumulate) {
  QUENCH_WGMMA_16BIT(QUENCH_WGMMA_M64N128K16_SS, QUENCH_WGMMA_D64, QUENCH_WGMMA_SS_INPUTS)
}

// Same with A from registers: a holds this thread's 8 values of the 64x16 A tile, two per
// register, low half first (register i: row 16 * warp + lane / 4 + 8 * (i % 2), k = 8 * (i / 2)
// + 2 * (lane % 4) + 0..1: the accumulator layout of a 64x16 tile). B K-major, or N-major
// with kBMnMajor (imm-trans-b; see smem_descriptor_sw128_mn_major).
template <bool kBMnMajor = false, bool kF16 = false>
__device__ __forceinline__ void wgmma_m64n128k16_16bit_rs(float (&d)[64], const uint32_t (&a)[4],
                                                          uint64_t desc_b, bool accumulate) {
  QUENCH_WGMMA_16BIT(QUENCH_WGMMA_M64N128K16_RS, QUENCH_WGMMA_D64, QUENCH_WGMMA_RS_INPUTS)
}

// The same forms for N = 64 (Q K^T over 64-key tiles, P V at head_dim 64) and N = 256
// (P V at head_dim 256).
template <bool kF16 = false>
__device__ __forceinline__ void wgmma_m64n64k16_16bit_ss(float (&d)[32], uint64_t desc_a,
                                                         uint64_t desc_b, bool accumulate) {
  QUENCH_WGMMA_16BIT(QUENCH_WGMMA_M64N64K16_SS, QUENCH_WGMMA_D32, QUENCH_WGMMA_SS_INPUTS)
}

template <bool kBMnMajor = false, bool kF16 = false>
__device__ __forceinline__ void wgmma_m64n64k16_16bit_rs(float (&d)[32], const uint32_t (&a)[4],
                                                         uint64_t desc_b, bool accumulate) {
  QUENCH_WGMMA_16BIT(QUENCH_WGMMA_M64N64K16_RS, QUENCH_WGMMA_D32, QUENCH_WGMMA_RS_INPUTS)
}

template <bool kBMnMajor = false, bool kF16 = false>
__device__ __forceinline__ void wgmma_m64n256k16_16bit_rs(float (&d)[128], const uint32_t (&a)[4],
                                                          uint64_t desc_b, bool accumulate) {
  QUENCH_WGMMA_16BIT(QUENCH_WGMMA_M64N256K16_RS, QUENCH_WGMMA_D128, QUENCH_WGMMA_RS_INPUTS)
}

#undef QUENCH_WGMMA_M64N128K16_SS
#undef QUENCH_WGMMA_M64N128K16_RS
#undef QUENCH_WGMMA_M64N64K16_SS
#undef QUENCH_WGMMA_M64N64K16_RS
#undef QUENCH_WGMMA_M64N256K16_RS
#undef QUENCH_WGMMA_16BIT
#undef QUENCH_WGMMA_SS_INPUTS
#undef QUENCH_WGMMA_RS_INPUTS
#undef QUENCH_WGMMA_D32
#undef QUENCH_WGMMA_D64
#undef QUENCH_WGMMA_D128

#endif  // QUENCH_SM90A_ENABLED

}  // namespace quench::sm90
