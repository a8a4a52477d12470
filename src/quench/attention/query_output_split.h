// Which query rows the fused RoPE + quantize + append kernel writes in bf16 and which in FP8, for
// a batch laid out decode rows first (attention_metadata.h). The kernel writes bf16 rows first,
// then FP8 rows: that serves a decode kernel taking a bf16 query and a prefill kernel taking an
// FP8 one (SPEC §1: FP8 KV on sm_90), or both phases FP8 of one dtype. Any other combination gets
// bf16 rows only and the attention op quantizes what a phase needs.
#pragma once

#include <cstdint>

#include "quench/attention/attention_kernel_selection.h"

namespace quench {

struct QueryOutputSplit {
  int32_t bf16_rows = 0;              // rows [0, bf16_rows) in bf16, the rest FP8
  DType fp8_dtype = DType::kFP8E4M3;  // of the FP8 rows
  bool fp8_rows_ready = false;        // AttentionOpArgs::q_fp8_ready
};

QueryOutputSplit query_output_split(const AttentionBackendSelection& selection,
                                    int32_t num_decode_tokens, int32_t num_tokens);

}  // namespace quench
