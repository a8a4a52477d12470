#include "quench/attention/query_output_split.h"

namespace quench {

QueryOutputSplit query_output_split(const AttentionBackendSelection& selection,
                                    int32_t num_decode_tokens, int32_t num_tokens) {
  const DType decode_q = selection.decode().q_dtype;
  const DType prefill_q = selection.prefill().q_dtype;
  QueryOutputSplit split;
  split.bf16_rows = num_tokens;
  if (is_fp8(prefill_q) && !is_fp8(decode_q)) {
    split.bf16_rows = num_decode_tokens;
    split.fp8_dtype = prefill_q;
    split.fp8_rows_ready = true;
  } else if (is_fp8(prefill_q) && prefill_q == decode_q) {
    split.bf16_rows = 0;
    split.fp8_dtype = prefill_q;
    split.fp8_rows_ready = true;
  }
  return split;
}

}  // namespace quench
