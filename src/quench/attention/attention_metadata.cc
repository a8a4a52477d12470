#include "quench/attention/attention_metadata.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "quench/core/error.h"
#include "quench/kv_cache/block_table.h"
#include "quench/kv_cache/kv_cache_layout.h"
#include "quench/kv_cache/slot_mapping.h"

namespace quench {
namespace {

// Checks one scheduled sequence; returns the pages that hold its tokens.
std::vector<int32_t> checked_pages(const ScheduledSequence& seq, const char* phase, size_t index,
                                   int32_t page_size) {
  QUENCH_REQUIRE(seq.num_cached_tokens >= 0, phase, " sequence ", index, ": num_cached_tokens ",
                 seq.num_cached_tokens, " must be >= 0");
  QUENCH_REQUIRE(seq.num_new_tokens >= 1, phase, " sequence ", index, ": num_new_tokens ",
                 seq.num_new_tokens, " must be >= 1");
  // In int64: seq_lens and positions are int32, so the sum must fit before it is stored.
  const int64_t seq_len = int64_t{seq.num_cached_tokens} + seq.num_new_tokens;
  QUENCH_REQUIRE(seq_len <= std::numeric_limits<int32_t>::max(), phase, " sequence ", index,
                 ": num_cached_tokens ", seq.num_cached_tokens, " + num_new_tokens ",
                 seq.num_new_tokens, " = ", seq_len, " tokens; allowed: at most ",
                 std::numeric_limits<int32_t>::max());
  const int64_t needed = pages_for_tokens(seq_len, page_size);
  QUENCH_REQUIRE(static_cast<int64_t>(seq.pages.size()) >= needed, phase, " sequence ", index, ": ",
                 seq.pages.size(), " pages cannot hold ", seq_len, " tokens of page_size ",
                 page_size, " (needs ", needed, ")");
  return std::vector<int32_t>(seq.pages.begin(), seq.pages.begin() + needed);
}

}  // namespace

AttentionMetadata build_attention_metadata(std::span<const ScheduledSequence> decode_steps,
                                           std::span<const ScheduledSequence> prefill_chunks,
                                           int32_t page_size, int32_t num_pages,
                                           int32_t max_pages) {
  QUENCH_REQUIRE(page_size == 16 || page_size == 32 || page_size == 64, "page_size ", page_size,
                 " is not supported; allowed: 16, 32, 64");
  QUENCH_REQUIRE(max_pages >= 0, "max_pages ", max_pages, " must be >= 0 (0 = fit the step)");
  for (size_t i = 0; i < decode_steps.size(); ++i) {
    QUENCH_REQUIRE(decode_steps[i].num_new_tokens >= 1 &&
                       decode_steps[i].num_new_tokens <= kMaxDecodeQueryTokens,
                   "decode sequence ", i, ": num_new_tokens ", decode_steps[i].num_new_tokens,
                   " is outside [1, ", kMaxDecodeQueryTokens,
                   "] (one token, or one and its speculative drafts)");
  }

  AttentionMetadata m;
  m.page_size = page_size;
  std::vector<std::vector<int32_t>> seq_pages;
  std::vector<int32_t> new_tokens;
  m.q_offsets.push_back(0);
  auto add = [&](std::span<const ScheduledSequence> seqs, const char* phase) {
    for (size_t i = 0; i < seqs.size(); ++i) {
      const ScheduledSequence& s = seqs[i];
      // Query rows are numbered in int32 (q_offsets, slot_mapping, AttentionParams).
      const int64_t rows = int64_t{m.q_offsets.back()} + s.num_new_tokens;
      QUENCH_REQUIRE(rows <= std::numeric_limits<int32_t>::max(), phase, " sequence ", i,
                     ": num_new_tokens ", s.num_new_tokens, " brings the step to ", rows,
                     " query rows; allowed: at most ", std::numeric_limits<int32_t>::max());
      seq_pages.push_back(checked_pages(s, phase, i, page_size));
      const int32_t seq_len = s.num_cached_tokens + s.num_new_tokens;
      m.seq_lens.push_back(seq_len);
      new_tokens.push_back(s.num_new_tokens);
      m.q_offsets.push_back(m.q_offsets.back() + s.num_new_tokens);
      for (int32_t pos = s.num_cached_tokens; pos < seq_len; ++pos)
        m.positions.push_back(pos);
      m.max_q_len = std::max(m.max_q_len, s.num_new_tokens);
      m.max_seq_len = std::max(m.max_seq_len, seq_len);
    }
  };
  add(decode_steps, "decode");
  m.num_decode_seqs = static_cast<int32_t>(decode_steps.size());
  m.num_decode_tokens = m.q_offsets.back();
  m.max_decode_q_len = m.max_q_len;
  m.max_decode_seq_len = m.max_seq_len;
  add(prefill_chunks, "prefill");
  m.num_seqs = static_cast<int32_t>(m.seq_lens.size());
  m.num_tokens = m.q_offsets.back();
  m.num_prefill_seqs = m.num_seqs - m.num_decode_seqs;
  m.num_prefill_tokens = m.num_tokens - m.num_decode_tokens;
  for (int32_t b = m.num_decode_seqs; b < m.num_seqs; ++b) {
    const size_t i = static_cast<size_t>(b);
    m.max_prefill_q_len = std::max(m.max_prefill_q_len, new_tokens[i]);
    m.max_prefill_seq_len = std::max(m.max_prefill_seq_len, m.seq_lens[i]);
  }
  for (int32_t b = m.num_decode_seqs; b <= m.num_seqs; ++b) {
    m.prefill_q_offsets.push_back(m.q_offsets[static_cast<size_t>(b)] - m.num_decode_tokens);
  }

  if (max_pages == 0) {
    max_pages = 1;  // an empty step still gets a well-formed (all padding) table when padded
    for (const auto& pages : seq_pages) {
      max_pages = std::max(max_pages, static_cast<int32_t>(pages.size()));
    }
  }
  for (size_t i = 0; i < seq_pages.size(); ++i) {
    QUENCH_REQUIRE(static_cast<int32_t>(seq_pages[i].size()) <= max_pages, "sequence ", i,
                   " needs ", seq_pages[i].size(),
                   " pages; the block table holds max_pages = ", max_pages);
  }
  BlockTable table = build_block_table(seq_pages, max_pages, num_pages);
  m.max_pages = table.max_pages;
  m.slot_mapping =
      build_slot_mapping(table, m.seq_lens, new_tokens, page_size, num_pages, m.num_tokens);
  m.block_table = std::move(table.pages);
  return m;
}

AttentionMetadata pad_attention_metadata(const AttentionMetadata& metadata, int32_t num_seqs,
                                         int32_t num_tokens) {
  QUENCH_REQUIRE(num_seqs >= metadata.num_seqs, "cannot pad ", metadata.num_seqs,
                 " sequences down to ", num_seqs);
  QUENCH_REQUIRE(num_tokens >= metadata.num_tokens, "cannot pad ", metadata.num_tokens,
                 " query rows down to ", num_tokens);
  AttentionMetadata m = metadata;
  const int32_t extra = num_seqs - metadata.num_seqs;
  const int32_t real_rows = metadata.q_offsets.back();
  m.num_seqs = num_seqs;
  m.num_tokens = num_tokens;
  m.num_padding_seqs += extra;
  // Padding joins the last phase so that phase ranges stay contiguous: a decode-only batch (the
  // CUDA-graph case) stays decode-only.
  if (m.num_prefill_seqs > 0) {
    m.num_prefill_seqs += extra;
    m.prefill_q_offsets.resize(m.prefill_q_offsets.size() + static_cast<size_t>(extra),
                               m.prefill_q_offsets.back());
  } else {
    m.num_decode_seqs += extra;
    m.prefill_q_offsets.assign(1, 0);
  }
  m.q_offsets.resize(static_cast<size_t>(num_seqs) + 1, real_rows);
  m.seq_lens.resize(static_cast<size_t>(num_seqs), 0);
  m.block_table.resize(static_cast<size_t>(num_seqs) * static_cast<size_t>(m.max_pages), kNullPage);
  m.slot_mapping.resize(static_cast<size_t>(num_tokens), kPaddingSlot);
  m.positions.resize(static_cast<size_t>(num_tokens), 0);
  return m;
}

}  // namespace quench
