// DecodeTileLayout on the host: every tile byte has one place; the TMA kernel's layout is the
// tensor map's 128-byte swizzle; the row and column permutations are bijections that agree with
// each other; and the fragment reads of a warp are free of shared-memory bank conflicts (a
// model of the hardware: 16-byte loads served 8 lanes per 128-byte wavefront, 8-byte loads 16
// lanes; a conflict is two different 4-byte words in one bank within one wavefront).
#include "quench/ops/attention/decode/decode_tile_layout.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace quench::decode {
namespace {

// Most distinct words one bank serves within one wavefront of a warp-wide load of `width` bytes
// per lane at byte addresses `addresses` (lane order).
int worst_bank_conflict(const std::vector<int>& addresses, int width) {
  const int lanes_per_wavefront = 128 / width;
  int worst = 1;
  for (int first = 0; first < 32; first += lanes_per_wavefront) {
    std::map<int, std::set<int>> words_of_bank;
    for (int lane = first; lane < first + lanes_per_wavefront; ++lane) {
      for (int w = 0; w < width / 4; ++w) {
        const int word = addresses[static_cast<size_t>(lane)] / 4 + w;
        words_of_bank[word % 32].insert(word);
      }
    }
    for (const auto& [bank, words] : words_of_bank)
      worst = std::max(worst, static_cast<int>(words.size()));
  }
  return worst;
}

template <class L>
void expect_every_byte_placed_once(int head_dim) {
  std::set<int> used;
  for (int row = 0; row < kTileTokens; ++row) {
    for (int byte = 0; byte < L::kRowBytes; byte += 8) {
      const int at = L::kv_smem_offset(row, byte);
      EXPECT_TRUE(at >= 0 && at + 8 <= L::kTileKvBytes && at % 8 == 0)
          << "row " << row << " byte " << byte << " at " << at;
      EXPECT_TRUE(used.insert(at).second) << "row " << row << " byte " << byte << " reuses " << at;
    }
  }
  EXPECT_EQ(static_cast<int>(used.size()), kTileTokens * L::kRowBytes / 8) << head_dim;
}

template <class L>
void expect_permutations_agree(int head_dim) {
  std::set<int> rows;
  for (int n = 0; n < 8; ++n)
    rows.insert(L::token_of_column(n));
  EXPECT_EQ(rows, (std::set<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  std::set<int> columns;
  const int loads = L::kVBytesPerLane / L::kVLoadBytes;
  for (int g = 0; g < 8; ++g) {
    for (int ld = 0; ld < loads; ++ld) {
      for (int k = 0; k < L::kVElemsPerLoad; ++k) {
        const int read = L::v_column_byte(g, ld) / L::kKvBytes + k;
        const int held = L::v_output_column(ld * L::kVElemsPerLoad + k, g);
        EXPECT_EQ(read, held) << "g " << g << " ld " << ld << " k " << k;
        columns.insert(held);
      }
    }
  }
  EXPECT_EQ(static_cast<int>(columns.size()), head_dim);
  EXPECT_EQ(*columns.rbegin(), head_dim - 1);
}

// Worst conflict of the K reads (one 16-byte load per chunk group, n-tile and 16-byte half).
template <class L>
int worst_k_conflict(int head_dim) {
  int worst = 1;
  for (int cg = 0; cg < head_dim / 64; ++cg) {
    for (int nt = 0; nt < 2; ++nt) {
      for (int h = 0; h < L::kKvBytes; ++h) {
        std::vector<int> addresses;
        for (int lane = 0; lane < 32; ++lane) {
          const int g = lane / 4, c = lane % 4;
          addresses.push_back(L::kv_smem_offset(8 * nt + L::token_of_column(g),
                                                ((4 * cg + c) * L::kKvBytes + h) * 16));
        }
        worst = std::max(worst, worst_bank_conflict(addresses, 16));
      }
    }
  }
  return worst;
}

// Worst conflict of the V reads (four rows per lane, kVBytesPerLane / kVLoadBytes loads each).
// natural_order: the tile's tokens in their own order instead of token_of_column's (the
// swapped loop with Q K^T on wgmma, whose accumulator rows are the tile's rows).
template <class L>
int worst_v_conflict(bool natural_order = false) {
  int worst = 1;
  for (int ld = 0; ld < L::kVBytesPerLane / L::kVLoadBytes; ++ld) {
    for (int r = 0; r < 4; ++r) {
      std::vector<int> addresses;
      for (int lane = 0; lane < 32; ++lane) {
        const int g = lane / 4, c = lane % 4;
        const int column = 2 * c + r % 2;
        const int row = 8 * (r / 2) + (natural_order ? column : L::token_of_column(column));
        addresses.push_back(L::kv_smem_offset(row, L::v_column_byte(g, ld)));
      }
      worst = std::max(worst, worst_bank_conflict(addresses, L::kVLoadBytes));
    }
  }
  return worst;
}

template <int kHeadDim, int kKvBytes>
void expect_tma_layout() {
  using L = DecodeTileLayout<kHeadDim, kKvBytes, true>;
  SCOPED_TRACE("TMA, head_dim " + std::to_string(kHeadDim) + ", " + std::to_string(kKvBytes) +
               "-byte elements");
  expect_every_byte_placed_once<L>(kHeadDim);
  expect_permutations_agree<L>(kHeadDim);
  // The tensor map's box layout (kv_tensor_map.h): block b of 128 bytes per row at
  // b * kTileTokens * 128, row r at r * 128, chunk c at c ^ (r % 8).
  for (int row = 0; row < kTileTokens; ++row) {
    for (int byte = 0; byte < L::kRowBytes; byte += 8) {
      const int expected = byte / 128 * kTileTokens * 128 + row * 128 +
                           ((byte % 128 / 16) ^ (row % 8)) * 16 + byte % 16;
      ASSERT_EQ(L::kv_smem_offset(row, byte), expected) << "row " << row << " byte " << byte;
    }
  }
  EXPECT_EQ(L::kTileKvBytes, L::kKvBoxes * kTileTokens * 128);
  // The kernel finds a bf16 key lane's second 16-byte chunk at the first's offset ^ 16.
  for (int row = 0; row < kTileTokens && kKvBytes == 2; ++row) {
    for (int byte = 0; byte < L::kRowBytes; byte += 32) {
      ASSERT_EQ(L::kv_smem_offset(row, byte + 16), L::kv_smem_offset(row, byte) ^ 16)
          << "row " << row << " byte " << byte;
    }
  }
  EXPECT_EQ(worst_k_conflict<L>(kHeadDim), 1);
  EXPECT_EQ(worst_v_conflict<L>(), 1);
}

template <int kHeadDim, int kKvBytes>
void expect_cp_async_layout() {
  using L = DecodeTileLayout<kHeadDim, kKvBytes, false>;
  SCOPED_TRACE("cp.async, head_dim " + std::to_string(kHeadDim) + ", " + std::to_string(kKvBytes) +
               "-byte elements");
  expect_every_byte_placed_once<L>(kHeadDim);
  expect_permutations_agree<L>(kHeadDim);
  EXPECT_EQ(worst_v_conflict<L>(), 1);
  // K: FP8 head_dim 64 (80-byte padded rows) reads 2-way conflicted; the rest are free.
  EXPECT_EQ(worst_k_conflict<L>(kHeadDim), kHeadDim == 64 && kKvBytes == 1 ? 2 : 1);
}

TEST(DecodeTileLayout, TmaLayoutIsTheTensorMapsAndConflictFree) {
  expect_tma_layout<64, 1>();
  expect_tma_layout<128, 1>();
  expect_tma_layout<64, 2>();
  expect_tma_layout<128, 2>();
}

// QUENCH_DECODE_QK=wgmma (FP8 caches at head_dim 64 / 128): the V reads of the tile's tokens in
// their natural order stay conflict-free, and the Q terms, written with kv_smem_offset as rows
// 0-15 of a tile, fill the B operand's two 1024-byte swizzle atoms byte for byte.
template <int kHeadDim>
void expect_wgmma_qk_layout() {
  using L = DecodeTileLayout<kHeadDim, 1, true>;
  SCOPED_TRACE("TMA FP8, head_dim " + std::to_string(kHeadDim));
  EXPECT_EQ(worst_v_conflict<L>(/*natural_order=*/true), 1);
  std::vector<int> seen(2048, 0);
  for (int row = 0; row < 16; ++row) {
    for (int byte = 0; byte < kHeadDim; ++byte) {
      const int offset = L::kv_smem_offset(row, byte);
      ASSERT_GE(offset, 0);
      ASSERT_LT(offset, 2048) << "row " << row << " byte " << byte;
      // The canonical K-major 128-byte swizzle that the descriptor names: 8-row atoms of 1024
      // bytes, chunk c of row r at c ^ (r % 8).
      ASSERT_EQ(offset,
                row / 8 * 1024 + row % 8 * 128 + ((byte / 16) ^ (row % 8)) * 16 + byte % 16);
      ++seen[offset];
    }
  }
  for (int offset = 0; offset < 2048; ++offset) {
    ASSERT_LE(seen[offset], 1) << "offset " << offset;
    // head_dim 64 leaves each row's upper 64 bytes to the k-steps that never run.
    if (kHeadDim == 128) {
      ASSERT_EQ(seen[offset], 1) << "offset " << offset;
    }
  }
}

TEST(DecodeTileLayout, WgmmaQkReadsVConflictFreeAndPlacesTheQTerms) {
  expect_wgmma_qk_layout<64>();
  expect_wgmma_qk_layout<128>();
}

// The swapped-operand loop keeps one offset per row and lane and reaches the other chunks of the
// row by XOR with kv_chunk_delta: the same byte as kv_smem_offset for every row, base chunk and
// chunk that share no bit (FP8: base c < 4, chunks 4 cg; bf16: base 2c + h or h < 2, chunks
// 8 cg or 2 ks), and byte within the chunk.
template <int kHeadDim, int kKvBytes>
void expect_chunk_delta_matches() {
  using L = DecodeTileLayout<kHeadDim, kKvBytes, true>;
  SCOPED_TRACE("TMA, head_dim " + std::to_string(kHeadDim) + ", " + std::to_string(kKvBytes) +
               "-byte elements");
  const int chunks = kHeadDim * kKvBytes / 16;
  int checked = 0;
  for (int row = 0; row < kTileTokens; ++row) {
    for (int base = 0; base < chunks; ++base) {
      for (int chunk = 0; base + chunk < chunks; ++chunk) {
        if ((base & chunk) != 0) continue;
        for (int byte = 0; byte < 16; byte += 4) {
          ++checked;
          EXPECT_EQ(L::kv_smem_offset(row, base * 16 + byte) ^ L::kv_chunk_delta(chunk),
                    L::kv_smem_offset(row, (base + chunk) * 16 + byte))
              << "row " << row << " base chunk " << base << " chunk " << chunk << " byte " << byte;
        }
      }
    }
  }
  EXPECT_GT(checked, 0);
}

TEST(DecodeTileLayout, ChunkDeltaMatchesTheOffsets) {
  expect_chunk_delta_matches<64, 1>();
  expect_chunk_delta_matches<128, 1>();
  expect_chunk_delta_matches<64, 2>();
  expect_chunk_delta_matches<128, 2>();
}

TEST(DecodeTileLayout, CpAsyncLayoutPlacesEveryByteAndReadsVConflictFree) {
  expect_cp_async_layout<64, 1>();
  expect_cp_async_layout<128, 1>();
  expect_cp_async_layout<256, 1>();
  expect_cp_async_layout<64, 2>();
  expect_cp_async_layout<128, 2>();
  expect_cp_async_layout<256, 2>();
}

}  // namespace
}  // namespace quench::decode
