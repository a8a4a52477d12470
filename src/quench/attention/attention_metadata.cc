#include "quench/attention/attention_metadata.h"

#include <algorithm>

#include "quench/core/error.h"

namespace quench {
namespace {

void append_sequence(const ScheduledSequence& seq, const char* phase, int32_t index,
                     AttentionMetadata& m) {
  QUENCH_REQUIRE(seq.num_cached_tokens >= 0, phase, " sequence ", index, ": num_cached_tokens ",
                 seq.num_cached_tokens, " must be >= 0");
  QUENCH_REQUIRE(seq.num_new_tokens >= 1, phase, " sequence ", index, ": num_new_tokens ",
                 seq.num_new_tokens, " must be >= 1");
  const int32_t seq_len = seq.num_cached_tokens + seq.num_new_tokens;
  const int32_t pages_needed = (seq_len + m.page_size - 1) / m.page_size;
  QUENCH_REQUIRE(static_cast<int32_t>(seq.pages.size()) >= pages_needed, phase, " sequence ", index,
                 ": ", seq.pages.size(), " pages cannot hold ", seq_len, " tokens of page_size ",
                 m.page_size, " (needs ", pages_needed, ")");
  QUENCH_REQUIRE(pages_needed <= m.max_pages, phase, " sequence ", index, " needs ", pages_needed,
                 " pages; the block table holds max_pages = ", m.max_pages);
  for (size_t p = 0; p < static_cast<size_t>(pages_needed); ++p) {
    QUENCH_REQUIRE(seq.pages[p] >= 1, phase, " sequence ", index, ": page[", p,
                   "] = ", seq.pages[p], "; page ids must be >= 1 (page 0 is the null page)");
  }

  m.seq_lens.push_back(seq_len);
  m.block_table.resize(m.block_table.size() + static_cast<size_t>(m.max_pages), 0);
  std::copy_n(seq.pages.begin(), pages_needed,
              m.block_table.end() - static_cast<std::ptrdiff_t>(m.max_pages));
  for (int32_t pos = seq.num_cached_tokens; pos < seq_len; ++pos) {
    const int64_t page = seq.pages[static_cast<size_t>(pos / m.page_size)];
    m.slot_mapping.push_back(page * m.page_size + pos % m.page_size);
    m.positions.push_back(pos);
  }
  m.q_offsets.push_back(m.q_offsets.back() + seq.num_new_tokens);
  m.max_q_len = std::max(m.max_q_len, seq.num_new_tokens);
  m.max_seq_len = std::max(m.max_seq_len, seq_len);
  m.num_seqs += 1;
  m.num_tokens += seq.num_new_tokens;
}

int32_t pages_of(const ScheduledSequence& seq, int32_t page_size) {
  return (seq.num_cached_tokens + seq.num_new_tokens + page_size - 1) / page_size;
}

}  // namespace

AttentionMetadata build_attention_metadata(std::span<const ScheduledSequence> decode_steps,
                                           std::span<const ScheduledSequence> prefill_chunks,
                                           int32_t page_size, int32_t max_pages) {
  QUENCH_REQUIRE(page_size == 16 || page_size == 32 || page_size == 64, "page_size ", page_size,
                 " is not supported; allowed: 16, 32, 64");
  QUENCH_REQUIRE(max_pages >= 0, "max_pages ", max_pages, " must be >= 0 (0 = fit the step)");
  AttentionMetadata m;
  m.page_size = page_size;
  m.max_pages = max_pages;
  if (max_pages == 0) {
    for (const auto& s : decode_steps)
      m.max_pages = std::max(m.max_pages, pages_of(s, page_size));
    for (const auto& s : prefill_chunks)
      m.max_pages = std::max(m.max_pages, pages_of(s, page_size));
  }
  m.q_offsets.push_back(0);
  for (size_t i = 0; i < decode_steps.size(); ++i) {
    QUENCH_REQUIRE(decode_steps[i].num_new_tokens == 1, "decode sequence ", i, ": num_new_tokens ",
                   decode_steps[i].num_new_tokens, " must be 1");
    append_sequence(decode_steps[i], "decode", static_cast<int32_t>(i), m);
  }
  m.num_decode_seqs = m.num_seqs;
  m.num_decode_tokens = m.num_tokens;
  m.max_decode_q_len = m.max_q_len;
  m.max_decode_seq_len = m.max_seq_len;
  for (size_t i = 0; i < prefill_chunks.size(); ++i) {
    append_sequence(prefill_chunks[i], "prefill", static_cast<int32_t>(i), m);
  }
  m.num_prefill_seqs = m.num_seqs - m.num_decode_seqs;
  for (int32_t b = m.num_decode_seqs; b < m.num_seqs; ++b) {
    const size_t i = static_cast<size_t>(b);
    m.max_prefill_q_len = std::max(m.max_prefill_q_len, m.q_offsets[i + 1] - m.q_offsets[i]);
    m.max_prefill_seq_len = std::max(m.max_prefill_seq_len, m.seq_lens[i]);
  }
  m.num_prefill_tokens = m.num_tokens - m.num_decode_tokens;
  for (int32_t b = m.num_decode_seqs; b <= m.num_seqs; ++b) {
    m.prefill_q_offsets.push_back(m.q_offsets[static_cast<size_t>(b)] - m.num_decode_tokens);
  }
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
  m.block_table.resize(static_cast<size_t>(num_seqs) * static_cast<size_t>(m.max_pages), 0);
  m.slot_mapping.resize(static_cast<size_t>(num_tokens), -1);
  m.positions.resize(static_cast<size_t>(num_tokens), 0);
  return m;
}

}  // namespace quench
