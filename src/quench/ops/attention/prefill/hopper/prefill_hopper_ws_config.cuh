// The CTA plan of the warp-specialized Hopper prefill kernel (prefill_hopper_ws_kernel.cuh):
// roles, register budgets, named-barrier ids and the shared-memory map of the K/V^T ring.
// The per-tile operand layouts and step counts are HopperConfig's (prefill_hopper_config.cuh).
#pragma once

#include "quench/ops/attention/prefill/hopper/prefill_hopper_tile.cuh"

#ifndef QUENCH_PREFILL_WS_RING_SLOTS_FIRST
#define QUENCH_PREFILL_WS_RING_SLOTS_FIRST 1
#endif

namespace quench::prefill_hopper {

template <HopperKind kKind, int kHeadDimT>
struct WsConfig {
  using Tile = HopperConfig<kKind, kHeadDimT>;
  // head_dim 256 (bf16 q only: HopperConfig) has 64-key tiles and 64 KB of Q: two ring slots of
  // 64 KB (bf16 K + V operands) and, for FP8 KV, one raw stage (see kRawStages).
  static_assert(kHeadDimT == 64 || kHeadDimT == 128 || kHeadDimT == 256,
                "the warp-specialized kernel serves 64, 128, 256");

  // Warpgroup 0 produces (issues the K/V tile loads, builds V^T and the widened K), warpgroups
  // 1 and 2 consume, each owning 64 of the CTA's 128 packed query rows.
  static constexpr int kProducerThreads = 128;
  static constexpr int kConsumerThreads = 256;
  static constexpr int kThreads = kProducerThreads + kConsumerThreads;
  static constexpr int kBlockM = Tile::kBlockM;  // packed query rows per CTA
  // Named barriers (0 is __syncthreads, unused after the role split).
  static constexpr int kProducerBarrier = 1;  // 128 producer threads: a raw tile has landed
  static constexpr int kScheduleBarrier = 2;  // + consumer c (256): c may issue its Q K^T
  static constexpr int kQReadyBarrier = 4;    // + consumer c (128): c's Q rows have landed

  // Whether the two consumers take turns issuing their GEMMs (ping-pong, two named barriers:
  // one consumer's softmax under the other's GEMMs) or each issues as soon as it is ready. The
  // turns pay at head_dim 128 and cost at 64 and 256 (H200, b2 x 8k causal page 16, per-tile
  // kernel, TFLOP/s with / without turns: head_dim 128 bf16 510 / 498, FP8 P·V 658 / 639; head_dim
  // 64 bf16 366 / 405, bf16 q over FP8 KV 248 / 256; head_dim 256 bf16 382 / 399; bench/LOG.md,
  // eighth session): with a half-size Q K^T (64) or a 64-key tile (256) the waiting for the other
  // consumer's turn outweighs it.
  static constexpr bool kPingPong = kHeadDimT == 128;

  // 16-bit P V takes V in its cached [key][dim] layout as the MN-major B operand
  // (issue_pv_v_mn_major): bf16 V as it lands from TMA, FP8 V once widened to f16 (no
  // transpose). FP8 P V needs V^T (transpose_v_fp8): wgmma takes MN-major B for 16-bit types only.
  static constexpr bool kVMnMajor = !Tile::kFp8Pv;
  static_assert(!kVMnMajor || Tile::kPvBytes == 2, "the MN-major V operand is 16-bit");
  static constexpr bool kKDirect = !Tile::kWidenK;
  static constexpr bool kVDirect = kKind == HopperKind::kBf16;
  // Whether a ring slot's K and V complete separate `full` barriers (full, v_full), the direct
  // producer loading each after its own `empty` wait and the consumers waiting for a tile's V
  // only at its P V, an iteration after its Q K^T: bf16 at head_dim 256, whose two ring slots
  // make tile t + 2's loads into tile t's slot wait for tile t's V release, so waiting for the
  // whole slot at Q K^T exposed a TMA round trip on every tile. H200, b2 x 8k causal page 16
  // (bench/LOG.md, tenth session): 472 -> 613 TFLOP/s. The general form (every kind) cost 1-10%
  // elsewhere (bf16 q over FP8 KV at head_dim 256 -10%), so the other kinds keep one barrier.
  static constexpr bool kSplitFull = kVDirect && kHeadDimT == 256;
  static constexpr int kDirectTensors = (kKDirect ? 1 : 0) + (kVDirect ? 1 : 0);
  static constexpr int kRawTensors = 2 - kDirectTensors;
  // TMA boxes are 128 bytes wide: kKvBoxes column blocks per cached row (block_tile_offset).
  static constexpr int kKvBoxes = Tile::kKvRowBytes / 128;
  static constexpr int kKvBoxElems = 128 / Tile::kKvBytes;

