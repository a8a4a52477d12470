// Per-step attention metadata, built on the host from the scheduled sequences of one step and
// uploaded as is for GPU kernels. Sequences are ordered decode steps first, then prefill chunks
// (each chunk may follow a cached prefix); padding sequences, if any, come last.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace quench {

// One sequence scheduled in this step. Its KV cache already holds num_cached_tokens tokens; this
// step appends num_new_tokens more (1 for a decode step) and computes their attention.
struct ScheduledSequence {
  std::vector<int32_t> pages;  // page ids in token order; >= 1 (page 0 is the null page); must
                               // cover num_cached_tokens + num_new_tokens tokens
  int32_t num_cached_tokens = 0;
  int32_t num_new_tokens = 0;
};

struct AttentionMetadata {
  int32_t page_size = 0;
  int32_t num_seqs = 0;    // real + padding sequences
  int32_t num_tokens = 0;  // query rows incl. padding rows (= slot_mapping.size())
  int32_t num_decode_seqs = 0;
  int32_t num_decode_tokens = 0;  // rows [0, num_decode_tokens) are decode rows
  int32_t num_prefill_seqs = 0;
  int32_t num_prefill_tokens = 0;  // rows [num_decode_tokens, + num_prefill_tokens)
  int32_t num_padding_seqs = 0;    // the last sequences; counted in the last phase's seqs
  int32_t max_q_len = 0;           // over all sequences
  int32_t max_seq_len = 0;         // over all sequences
  // The same maxima per phase (each kernel gets the bounds of its own rows).
  int32_t max_decode_q_len = 0;
  int32_t max_decode_seq_len = 0;
  int32_t max_prefill_q_len = 0;
  int32_t max_prefill_seq_len = 0;
  int32_t max_pages = 0;  // block_table row stride

  std::vector<int32_t> q_offsets;  // [num_seqs + 1] query row ranges, q_offsets[0] == 0
  // [num_prefill_seqs + 1] the prefill part's q_offsets rebased to 0 (the prefill kernel sees
  // its rows as a batch of its own: AttentionParams requires q_offsets[0] == 0).
  std::vector<int32_t> prefill_q_offsets;
  std::vector<int32_t> seq_lens;      // [num_seqs] cached + new tokens; 0 for padding
  std::vector<int32_t> block_table;   // [num_seqs, max_pages] int32 page ids; unused entries 0
  std::vector<int64_t> slot_mapping;  // [num_tokens] page * page_size + offset; -1 = padding
  std::vector<int32_t> positions;     // [num_tokens] absolute position of each row; 0 for padding
};

// Query tokens of one decode row: the sequence's next token and up to 7 speculative drafts after
// it, causal among themselves (the decode kernels' multi-token rows).
inline constexpr int32_t kMaxDecodeQueryTokens = 8;

// Builds the metadata of one step over a cache of `num_pages` pages (page ids in [1, num_pages)).
// `max_pages` fixes the block-table stride (e.g. max_model_len / page_size, so CUDA graphs see
// one shape); 0 = the largest page count in the step. The block table and slot mapping come
// from kv_cache/block_table.h and kv_cache/slot_mapping.h. Throws quench::Error naming the
// sequence and field when a sequence is inconsistent.
AttentionMetadata build_attention_metadata(std::span<const ScheduledSequence> decode_steps,
                                           std::span<const ScheduledSequence> prefill_chunks,
                                           int32_t page_size, int32_t num_pages,
                                           int32_t max_pages = 0);

// Pads `metadata` to a captured batch of num_seqs sequences and num_tokens query rows: each extra
// sequence has q_len 0, seq_len 0 and block-table row all null page 0; each extra row has slot -1
// and position 0. Real entries are unchanged. Throws when the targets are below the real sizes.
AttentionMetadata pad_attention_metadata(const AttentionMetadata& metadata, int32_t num_seqs,
                                         int32_t num_tokens);

}  // namespace quench
