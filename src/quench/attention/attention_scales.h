// Bookkeeping of one attention layer's quantization scales (SPEC §1.2), from a checkpoint:
//   q_scale  per tensor. Divides when the op quantizes the query (stored = fp8(q / q_scale)),
//            multiplies in the kernel's scores. Only ever applied to an FP8 query.
//   k_scale, v_scale  per tensor or per KV head, separate. Divide when K/V are stored
//            (stored = fp8(x / scale)), multiply when the kernel reads them.
//   o_scale  per tensor. The kernel epilogue divides by it for FP8 output (o_fp8 = fp8(o /
//   o_scale)).
// Missing scales follow vLLM: q_scale = k_scale, k/v = 1.0, each with a warning; a missing o_scale
// is 1.0, with a warning only when the output is FP8 (it is unused otherwise).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "quench/core/dtype.h"
#include "quench/core/head_scales.h"

namespace quench {

// Scales as found in a checkpoint: absent, one value, or (k/v only) one value per KV head.
struct CheckpointAttentionScales {
  std::optional<std::vector<float>> q_scale;
  std::optional<std::vector<float>> k_scale;
  std::optional<std::vector<float>> v_scale;
  std::optional<std::vector<float>> o_scale;
};

class AttentionScales {
 public:
  // Throws quench::Error for a scale that is not finite and > 0, or has a count other than 1
  // (or num_kv_heads for k/v). `layer` names the layer in warnings and errors.
  static AttentionScales from_checkpoint(const CheckpointAttentionScales& checkpoint,
                                         int32_t num_kv_heads, DType out_dtype,
                                         const std::string& layer);

  float q_scale() const { return q_scale_; }
  float o_scale() const { return o_scale_; }
  // Views whose per_head pointer (when per-head) points into this object: host memory, valid
  // while this object lives. A device engine uploads per_head_values() and points there.
  HeadScales k_scale() const { return view(k_scale_); }
  HeadScales v_scale() const { return view(v_scale_); }
  const std::vector<float>& k_values() const { return k_scale_; }  // [1] or [num_kv_heads]
  const std::vector<float>& v_values() const { return v_scale_; }

 private:
  static HeadScales view(const std::vector<float>& values);

  float q_scale_ = 1.0f;
  float o_scale_ = 1.0f;
  std::vector<float> k_scale_{1.0f};
  std::vector<float> v_scale_{1.0f};
};

}  // namespace quench
