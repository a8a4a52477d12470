// Which decode steps run under a CUDA graph, and the metadata a graph reads (SPEC §1.4). Graphs
// are captured for a ladder of batch sizes; a step of B sequences runs under the smallest size
// B' >= B, padded with sequences of seq_len 0 (the null page) and rows of slot -1 that every kernel
// skips. Host values the kernels take at launch are frozen in a graph, so the graph of size B' is
// captured with B' one-row decode sequences, every one of max_model_len tokens at most (the decode
// kernel's split count for the longest), and a block-table stride of max_pages; the per-step
// arrays go to the same device addresses before each replay. Host-only: testable without a GPU.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "quench/attention/attention_metadata.h"

namespace quench {

// vLLM's ladder: 1, 2, 4, then multiples of 8, up to max_num_seqs (which is included).
std::vector<int32_t> decode_graph_batch_sizes(int32_t max_num_seqs);

// The captured size a step runs under, or 0 when it runs eagerly: a decode-only step (one query
// row per sequence, no padding of its own) of at most the largest captured size, whose
// block-table stride is at most max_pages.
int32_t decode_graph_batch_for(const AttentionMetadata& metadata,
                               std::span<const int32_t> captured_sizes, int32_t max_pages);

// The step's metadata as the graph of `batch` sequences reads it: padded (pad_attention_metadata)
// and the block table laid out with a stride of max_pages.
AttentionMetadata decode_graph_step_metadata(const AttentionMetadata& metadata, int32_t batch,
                                             int32_t max_pages);

// The metadata a graph of `batch` sequences is captured with (and warmed up on): its host values
// are the graph's, its arrays a step that touches nothing (every seq_len 0, every slot -1).
// q_len > 1 (up to kMaxDecodeQueryTokens) gives each sequence that many query rows: the shape of
// an eager decode step with drafts, whose host values size the attention workspace at start.
AttentionMetadata decode_graph_capture_metadata(int32_t batch, int32_t page_size,
                                                int32_t max_model_len, int32_t max_pages,
                                                int32_t q_len = 1);

}  // namespace quench
