#include "quench/kv_cache/block_table.h"

#include "quench/core/error.h"
#include "quench/kv_cache/kv_cache_layout.h"

namespace quench {

int64_t pages_for_tokens(int64_t tokens, int32_t page_size) {
  QUENCH_REQUIRE(page_size >= 1, "page_size ", page_size, " must be >= 1");
  QUENCH_REQUIRE(tokens >= 0, "token count ", tokens, " must be >= 0");
  return (tokens + page_size - 1) / page_size;
}

BlockTable build_block_table(const std::vector<std::vector<int32_t>>& seq_pages, int32_t max_pages,
                             int32_t num_pages) {
  QUENCH_REQUIRE(max_pages >= 1, "block table max_pages ", max_pages, " must be >= 1");
  BlockTable table;
  table.num_seqs = static_cast<int32_t>(seq_pages.size());
  table.max_pages = max_pages;
  table.pages.assign(seq_pages.size() * static_cast<size_t>(max_pages), kNullPage);
  for (size_t s = 0; s < seq_pages.size(); ++s) {
    const std::vector<int32_t>& pages = seq_pages[s];
    QUENCH_REQUIRE(pages.size() <= static_cast<size_t>(max_pages), "block table: sequence ", s,
                   " has ", pages.size(), " pages but max_pages is ", max_pages);
    for (size_t i = 0; i < pages.size(); ++i) {
      QUENCH_REQUIRE(pages[i] > kNullPage && pages[i] < num_pages, "block table: sequence ", s,
                     " page ", i, " is ", pages[i], "; allowed: [1, ", num_pages,
                     ") (0 is the null page)");
      table.pages[s * static_cast<size_t>(max_pages) + i] = pages[i];
    }
  }
  return table;
}

void validate_block_table(const BlockTable& table, std::span<const int32_t> seq_lens,
                          int32_t page_size, int32_t num_pages) {
  QUENCH_REQUIRE(table.num_seqs >= 0 && table.max_pages >= 1, "block table shape [", table.num_seqs,
                 ", ", table.max_pages, "] is invalid; need num_seqs >= 0, ", "max_pages >= 1");
  QUENCH_REQUIRE(table.pages.size() ==
                     static_cast<size_t>(table.num_seqs) * static_cast<size_t>(table.max_pages),
                 "block table holds ", table.pages.size(), " entries; its shape [", table.num_seqs,
                 ", ", table.max_pages, "] needs ",
                 static_cast<int64_t>(table.num_seqs) * table.max_pages);
  QUENCH_REQUIRE(seq_lens.size() == static_cast<size_t>(table.num_seqs), "seq_lens has ",
                 seq_lens.size(), " entries; the block table has ", table.num_seqs, " sequences");
  for (int32_t s = 0; s < table.num_seqs; ++s) {
    QUENCH_REQUIRE(seq_lens[s] >= 0, "sequence ", s, " has seq_len ", seq_lens[s],
                   "; must be >= 0");
    const int64_t needed = pages_for_tokens(seq_lens[s], page_size);
    QUENCH_REQUIRE(needed <= table.max_pages, "sequence ", s, " has seq_len ", seq_lens[s],
                   ", needing ", needed, " pages of ", page_size,
                   " tokens, but the block table has only ", table.max_pages, " columns");
    const std::span<const int32_t> row = table.row(s);
    for (int32_t i = 0; i < table.max_pages; ++i) {
      if (i < needed) {
        QUENCH_REQUIRE(row[i] > kNullPage && row[i] < num_pages, "block table: sequence ", s,
                       " column ", i, " is page ", row[i], ", needed for seq_len ", seq_lens[s],
                       "; allowed: [1, ", num_pages, ") (0 is the null page)");
      } else {
        QUENCH_REQUIRE(row[i] >= kNullPage && row[i] < num_pages, "block table: sequence ", s,
                       " column ", i, " is page ", row[i], "; allowed: [0, ", num_pages, ")");
      }
    }
  }
}

}  // namespace quench
