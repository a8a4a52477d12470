// The Hopper prefill kernels' operand kinds and their per-(kind, head_dim) configuration: which
// products run on FP8 or 16-bit operands, the tile shapes and step counts, and the synchronous
// kernel's shared-memory plan (the warp-specialized kernels' is WsConfig's,
// prefill_hopper_ws_config.cuh).
#pragma once

#include <cstdint>

namespace quench::prefill_hopper {

enum class HopperKind : uint8_t {
  kFp8,         // q e4m3, KV e4m3: FP8 wgmma
  kBf16,        // q bf16, KV bf16: bf16 wgmma
  kBf16QFp8Kv,  // q bf16, KV e4m3: q converted, K and V widened to f16 in shared memory
  kFp8QkF16Pv,  // q e4m3, KV e4m3: FP8 wgmma for Q K^T, f16 P and V widened to f16 for P V
};

// Build switches for A/B runs of bf16 q over FP8 KV (HopperConfig::kQTwoTerm): 0 keeps the
// widened-K kernel (f16 Q K^T) at head_dim 128, 64, respectively 256. Two-term Q is the default
// at all three: on an H100 at b2 x 8k causal it took head_dim 256 from 413 to 548 TFLOP/s and
// 64 from 348 to 403 (bench/LOG.md, forty-second session).
#ifndef QUENCH_PREFILL_BF16Q_TWO_TERM
#define QUENCH_PREFILL_BF16Q_TWO_TERM 1
#endif
#ifndef QUENCH_PREFILL_BF16Q_TWO_TERM_HD64
#define QUENCH_PREFILL_BF16Q_TWO_TERM_HD64 1
#endif
#ifndef QUENCH_PREFILL_BF16Q_TWO_TERM_HD256
#define QUENCH_PREFILL_BF16Q_TWO_TERM_HD256 1
#endif

template <HopperKind kKind, int kHeadDimT>
struct HopperConfig {
  // Q K^T on FP8 operands (e4m3 q and K); P V on FP8 operands (e4m3 P and V, two-level).
  static constexpr bool kFp8Qk = kKind == HopperKind::kFp8 || kKind == HopperKind::kFp8QkF16Pv;
  static constexpr bool kFp8Pv = kKind == HopperKind::kFp8;
  static constexpr bool kFp8Kv = kKind != HopperKind::kBf16;
  // bf16 q over FP8 KV widens K to f16 in shared memory, so its Q K^T runs on f16 operands: the
  // Q tile is converted once per work item (q_rows_to_f16: exact, with a power-of-two scale per
  // warp that keeps bf16's range inside f16's and is folded into the score scale).
  // bf16 q over FP8 KV at head_dim 128 instead runs Q K^T on FP8 operands with K as cached (no
  // widening, 128-key tiles): each bf16 q is split exactly into two e4m3 terms, q 2^e = hi + lo,
  // with one power of two 2^e per warp that puts the warp's largest |q| in [128, 256), and
  // Q K^T is one FP8 product over 256 k values, [hi | lo] against [K | K]
  // (load_q_fragments_two_term). hi takes q's leading 4 significant bits and lo the other 4
  // (bf16 has 8), both e4m3 normals or exact subnormals wherever |q 2^e| >= 2^-2, i.e. for
  // every element at least 2^-10 times the warp's largest; below that the error is at most 2^-10
  // absolute, 2^-17 of the largest. The products are exact; their sum is the FP8 tensor cores'
  // (not full fp32, as for FP8 q). P V stays f16 (kF16Pv: V widened).
  // At head_dim 64, FP8 K rows as cached are 64 bytes in 128-byte swizzled rows (TMA zero-fills
  // the rest), and Q K^T's 4 k steps read the first 64 bytes twice. At head_dim 256 the split
  // runs from shared memory (kQTwoTermInSmem): FP8 K rows are 256 bytes there, two 128-byte
  // swizzle atoms, the byte layout of bf16 K at head_dim 128, and Q K^T is one FP8 product over
  // 512 k values.
  static constexpr bool kQTwoTerm =
      kKind == HopperKind::kBf16QFp8Kv &&
      ((kHeadDimT == 128 && QUENCH_PREFILL_BF16Q_TWO_TERM != 0) ||
       (kHeadDimT == 64 && QUENCH_PREFILL_BF16Q_TWO_TERM_HD64 != 0) ||
       (kHeadDimT == 256 && QUENCH_PREFILL_BF16Q_TWO_TERM_HD256 != 0));
  // Two-term Q's 16 k steps at head_dim 256 would take 64 registers beside O's 128: each warp
  // instead rewrites its 16 bf16 Q rows in place as [hi | lo] e4m3 rows of 512 bytes
  // (q_rows_to_two_term), which Q K^T reads from shared memory.
  static constexpr bool kQTwoTermInSmem = kQTwoTerm && kHeadDimT == 256;
  static constexpr bool kWidenK = kKind == HopperKind::kBf16QFp8Kv && !kQTwoTerm;
  // 16-bit P V over FP8 V (bf16 q over FP8 KV, FP8 q with 16-bit P V) runs on f16 operands: V
  // widens to f16 in one conversion per pair (F2FP.F16.E4M3.UNPACK_B, exact), where bf16 took
  // three more (to f32 and back), and P in [0, 1] keeps 11 significant bits instead of 8.
  static constexpr bool kF16Pv = kFp8Kv && !kFp8Pv;
  // The producer's widening bounded these kinds; H200 per-tile kernel (bench/LOG.md, twelfth
  // session), TFLOP/s bf16 / f16 operands: bf16 q over FP8 KV 332 -> 389 at b2 x 8k, 350 -> 410 at
  // b1 x 16k, hd64 287 -> 332, hd256 348 -> 390; FP8 q with 16-bit P V (f16 P V only) 542 -> 599 at
  // 8k.
  static constexpr int kHeadDim = kHeadDimT;
  static constexpr int kWarpgroups = 2;
  static constexpr int kThreads = 128 * kWarpgroups;
  static constexpr int kBlockM = 64 * kWarpgroups;  // packed query rows per CTA
  // Keys per K/V tile: 64 at head_dim 256 keeps S and O in registers. Widened K (bf16 q over FP8
  // KV without two-term Q) at head_dim 128 takes 64 too: its ring slots hold the widened K and V
  // (64 KB at 128 keys), which left room for two slots only, and with two every tile's build
  // waited for the V release of the tile before it (the producer on the consumers' critical
  // path); 64-key tiles have four.
  // H200, b2 x 8k causal (bench/LOG.md, tenth session): 304 -> 328 TFLOP/s at page 16, 305 -> 336
  // at page 64 (per tile; the persistent kernel -1%). At head_dim 64 (four slots already) 64-key
  // tiles lost 1-8%.
  static constexpr int kBlockN = kHeadDim == 256 || (kWidenK && kHeadDim == 128) ? 64 : 128;
  // Bytes per Q (and K operand) element; two-term Q: the bf16 Q tile, and its two e4m3 terms
  // make 2 bytes of Q K^T's k per element (kQkSteps 8 over K's 4 at head_dim 128, 16 over 8 at
  // 256).
  static constexpr int kQkBytes = kFp8Qk ? 1 : 2;
  static constexpr int kPvBytes = kFp8Pv ? 1 : 2;  // bytes per P (and V^T operand) element
  static constexpr int kKvBytes = kFp8Kv ? 1 : 2;  // bytes per cached element
  // The FP8 operand layouts (128-byte rows of Q, K and V^T, the V^T permutation, T in 64
  // registers, 128-key tiles for FP8 Q K^T) need head_dim 128; bf16 operand rows are 128, 256
  // or 512 bytes.
  static_assert(kHeadDim == 128 || (!kFp8Qk && (kHeadDim == 64 || kHeadDim == 256)),
                "unsupported head_dim for this operand kind");
  static constexpr int kQBytes = kBlockM * kHeadDim * kQkBytes;
  // One cached K or V tile; rows shorter than 128 bytes (FP8 at head_dim 64) are padded to one
  // swizzled 128-byte row.
  static constexpr int kKvRowBytes = kHeadDim * kKvBytes < 128 ? 128 : kHeadDim * kKvBytes;
  static constexpr int kStageBytes = kBlockN * kKvRowBytes;
  // The K operand: FP8 K as cached (padded rows included) where Q K^T runs on FP8 operands
  // (two-term Q included), else 16-bit (bf16 as cached, or FP8 widened).
  static constexpr int kKOperandBytes = kFp8Qk || kQTwoTerm ? kStageBytes : kBlockN * kHeadDim * 2;
  static constexpr int kVtBytes = kBlockN * kHeadDim * kPvBytes;
  // Shared memory, every tile 1024-byte aligned: Q; two stages of K and of V as cached; the
  // widened K operand (bf16 q over FP8 KV only); V^T.
  static constexpr int kQOffset = 0;
  static constexpr int kKStageOffset = kQBytes;
  static constexpr int kVStageOffset = kKStageOffset + 2 * kStageBytes;
  static constexpr int kKWideOffset = kVStageOffset + 2 * kStageBytes;
  static constexpr int kVtOffset = kKWideOffset + (kWidenK ? kKOperandBytes : 0);
  // bf16 P V: two V^T buffers let tile i's P V run on the tensor cores while tile i + 1
  // is prepared (its wait moves to tile i + 1's Q K^T wait), where they fit (not at head_dim
  // 256). FP8 waits at once: T living across the next Q K^T would spill registers.
  static constexpr int kMaxSmemBytes = 227 * 1024;
  static constexpr bool kDeferPv = !kFp8Pv && kVtOffset + 2 * kVtBytes + 1024 <= kMaxSmemBytes;
  static constexpr int kVtStages = kDeferPv ? 2 : 1;
  static constexpr int kOperandBytes = kVtOffset + kVtStages * kVtBytes;
  static constexpr int kOutStride = kHeadDim + 4;  // floats; padding spreads the banks
  static constexpr int kOutBytes = kBlockM * kOutStride * 4;
  static_assert(kOutBytes <= kOperandBytes, "the fp32 output tile reuses the operand tiles");
  // + slack to align the dynamic shared memory window to the 1024-byte swizzle atom.
  static constexpr int kSmemBytes = kOperandBytes + 1024;
  // P enters P V as mma_type(P * kPScale); the epilogue divides it out.
  static constexpr float kPScale = kFp8Pv ? 256.0f : 1.0f;
  static constexpr int kQkSteps = kHeadDim * kQkBytes / 32;  // 32-byte k steps of Q K^T
  static constexpr int kPvSteps = kBlockN * kPvBytes / 32;   // 32-byte k steps of P V
  // Q K^T reads Q's A fragments from registers (QOperand, loaded once per work item) instead of
  // shared memory where Q K^T runs on 16-bit operands (bf16 q over FP8 or bf16 KV) at head_dim
  // <= 128: Q costs kQkSteps x 4 registers per consumer thread (32 at head_dim 128) and the SS
  // wgmma's A reads leave shared memory to K (and, over FP8 KV, the producer's widening). bf16 q
  // over FP8 KV first (its 64-key tiles fetch 2 KB of A and 2 KB of B per 32 tensor cycles, all
  // of the SM's 128 bytes per cycle): H200 per tile (bench/LOG.md, thirteenth session) 390 -> 397
  // TFLOP/s at b2 x 8k, 412 -> 422 at b1 x 16k. bf16 (fourteenth session, calls 1 and 6): head_dim
  // 64 per tile 409 -> 426 at b2 x 8k, persistent 395 -> 403; head_dim 128 per tile +2-5% (8k
  // page 16 569 -> 593, 16k page 64 600 -> 631), persistent -1.7% at 1k, +0.5-1.5% from 8k (see
  // persistent_by_default). FP8 q kinds: even or worse (FP8 P V's 240-register consumers spill).
  static constexpr bool kQInRegisters = kQkBytes == 2 && kHeadDim <= 128;
  // Each consumer warp loads (and, f16 Q K^T, converts) the 16 Q rows its accumulators own,
  // instead of the warpgroup striding over all 64 (q_chunk_index, ws_load_q_rows). Q in
  // registers needs it: a warp's fragment loads then read only rows its own lanes write for the
  // next work item, which a __syncwarp orders (load_q_fragments); with the strided load another
  // warp writes them and nothing orders the two (racecheck errors at head_dim 64, bench/LOG.md
  // thirteenth session).
  // Two-term Q in shared memory scales per warp too (q_rows_to_two_term).
  static constexpr bool kQRowsPerWarp = kWidenK || kQInRegisters || kQTwoTermInSmem;
  static_assert(kQBytes % 1024 == 0 && kStageBytes % 1024 == 0 && kKOperandBytes % 1024 == 0 &&
                    kVtBytes % 1024 == 0,
                "every tile starts on a swizzle atom");
};

}  // namespace quench::prefill_hopper
