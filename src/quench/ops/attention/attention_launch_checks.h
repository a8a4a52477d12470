// The host-side checks every GPU attention launcher (decode, generic and Hopper prefill) makes
// before it launches: what the CPU reference checks without reading an array, and that the
// arrays a kernel will read are there.
#pragma once

#include "quench/ops/attention/attention_params.h"

namespace quench {

// Throws quench::Error, prefixed with `launcher` ("decode attention", "prefill_attention_hopper",
// ...), for: a negative num_seqs, num_tokens, max_q_len or max_seq_len, or a max_seq_len over
// 2^31 - 256 (kernels round lengths up to whole tiles in int32); a scale, soft-cap,
// window or NVFP4 output field the CPU reference rejects (validate_attention_scalars); and, for a
// batch of sequences, a null q, k_cache, v_cache, q_offsets, seq_lens or block_table, a null out
// without out_fp8, or a
// block_table_stride < 1, or a KV cache layout KvCacheLayout::validate rejects. A batch of no
// sequences reads no array, so its pointers (and its layout) are not checked.
void validate_attention_launch(const AttentionParams& params, const char* launcher);

}  // namespace quench
