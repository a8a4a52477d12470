// validate_decode_attention_params on host buffers (it only checks pointers and sizes, never
// dereferences them): the output must be a buffer of its own, since the split merge may write it
// while the main kernel still reads q (decode_merge.cu's warm-up pass).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "harness/attention_problem.h"
#include "quench/core/error.h"
#include "quench/ops/attention/decode/decode_attention.h"

namespace quench::testing_support {
namespace {

AttentionProblemConfig decode_config(DType out_dtype) {
  AttentionProblemConfig c;
  c.seqs = {{1, 40}, {1, 17}};  // one query token each
  c.num_q_heads = 8;
  c.num_kv_heads = 2;
  c.q_dtype = DType::kBF16;
  c.kv_dtype = DType::kFP8E4M3;
  c.out_dtype = out_dtype;
  return c;
}

std::string rejection(const AttentionParams& p) {
  try {
    validate_decode_attention_params(p);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(DecodeAttentionValidation, OutputApartFromTheQueryIsAccepted) {
  const AttentionProblem problem(decode_config(DType::kBF16));
  std::vector<uint8_t> out = problem.poisoned_out();
  EXPECT_EQ(rejection(problem.host_params(out.data(), nullptr, nullptr)), "");
}

TEST(DecodeAttentionValidation, OutputOverlappingTheQueryIsRejected) {
  for (const DType out_dtype : {DType::kBF16, DType::kFP8E4M3}) {
    const AttentionProblem problem(decode_config(out_dtype));
    std::vector<uint8_t> out = problem.poisoned_out();
    AttentionParams p = problem.host_params(out.data(), nullptr, nullptr);
    const auto* q = static_cast<const uint8_t*>(p.q);
    const size_t q_bytes = static_cast<size_t>(p.num_tokens) * p.num_q_heads * p.kv.head_dim * 2;
    // In place, and overlapping by the last 16 bytes of q.
    for (const uint8_t* at : {q, q + q_bytes - 16}) {
      p.out = const_cast<uint8_t*>(at);
      const std::string message = rejection(p);
      EXPECT_NE(message.find("out overlaps q"), std::string::npos)
          << dtype_name(out_dtype) << ": " << message;
    }
    // Right after q: apart.
    std::vector<uint8_t> both(q_bytes + out.size() + 16);
    auto* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(both.data()) + 15) &
                                            ~uintptr_t{15});
    p.q = base;
    p.out = base + q_bytes;
    EXPECT_EQ(rejection(p), "") << dtype_name(out_dtype);
  }
}

}  // namespace
}  // namespace quench::testing_support