  // setmaxnreg budgets within the CTA's pool of 168 * 384 = 64512 registers (168 per thread at
  // launch). Where TMA writes both operands (bf16) one producer warp only issues loads and
  // waits; the FP8 V^T transpose (ldmatrix / stmatrix, no per-store address kept live) fits 24
  // too, and FP8 P V's consumers need the 240 that leaves: S, O, T (64 each) and P (16) live
  // across the deferred P V (at 232: 4 bytes spilled). Widening FP8 K / V to bf16 by 16-byte
  // rows needs up to 40 (ptxas, CUDA 13.0: no spills); those consumers fit 232 (at 224 the
  // bf16 hd128 loop spilled 36 bytes).
  // kSplitFull's producer loads K and V in two rounds; at 24 registers its persistent form
  // spilled (35 local operations), at 40 none, and its 232-register consumers do not spill.
  static constexpr bool kSlimProducer = Tile::kFp8Pv || (kVDirect && !kSplitFull);
  static constexpr int kProducerRegisters = kSlimProducer ? 24 : 40;
  static constexpr int kConsumerRegisters = kSlimProducer ? 240 : 232;
  static_assert(kProducerThreads * kProducerRegisters + kConsumerThreads * kConsumerRegisters <=
                    168 * kThreads,
                "the register budgets exceed the CTA's pool");

  // Shared memory, every tile 1024-byte aligned: Q (128 rows); kRawStages producer-private raw
  // stages (FP8 V as cached, and K as cached where it is widened; empty for bf16 KV); the ring of
  // kStages slots, each the K operand (K as cached, or the widened K) and the V operand (V^T,
  // bf16 V as cached, or FP8 V widened); the held P terms (FP8 P V); then the mbarriers: full,
  // k_empty, v_empty per slot, one raw_full per raw stage, and one for the last tile of a direct-V
  // ring (see ws_producer).
  static constexpr int kQOffset = 0;
  static constexpr int kRawStageBytes = kRawTensors * Tile::kStageBytes;
  static constexpr int kRawOffset = Tile::kQBytes;
  // The raw stage holds V at 0 and, widened, K at kRawKOffsetInStage.
  static constexpr int kRawKOffsetInStage = kVDirect ? 0 : Tile::kStageBytes;
  static constexpr int kSlotKBytes = Tile::kKOperandBytes;
  static constexpr int kSlotBytes = kSlotKBytes + Tile::kVtBytes;
  static_assert(Tile::kWidenK || Tile::kStageBytes == kSlotKBytes,
                "K as cached is the K operand where it is not widened");
  static constexpr int kMaxSmemBytes = 227 * 1024;
  static constexpr int kAlignSlack = 1024;  // to align the window to the swizzle atom
  // full, k_empty, v_empty, and v_full where kSplitFull.
  static constexpr int kBarriersPerSlot = kSplitFull ? 4 : 3;
  static constexpr int kProducerBarriers = 3;  // raw_full x 2, tail
  // After the mbarriers, one int per tile parity (as raw_full): the valid keys of the tile in
  // flight, 0 for none left (the persistent kernel's loading warp hands them to the producer
  // threads that build).
  static constexpr int kRawKeysBytes = 2 * 4;
  // Then the persistent kernel's load cursors (WsLoadCursor, prefill_hopper_persistent_kernel.cuh),
  // one per producer warp: a loading warp keeps its own here between its turns, not in its 24
  // registers across the build.
  static constexpr int kLoadCursorBytes = 128;

