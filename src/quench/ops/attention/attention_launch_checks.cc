#include "quench/ops/attention/attention_launch_checks.h"

#include <cstdint>
#include <limits>
#include <utility>

#include "quench/core/error.h"
#include "quench/ops/attention/attention_reference.h"

namespace quench {

void validate_attention_launch(const AttentionParams& params, const char* launcher) {
  QUENCH_REQUIRE(params.num_seqs >= 0 && params.num_tokens >= 0 && params.max_q_len >= 0 &&
                     params.max_seq_len >= 0,
                 launcher, ": negative size (num_seqs ", params.num_seqs, ", num_tokens ",
                 params.num_tokens, ", max_q_len ", params.max_q_len, ", max_seq_len ",
                 params.max_seq_len, "); allowed: >= 0");
  // Kernels round lengths up to whole KV tiles (at most 128 keys) in int32.
  constexpr int32_t kMaxSeqLen = std::numeric_limits<int32_t>::max() - 255;
  QUENCH_REQUIRE(params.max_seq_len <= kMaxSeqLen, launcher, ": max_seq_len ", params.max_seq_len,
                 " is too long; allowed: at most 2^31 - 256 tokens");
  try {
    validate_attention_scalars(params);
  } catch (const Error& e) {
    fail(str_cat(launcher, ": ", e.what()));
  }
  if (params.num_seqs == 0) return;
  const std::pair<const void*, const char*> arrays[] = {
      {params.q, "q"},
      {params.k_cache, "k_cache"},
      {params.v_cache, "v_cache"},
      {params.q_offsets, "q_offsets"},
      {params.seq_lens, "seq_lens"},
      {params.block_table, "block_table"},
  };
  for (const auto& [pointer, name] : arrays) {
    QUENCH_REQUIRE(pointer != nullptr, launcher, ": ", name,
                   " is null; allowed: a device pointer (null only for a batch of no sequences)");
  }
  QUENCH_REQUIRE(params.out != nullptr || params.out_fp8.requested(), launcher,
                 ": out is null; allowed: a device pointer (null only with out_fp8, or for a ",
                 "batch of no sequences)");
  QUENCH_REQUIRE(params.block_table_stride >= 1, launcher, ": block_table_stride ",
                 params.block_table_stride, " is invalid; allowed: >= 1");
  try {
    params.kv.validate();
  } catch (const Error& e) {
    fail(str_cat(launcher, ": ", e.what()));
  }
}

}  // namespace quench
