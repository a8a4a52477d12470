// Slot mapping: where each new token of a batch writes its K and V in the paged cache.
// A slot is a token index into the cache viewed as [num_pages * page_size] tokens:
//   slot = page * page_size + pos % page_size,  page = block_table_row[pos / page_size]
// for the token at absolute position pos of its sequence. Padding tokens get slot -1, and
// every kernel that writes the cache skips them.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "quench/kv_cache/block_table.h"

namespace quench {

inline constexpr int64_t kPaddingSlot = -1;

// Builds int64 [num_tokens] slots for a batch whose new tokens are packed sequence after
// sequence: sequence s contributes new_tokens[s] tokens at positions
// [seq_lens[s] - new_tokens[s], seq_lens[s]); the tail up to num_tokens is padding (-1).
//   seq_lens:   int32 [num_seqs], tokens per sequence including the new ones
//   new_tokens: int32 [num_seqs], 0 <= new_tokens[s] <= seq_lens[s]
// The table is validated (validate_block_table) first; throws when the new tokens exceed
// num_tokens.
std::vector<int64_t> build_slot_mapping(const BlockTable& table, std::span<const int32_t> seq_lens,
                                        std::span<const int32_t> new_tokens, int32_t page_size,
                                        int32_t num_pages, int64_t num_tokens);

// Checks slots a kernel will write: each is -1 or in [page_size, num_pages * page_size) (never
// the null page), and no slot appears twice. Throws naming the token and the bad slot.
// Stricter than the append ops' validate_kv_slot_mapping (ops/kv_append/kv_append_reference.h),
// which accepts page 0: here page 0 is the null page that block tables pad with and that no
// sequence owns, so a slot in it means the mapping was built wrong.
void validate_slot_mapping(std::span<const int64_t> slots, int32_t page_size, int32_t num_pages);

}  // namespace quench
