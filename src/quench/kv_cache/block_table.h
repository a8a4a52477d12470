// The dense block table kernels read: int32 [num_seqs, max_pages], row-major. Row s lists the
// pages of sequence s in token order (token t of the sequence lives in page row[t / page_size]),
// padded with kNullPage. Padded requests of a CUDA-graph batch have an all-null row.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace quench {

struct BlockTable {
  int32_t num_seqs = 0;
  int32_t max_pages = 0;
  std::vector<int32_t> pages;  // int32 [num_seqs, max_pages], row-major

  std::span<const int32_t> row(int32_t seq) const {
    return std::span<const int32_t>(pages).subspan(static_cast<size_t>(seq) * max_pages,
                                                   static_cast<size_t>(max_pages));
  }
};

// Pages needed to hold `tokens` tokens (tokens >= 0, page_size >= 1).
int64_t pages_for_tokens(int64_t tokens, int32_t page_size);

// Builds the table from one page list per sequence. Throws when a list is longer than
// max_pages (max_pages >= 1) or holds a page outside [1, num_pages).
BlockTable build_block_table(const std::vector<std::vector<int32_t>>& seq_pages, int32_t max_pages,
                             int32_t num_pages);

// Checks a table against the sequence lengths it will be read with:
//   seq_lens: int32 [num_seqs], tokens per sequence (including new tokens), each >= 0;
//   the first pages_for_tokens(seq_lens[s], page_size) entries of row s are in [1, num_pages)
//   and fit in max_pages; the remaining entries are in [0, num_pages).
// Throws naming the sequence, the column and the bad value.
void validate_block_table(const BlockTable& table, std::span<const int32_t> seq_lens,
                          int32_t page_size, int32_t num_pages);

}  // namespace quench
