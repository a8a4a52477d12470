#include "quench/ops/rope_quant_append/rope_quant_append_unfused.h"

#include <cstdint>

#include "quench/core/error.h"
#include "quench/ops/kv_append/kv_append.h"
#include "quench/ops/quantize/quantize_fp8.h"
#include "quench/ops/rope/rope.h"
#include "quench/ops/rope_quant_append/rope_quant_append.h"
#include "quench/ops/rope_quant_append/rope_quant_append_checks.h"

namespace quench {
namespace {

size_t round_up_256(size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

// Byte sizes of the intermediates, in workspace order.
struct WorkspaceLayout {
  size_t q_rot = 0;    // bf16 [T, Hq, D]
  size_t k_rot = 0;    // bf16 [T, Hkv, D]
  size_t kv_rows = 0;  // FP8 [T, Hkv, D] each for k and v (0 for a bf16 cache)

  explicit WorkspaceLayout(const RopeQuantAppendParams& p) {
    const auto t = static_cast<size_t>(p.num_tokens);
    const auto d = static_cast<size_t>(p.head_dim);
    q_rot = round_up_256(t * static_cast<size_t>(p.num_q_heads) * d * 2);
    k_rot = round_up_256(t * static_cast<size_t>(p.num_kv_heads) * d * 2);
    kv_rows = is_fp8(p.kv.dtype) ? round_up_256(t * static_cast<size_t>(p.num_kv_heads) * d) : 0;
  }
  size_t total() const { return q_rot + k_rot + 2 * kv_rows; }
};

}  // namespace

size_t rope_quant_append_workspace_bytes(const RopeQuantAppendParams& p) {
  return WorkspaceLayout(p).total();
}

void rope_quant_append_unfused_cuda(const RopeQuantAppendParams& p,
                                    const RopeAppendWorkspace& workspace, cudaStream_t stream) {
  check_rope_quant_append_gpu_params(p);
  const std::string reason = rope_quant_append_fused_unsupported_reason(p);
  QUENCH_REQUIRE(reason.empty(), "unfused rope_quant_append: ", reason);
  if (p.num_tokens == 0) return;
  const WorkspaceLayout layout(p);
  QUENCH_REQUIRE(workspace.data != nullptr && workspace.bytes >= layout.total(),
                 "rope_quant_append workspace of ", workspace.bytes, " bytes is too small; needs ",
                 layout.total());
  auto* base = static_cast<uint8_t*>(workspace.data);
  auto* q_rot = reinterpret_cast<uint16_t*>(base);
  auto* k_rot = reinterpret_cast<uint16_t*>(base + layout.q_rot);
  uint8_t* k_rows = base + layout.q_rot + layout.k_rot;
  uint8_t* v_rows = k_rows + layout.kv_rows;
  const int64_t q_row = static_cast<int64_t>(p.num_q_heads) * p.head_dim;
  const int64_t kv_row = static_cast<int64_t>(p.num_kv_heads) * p.head_dim;

  RopeParams rope;
  rope.num_tokens = p.num_tokens;
  rope.num_q_heads = p.num_q_heads;
  rope.num_kv_heads = p.num_kv_heads;
  rope.head_dim = p.head_dim;
  rope.q = p.q;
  rope.k = p.k;
  rope.q_row_stride = p.q_row_stride;
  rope.k_row_stride = p.k_row_stride;
  rope.positions = p.positions;
  rope.rope = p.rope;
  rope.cos_sin_cache = p.cos_sin_cache;
  rope.cos_sin_cache_positions = p.cos_sin_cache_positions;
  rope.q_norm_weight = p.q_norm_weight;
  rope.k_norm_weight = p.k_norm_weight;
  rope.norm_eps = p.norm_eps;
  rope.q_out = q_rot;
  rope.k_out = k_rot;
  rope_cuda(rope, stream);

  // Query rows: a bf16 copy for [0, q_bf16_rows), fp8(q / q_scale) for the rest; padding skipped.
  QuantizeRowsParams q;
  q.num_heads = p.num_q_heads;
  q.head_dim = p.head_dim;
  q.x_row_stride = q_row;
  if (p.q_bf16_rows > 0) {
    q.num_rows = p.q_bf16_rows;
    q.x = q_rot;
    q.out = p.q_out_bf16;
    q.out_dtype = DType::kBF16;
    q.row_slots = p.slot_mapping;
    quantize_rows_cuda(q, stream);
  }
  if (p.q_bf16_rows < p.num_tokens) {
    q.num_rows = p.num_tokens - p.q_bf16_rows;
    q.x = q_rot + p.q_bf16_rows * q_row;
    q.out = p.q_out_fp8 + p.q_bf16_rows * q_row;
    q.out_dtype = p.q_fp8_dtype;
    q.scale = HeadScales{p.q_scale, nullptr};
    q.row_slots = p.slot_mapping + p.q_bf16_rows;
    quantize_rows_cuda(q, stream);
  }

  KvAppendParams append;
  append.num_tokens = p.num_tokens;
  append.slot_mapping = p.slot_mapping;
  append.k_cache = p.k_cache;
  append.v_cache = p.v_cache;
  append.kv = p.kv;
  if (is_fp8(p.kv.dtype)) {
    QuantizeRowsParams kv;
    kv.num_rows = p.num_tokens;
    kv.num_heads = p.num_kv_heads;
    kv.head_dim = p.head_dim;
    kv.out_dtype = p.kv.dtype;
    kv.x = k_rot;
    kv.x_row_stride = kv_row;
    kv.out = k_rows;
    kv.scale = p.k_scale;
    quantize_rows_cuda(kv, stream);
    kv.x = p.v;
    kv.x_row_stride = p.v_row_stride;
    kv.out = v_rows;
    kv.scale = p.v_scale;
    quantize_rows_cuda(kv, stream);
    append.k = k_rows;
    append.v = v_rows;
    append.k_row_stride = kv_row;
    append.v_row_stride = kv_row;
  } else {
    append.k = k_rot;
    append.v = p.v;
    append.k_row_stride = kv_row;
    append.v_row_stride = p.v_row_stride;
  }
  kv_append_cuda(append, stream);
}

}  // namespace quench