  // FP8 P V: the second e4m3 term of tile n - 2's P, from the consumers' last loop iteration to
  // their tail (ws_two_term_tail): one word per consumer thread and P fragment register.
  static constexpr int kHeldPLoBytes = Tile::kFp8Pv ? kConsumerThreads * Tile::kPvSteps * 4 * 4 : 0;

  static constexpr bool ring_fits(int raw_stages, int stages) {
    return kRawOffset + raw_stages * kRawStageBytes + stages * kSlotBytes + kHeldPLoBytes +
               (kBarriersPerSlot * stages + kProducerBarriers) * 8 + kRawKeysBytes +
               kLoadCursorBytes + kAlignSlack <=
           kMaxSmemBytes;
  }
  // Two raw stages where they fit beside two ring slots. At head_dim 256, bf16 q over FP8 KV
  // (64 KB Q, 32 KB per raw stage, 64 KB per slot) has room for one: a second slot is worth
  // more than a second raw stage (kPrefetchTiles is 1 with two slots anyway). The raw_full
  // barriers and raw-key words still alternate by tile parity; with one stage both name the
  // same bytes, which the producer frees (its named barrier) before the next load.
  // Where two raw stages with three slots do not fit but one raw stage with three does (head_dim
  // 256, two-term Q: 48 KB slots), the third slot wins: 559 against 497 TFLOP/s on an H100 at
  // b2 x 8k (bench/LOG.md, forty-second session). QUENCH_PREFILL_WS_RING_SLOTS_FIRST=0 (a build
  // switch for A/B runs) keeps two raw stages and two slots there.
  static constexpr bool kSlotsFirst =
      QUENCH_PREFILL_WS_RING_SLOTS_FIRST != 0 && !ring_fits(2, 3) && ring_fits(1, 3);
  static constexpr int kRawStages = !kSlotsFirst && ring_fits(2, 2) ? 2 : 1;
  static constexpr int kSlotOffset = kRawOffset + kRawStages * kRawStageBytes;
  // Raw stage of the producer's tile g (a tile count).
  static constexpr int raw_stage_offset(int g) {
    return kRawOffset + (kRawStages == 2 ? g & 1 : 0) * kRawStageBytes;
  }
  static constexpr int kStages = ring_fits(kRawStages, 4) ? 4 : (ring_fits(kRawStages, 3) ? 3 : 2);
  static_assert(ring_fits(kRawStages, 2), "two ring slots must fit");
  static_assert(!kSplitFull || kStages == 2, "the split barriers are for two-slot rings");
  static constexpr int kHeldPLoOffset = kSlotOffset + kStages * kSlotBytes;
  static constexpr int kBarrierOffset = kHeldPLoOffset + kHeldPLoBytes;
  static constexpr int kRawKeysOffset =
      kBarrierOffset + (kBarriersPerSlot * kStages + kProducerBarriers) * 8;
  static constexpr int kLoadCursorOffset = kRawKeysOffset + kRawKeysBytes;
  static constexpr int kSmemBytes = kLoadCursorOffset + kLoadCursorBytes + kAlignSlack;
  // Raw-stage kinds: tiles whose loads the producer keeps in flight while it prepares an earlier
  // one (each needs its own raw stage). Two where tile t + 2's direct K lands in a slot other
  // than tile t's (3 or more slots); with 2 slots loading tile t + 2's K would wait for tile
  // t's Q K^T, so one. Direct-V kinds fill every free slot.
  static constexpr int kPrefetchTiles = kStages >= 3 && kRawStages >= 2 ? 2 : 1;
  static_assert(kPrefetchTiles <= kRawStages, "each tile in flight needs its own raw stage");
  // Arrivals that complete a slot's `full` phase: the arrive.expect_tx of the direct loads'
  // bytes, and every producer thread once it has built the slot's operands from a raw stage.
  static constexpr int kFullArrivals =
      (kDirectTensors > 0 ? 1 : 0) + (kRawTensors > 0 ? kProducerThreads : 0);
};

}  // namespace quench::prefill_hopper
