#include "quench/model/decode_graph_plan.h"

#include <algorithm>

#include "quench/core/error.h"
#include "quench/kv_cache/block_table.h"
#include "quench/kv_cache/kv_cache_layout.h"
#include "quench/kv_cache/slot_mapping.h"

namespace quench {

std::vector<int32_t> decode_graph_batch_sizes(int32_t max_num_seqs) {
  QUENCH_REQUIRE(max_num_seqs >= 1, "decode graph sizes: max_num_seqs ", max_num_seqs,
                 " must be >= 1");
  std::vector<int32_t> sizes;
  for (int32_t b : {1, 2, 4})
    if (b < max_num_seqs) sizes.push_back(b);
  for (int32_t b = 8; b < max_num_seqs; b += 8)
    sizes.push_back(b);
  sizes.push_back(max_num_seqs);
  return sizes;
}

int32_t decode_graph_batch_for(const AttentionMetadata& m, std::span<const int32_t> captured_sizes,
                               int32_t max_pages) {
  const bool decode_only = m.num_prefill_seqs == 0 && m.num_decode_seqs >= 1 &&
                           m.num_padding_seqs == 0 && m.max_decode_q_len == 1 &&
                           m.num_decode_tokens == m.num_decode_seqs &&
                           m.num_tokens == m.num_decode_tokens;
  if (!decode_only || m.max_pages > max_pages) return 0;
  const auto it = std::lower_bound(captured_sizes.begin(), captured_sizes.end(), m.num_decode_seqs);
  return it == captured_sizes.end() ? 0 : *it;
}

AttentionMetadata decode_graph_step_metadata(const AttentionMetadata& m, int32_t batch,
                                             int32_t max_pages) {
  QUENCH_REQUIRE(m.max_pages <= max_pages, "decode graph: block-table stride ", m.max_pages,
                 " exceeds the captured ", max_pages);
  AttentionMetadata padded = pad_attention_metadata(m, batch, batch);
  if (padded.max_pages != max_pages) {
    std::vector<int32_t> table(static_cast<size_t>(batch) * static_cast<size_t>(max_pages),
                               kNullPage);
    for (int32_t s = 0; s < batch; ++s) {
      std::copy_n(padded.block_table.begin() + static_cast<std::ptrdiff_t>(s) * padded.max_pages,
                  padded.max_pages, table.begin() + static_cast<std::ptrdiff_t>(s) * max_pages);
    }
    padded.block_table = std::move(table);
    padded.max_pages = max_pages;
  }
  return padded;
}

AttentionMetadata decode_graph_capture_metadata(int32_t batch, int32_t page_size,
                                                int32_t max_model_len, int32_t max_pages,
                                                int32_t q_len) {
  QUENCH_REQUIRE(
      batch >= 1 && max_model_len >= 1 && max_pages >= pages_for_tokens(max_model_len, page_size),
      "decode graph capture: batch ", batch, ", max_model_len ", max_model_len, " and max_pages ",
      max_pages, " are inconsistent");
  QUENCH_REQUIRE(q_len >= 1 && q_len <= kMaxDecodeQueryTokens && q_len <= max_model_len,
                 "decode step shape: q_len ", q_len, " is invalid; allowed: 1 to ",
                 kMaxDecodeQueryTokens, " and at most max_model_len ", max_model_len);
  const int32_t rows = batch * q_len;
  AttentionMetadata m;
  m.page_size = page_size;
  m.num_seqs = m.num_decode_seqs = batch;
  m.num_tokens = m.num_decode_tokens = rows;
  m.max_q_len = m.max_decode_q_len = q_len;
  m.max_seq_len = m.max_decode_seq_len = max_model_len;
  m.max_pages = max_pages;
  // Every sequence has its q_len rows but no keys (seq_len 0): as graph padding, the kernels
  // skip it; only the host values above matter.
  m.q_offsets.resize(static_cast<size_t>(batch) + 1);
  for (int32_t s = 0; s <= batch; ++s)
    m.q_offsets[static_cast<size_t>(s)] = s * q_len;
  m.prefill_q_offsets = {0};
  m.seq_lens.assign(static_cast<size_t>(batch), 0);
  m.block_table.assign(static_cast<size_t>(batch) * static_cast<size_t>(max_pages), kNullPage);
  m.slot_mapping.assign(static_cast<size_t>(rows), kPaddingSlot);
  m.positions.assign(static_cast<size_t>(rows), 0);
  return m;
}

}  // namespace quench
