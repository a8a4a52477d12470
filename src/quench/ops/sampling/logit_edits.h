// A row's logit adjustments before its token is picked, as data: one edit per touched token and an
// optional mask of allowed tokens. The engine compiles a request's processors (logit_bias,
// repetition / frequency / presence penalties, min_tokens, JSON mode; engine/logits_processors.h)
// into these once per step, and the runner applies them where the logits are: this reference on
// the CPU, apply_logit_edits_cuda on the GPU, with the same float operations in the same order, so
// both give the same logits bit for bit.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "quench/core/host_device.h"

namespace quench {

// A masked token's logit: the lowest float (FLT_MAX's negative; never the argmax, probability 0).
inline constexpr float kMaskedLogit = -3.402823466e+38f;

// One token's adjustment, in vLLM's order: l += bias; then, unless repetition is 1,
// l = l > 0 ? l / repetition : l * repetition; then l -= subtract; and a masked token's logit
// becomes the lowest float whatever came before (never the argmax, probability 0).
struct LogitEdit {
  int32_t token = 0;
  float bias = 0.0f;
  float repetition = 1.0f;
  float subtract = 0.0f;
  uint32_t masked = 0;  // 1: masked
};

// Each step rounded on its own: the device's operations are the round-to-nearest intrinsics,
// which the compiler never fuses into a multiply-add (the host's build has no FMA to fuse with).
QUENCH_HD float edited_logit(float l, const LogitEdit& e) {
#if defined(__CUDA_ARCH__)
  l = __fadd_rn(l, e.bias);
  if (e.repetition != 1.0f) l = l > 0.0f ? __fdiv_rn(l, e.repetition) : __fmul_rn(l, e.repetition);
  l = __fsub_rn(l, e.subtract);
#else
  l = l + e.bias;
  if (e.repetition != 1.0f) l = l > 0.0f ? l / e.repetition : l * e.repetition;
  l = l - e.subtract;
#endif
  return e.masked != 0 ? kMaskedLogit : l;
}

// A row's edits: tokens unique and inside the vocabulary; where has_allowed, token t stays only
// when bit t of allowed_bits is set (word t / 32, bit t % 32); ids past the words are masked.
struct RowLogitEdits {
  std::vector<LogitEdit> edits;
  bool has_allowed = false;
  std::vector<uint32_t> allowed_bits;
};

QUENCH_HD bool logit_allowed(const uint32_t* bits, int32_t words, int32_t token) {
  return token / 32 < words && ((bits[token / 32] >> (token % 32)) & 1u) != 0;
}

// Applies `e` to one row of fp32 logits. Throws quench::Error for a token outside the row.
void apply_logit_edits_reference(std::span<float> row, const RowLogitEdits& e);

}  // namespace quench
