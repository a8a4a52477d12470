#include "quench/kv_cache/slot_mapping.h"

#include <unordered_map>

#include "quench/core/error.h"

namespace quench {

std::vector<int64_t> build_slot_mapping(const BlockTable& table, std::span<const int32_t> seq_lens,
                                        std::span<const int32_t> new_tokens, int32_t page_size,
                                        int32_t num_pages, int64_t num_tokens) {
  validate_block_table(table, seq_lens, page_size, num_pages);
  QUENCH_REQUIRE(new_tokens.size() == seq_lens.size(), "new_tokens has ", new_tokens.size(),
                 " entries; seq_lens has ", seq_lens.size());
  int64_t total_new = 0;
  for (size_t s = 0; s < new_tokens.size(); ++s) {
    QUENCH_REQUIRE(new_tokens[s] >= 0 && new_tokens[s] <= seq_lens[s], "sequence ", s, " has ",
                   new_tokens[s], " new tokens; allowed: [0, seq_len = ", seq_lens[s], "]");
    total_new += new_tokens[s];
  }
  QUENCH_REQUIRE(total_new <= num_tokens, "the batch has ", total_new,
                 " new tokens but num_tokens is ", num_tokens, "; need num_tokens >= ", total_new);
  std::vector<int64_t> slots(static_cast<size_t>(num_tokens), kPaddingSlot);
  size_t token = 0;
  for (int32_t s = 0; s < table.num_seqs; ++s) {
    const std::span<const int32_t> row = table.row(s);
    for (int64_t pos = seq_lens[s] - new_tokens[s]; pos < seq_lens[s]; ++pos) {
      slots[token++] = static_cast<int64_t>(row[pos / page_size]) * page_size + pos % page_size;
    }
  }
  return slots;
}

void validate_slot_mapping(std::span<const int64_t> slots, int32_t page_size, int32_t num_pages) {
  QUENCH_REQUIRE(page_size >= 1, "page_size ", page_size, " must be >= 1");
  const int64_t end = static_cast<int64_t>(num_pages) * page_size;
  std::unordered_map<int64_t, size_t> first_token_of;
  for (size_t t = 0; t < slots.size(); ++t) {
    const int64_t slot = slots[t];
    if (slot == kPaddingSlot) continue;
    QUENCH_REQUIRE(slot >= page_size && slot < end, "slot mapping: token ", t, " has slot ", slot,
                   "; allowed: -1 (padding) or [", page_size, ", ", end,
                   ") (slots [0, page_size) are the null page)");
    const auto [it, inserted] = first_token_of.emplace(slot, t);
    QUENCH_REQUIRE(inserted, "slot mapping: tokens ", it->second, " and ", t, " both write slot ",
                   slot, "; each slot may be written once per batch");
  }
}

}  // namespace quench
