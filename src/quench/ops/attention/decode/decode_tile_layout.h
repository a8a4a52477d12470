// Where the decode kernel keeps a 64-token KV tile in shared memory, and which rows and columns
// of it each lane reads for its tensor-core fragments. Host + device, so that a CPU test checks
// the layouts (every byte placed once, the TMA swizzle, bank conflicts) without a GPU.
//
// A stage holds a K tile, then a V tile, of kTileTokens rows (tokens) of kRowBytes each.
// - TMA kernel (kTma, sm_90, head_dim 64/128): the layout the tensor map writes
//   (kv_tensor_map.h): kKvBoxes column blocks of kTileTokens rows x 128 bytes, 16-byte chunk c of
//   row r at chunk c ^ (r % 8) (128-byte swizzle); FP8 head_dim 64 fills the upper half of its
//   one block with the box's out-of-bounds zeros.
// - cp.async kernel: FP8 rows of whole 128-byte lines are stored unpadded with their 16-byte
//   chunks swizzled: 12% less shared memory per stage than padding, which is what lets hd128 FP8
//   keep two tiles in flight in each of four CTAs per SM. Other rows are padded by 16 bytes
//   against bank conflicts.
//
// Fragment reads per warp (the warp owns tile rows [16 w, 16 w + 16); lane = 4 g + c):
// - K: lane (g, c) reads head-dim elements [(4 cg + c) * 16, + 16) of row
//   16 w + 8 nt + token_of_column(g), for chunk group cg and n-tile nt;
// - V: lane (g, c) reads rows 16 w + {0, 8} + token_of_column(2c or 2c + 1), kVLoadBytes at
//   v_column_byte(g, ld) per load ld.
#pragma once

#include <cstdint>

#include "quench/core/host_device.h"
#include "quench/ops/attention/decode/decode_kernel_args.h"

namespace quench::decode {

template <int kHeadDim, int kKvBytesT, bool kTma>
struct DecodeTileLayout {
  static constexpr int kKvBytes = kKvBytesT;             // 1 (FP8) or 2 (bf16)
  static constexpr int kRowBytes = kHeadDim * kKvBytes;  // one token of one head
  static_assert(!kTma || kHeadDim <= 128, "head_dim 256 runs the cp.async kernel");

  static constexpr bool kSwizzleKv = !kTma && kKvBytes == 1 && kRowBytes % 128 == 0;
  static constexpr int kKvStride = kSwizzleKv ? kRowBytes : kRowBytes + 16;  // cp.async rows
  static constexpr int kKvBoxes = kRowBytes <= 128 ? 1 : kRowBytes / 128;    // TMA blocks
  static constexpr int kBoxElems = 128 / kKvBytes;  // elements per TMA box row
  static constexpr int kTileBlockBytes = kTileTokens * 128;
  static constexpr int kTileKvBytes = kTma ? kKvBoxes * kTileBlockBytes : kTileTokens * kKvStride;

  static constexpr int kVBytesPerLane = kRowBytes / 8;  // V columns one lane owns
  static constexpr int kVLoadBytes = kVBytesPerLane < 16 ? kVBytesPerLane : 16;
  static constexpr int kVElemsPerLoad = kVLoadBytes / kKvBytes;

  // Shared-memory offset of byte `byte` (an access of 8 or 16 bytes inside one 16-byte chunk)
  // of tile row `row`.
  // TMA: block byte / 128, chunk ((byte / 16) ^ row) % 8. Reads are conflict-free through the
  // choice of rows (token_of_column) and columns (v_column_byte).
  // cp.async, swizzled rows: chunk XOR f(row) = 2 * ((row / 2) % 4) ^ 4 * (row % 2), chosen so
  // that both fragment reads are conflict-free per 8-lane phase: K reads rows {2k, 2k+1} x
  // chunks {4b..4b+3} (f differs in bit 2 between the rows), V reads rows {r, r+2, r+4, r+6} x
  // chunks {2a, 2a+1} (f / 2 differs across the rows).
  static QUENCH_HD int kv_smem_offset(int row, int byte) {
    if constexpr (kTma) {
      return (byte >> 7) * kTileBlockBytes + row * 128 + ((((byte >> 4) ^ row) & 7) << 4) +
             (byte & 15);
    } else if constexpr (kSwizzleKv) {
      const int f = (((row >> 1) & 3) << 1) ^ ((row & 1) << 2);
      return row * kKvStride + (byte ^ (f << 4));
    } else {
      return row * kKvStride + byte;
    }
  }

  // TMA: kv_smem_offset(row, (chunk + base) * 16) = kv_smem_offset(row, base * 16) ^
  // kv_chunk_delta(chunk) when the 16-byte chunk indices chunk and base share no bit (chunk's
  // low three bits pass through the swizzle XOR alone, its block bits land above the row's).
  // The swapped-operand loop keeps one offset per row and reaches the others with constants.
  static QUENCH_HD int kv_chunk_delta(int chunk) {
    static_assert(kTma, "the cp.async layouts have no such split");
    return (chunk >> 3) * kTileBlockBytes + ((chunk & 7) << 4);
  }

  // Tile row (token, within the warp's 8-token half) of column n (0..7) of an n-tile: the B
  // operand column of S = Q K^T, whose score lands in the accumulator's column n, and the P V
  // product's k index n (n-tile 0) or 8 + n (n-tile 1). Any permutation works as long as the K
  // rows, the mask and the V rows all use it. TMA: n ^ 4 * (n % 2), so that
  // - K (8-lane phase: columns g = 2k, 2k+1 x c = 0..3; FP8 chunks {4 cg + c}, bf16 chunks
  //   {2c + i} of block cg) reads rows whose r % 8 differ by 5: the FP8 chunk sets land in
  //   opposite 64-byte halves, the bf16 ones in opposite parities. FP8 head_dim 64 (four data
  //   chunks per row) is what rules out the identity: rows 2k, 2k+1 would share one half;
  // - V (columns g = 2k, 2k+1 x c = 0..3 per 8-lane phase) reads rows {0, 2, 4, 6} or
  //   {5, 7, 1, 3} (mod 8) at chunk 8 ld + g: 16-byte loads hit 8 distinct chunks (parity from
  //   g, the rest from the row); FP8 head_dim 64's 8-byte loads (16-lane phases, g = 0..3) hit 8
  //   distinct chunks x 2 halves.
  // cp.async: the identity (its layouts are built for it).
  static QUENCH_HD int token_of_column(int n) {
    if constexpr (kTma) {
      return n ^ ((n & 1) << 2);
    } else {
      return n;
    }
  }

  // V columns: lane group g's load ld (of kVBytesPerLane / kVLoadBytes) reads kVLoadBytes bytes
  // of a V row from here, i.e. 16-byte chunk 8 ld + g when a lane reads more than one chunk
  // (bf16 head_dim >= 128, FP8 256): the 8 groups of one load read 8 consecutive chunks, each
  // chunk index mod 8 once (TMA: one 128-byte block; padded rows: one chunk of rotation per
  // row), which keeps the load conflict-free.
  static QUENCH_HD int v_column_byte(int g, int ld) { return (8 * ld + g) * kVLoadBytes; }

  // The output column that accumulator column n (the P V product's B column, = lane group g) of
  // O n-tile i holds: element i % kVElemsPerLoad of load i / kVElemsPerLoad.
  static QUENCH_HD int v_output_column(int i, int n) {
    return (i / kVElemsPerLoad * 8 + n) * kVElemsPerLoad + i % kVElemsPerLoad;
  }
};

}  // namespace quench::decode
