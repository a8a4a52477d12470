// The decode attention test grid: the problems the GPU decode tests run against the CPU
// reference (decode_attention_gpu_test.cu), listed once so that a CPU test can check each one's
// power to fail (decode_test_cases_test.cc: SPEC's absolute tolerance must not swallow its
// outputs).
#pragma once

#include <string>
#include <vector>

#include "harness/attention_problem.h"

namespace quench::testing_support {

struct DecodeCase {
  std::string name;
  AttentionProblemConfig config;
};

// Four decode requests of lengths 1, 17, 1000 and 4096 (one token each), 2 KV heads, `group` q
// heads per KV head, non-unit per-head k/v scales, and non-unit q_scale / o_scale that the
// contract ignores for a bf16 / f16 query and a bf16 output.
AttentionProblemConfig decode_grid_config(DType kv, DType q, int32_t group, int32_t head_dim,
                                          int32_t page_size, KvLayout layout, uint64_t seed);

// The query magnitude (AttentionProblemConfig::q_magnitude) that leaves about `keys` keys
// carrying a row's softmax over max_kv_len keys: N(0, 1) values averaged over thousands of keys
// shrink like 1 / sqrt(keys) below SPEC's absolute tolerance (0.06 for bf16 q over FP8 KV), where
// a kernel that lost V, or merged the splits' partial outputs wrongly, would pass. Scores of
// standard deviation s leave about n * exp(-s^2) effective keys, so s = sqrt(ln(n / keys)), and
// at least 1 (the default).
float peaked_q_magnitude(int32_t max_kv_len, double keys = 16.0);

// A case name from the config's dtypes, group, head dim, page size, layout and output dtype.
std::string decode_grid_name(const AttentionProblemConfig& c);

// The grid: dtypes x head dims, groups x pages x layouts, both sm_90 tile loops, output dtypes,
// and features (windows, soft-cap, sinks, padding, multi-token queries, long contexts).
std::vector<DecodeCase> decode_grid_cases();

}  // namespace quench::testing_support
