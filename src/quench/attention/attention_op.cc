#include "quench/attention/attention_op.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>

#include "quench/attention/query_quantize.h"
#include "quench/core/error.h"

namespace quench {
namespace {

int64_t row_bytes(DType dtype, int64_t row_elems) {
  return static_cast<int64_t>(dtype_bytes(dtype, static_cast<size_t>(row_elems)));
}

template <typename T>
T* advance_bytes(T* pointer, int64_t bytes) {
  using Byte = std::conditional_t<std::is_const_v<T>, const char, char>;
  return reinterpret_cast<T*>(reinterpret_cast<Byte*>(pointer) + bytes);
}

// The part of the batch a phase owns: decode sequences and their query rows come first, prefill
// ones after them (the order attention_metadata.h documents).
struct PhaseSlice {
  int32_t first_seq = 0;
  int32_t first_row = 0;
  int32_t num_rows = 0;
};

PhaseSlice phase_slice(const AttentionMetadataView& m, AttentionPhase phase) {
  if (phase == AttentionPhase::kPrefill) {
    return {m.num_decode_seqs, m.num_decode_tokens, m.num_prefill_tokens};
  }
  return {0, 0, m.num_decode_tokens};
}

void require_kv_matches(const AttentionConfig& config, const KvCacheLayout& kv) {
  QUENCH_REQUIRE(kv.dtype == config.kv_dtype && kv.page_size == config.page_size &&
                     kv.num_kv_heads == config.num_kv_heads && kv.head_dim == config.head_dim_qk &&
                     kv.layout == config.layout,
                 "KV cache (", kv.describe(), ") does not match the attention configuration (",
                 config.describe(), ")");
}

}  // namespace

AttentionMetadataView host_metadata_view(const AttentionMetadata& m) {
  AttentionMetadataView view;
  view.num_decode_seqs = m.num_decode_seqs;
  view.num_decode_tokens = m.num_decode_tokens;
  view.num_prefill_seqs = m.num_prefill_seqs;
  view.num_prefill_tokens = m.num_prefill_tokens;
  view.max_decode_q_len = m.max_decode_q_len;
  view.max_decode_seq_len = m.max_decode_seq_len;
  view.max_prefill_q_len = m.max_prefill_q_len;
  view.max_prefill_seq_len = m.max_prefill_seq_len;
  view.max_pages = m.max_pages;
  view.q_offsets = m.q_offsets.data();
  view.prefill_q_offsets = m.prefill_q_offsets.data();
  view.seq_lens = m.seq_lens.data();
  view.block_table = m.block_table.data();
  return view;
}

AttentionOp::AttentionOp(AttentionBackendSelection selection, AttentionScales scales,
                         AttentionLayerSettings settings)
    : selection_(std::move(selection)), scales_(std::move(scales)), settings_(settings) {
  const AttentionConfig& config = selection_.config();
  const AttentionKernel& prefill = *selection_.prefill().kernel;
  const AttentionKernel& decode = *selection_.decode().kernel;
  QUENCH_REQUIRE(prefill.memory_space() == decode.memory_space(), "prefill kernel '",
                 prefill.name(), "' and decode kernel '", decode.name(),
                 "' read different memory spaces (host vs device); choose kernels of one kind");
  QUENCH_REQUIRE(std::isfinite(settings_.sm_scale) && settings_.sm_scale > 0.0f, "sm_scale ",
                 settings_.sm_scale, " is invalid; allowed: finite and > 0 (typically 1/sqrt(D))");
  QUENCH_REQUIRE((settings_.sinks != nullptr) == config.has_sinks,
                 config.has_sinks ? "the configuration has attention sinks but no sinks were given"
                                  : "sinks were given but the configuration has none");
  const bool device = decode.memory_space() == MemorySpace::kDevice;
  if (device && config.kv_dtype != DType::kBF16) {
    QUENCH_REQUIRE(scales_.k_values().size() == 1 || settings_.device_k_scale_per_head != nullptr,
                   "per-head k_scale needs device_k_scale_per_head for device kernels");
    QUENCH_REQUIRE(scales_.v_values().size() == 1 || settings_.device_v_scale_per_head != nullptr,
                   "per-head v_scale needs device_v_scale_per_head for device kernels");
  }
}

void AttentionOp::run(const AttentionOpArgs& args, void* stream) const {
  require_kv_matches(selection_.config(), args.kv);
  QUENCH_REQUIRE(args.q != nullptr && (args.out != nullptr || args.out_fp8.requested()) &&
                     args.k_cache != nullptr && args.v_cache != nullptr,
                 "attention op needs q, out (or out_fp8), k_cache and v_cache");
  if (args.out_fp8.requested()) {
    QUENCH_REQUIRE(writes_fp8_rows(), "attention op: out_fp8 is not written with ",
                   dtype_name(selection_.config().out_dtype), " output by decode kernel '",
                   selection_.decode().kernel->name(),
                   "'; allowed: bf16 output and a decode kernel that writes it (decode_gqa at "
                   "head_dim 128, the host kernels)");
    QUENCH_REQUIRE(args.metadata.num_prefill_seqs == 0, "attention op: out_fp8 with ",
                   args.metadata.num_prefill_seqs,
                   " prefill sequences; allowed: a batch of decode rows only");
  }
  if (args.metadata.num_decode_seqs > 0) run_phase(args, AttentionPhase::kDecode, stream);
  if (args.metadata.num_prefill_seqs > 0) run_phase(args, AttentionPhase::kPrefill, stream);
}

bool AttentionOp::writes_fp8_rows() const {
  const AttentionConfig& config = selection_.config();
  return config.out_dtype == DType::kBF16 && selection_.decode().kernel->writes_fp8_rows(config);
}

size_t AttentionOp::workspace_bytes(const AttentionOpArgs& args) const {
  size_t bytes = 0;
  for (AttentionPhase phase : {AttentionPhase::kDecode, AttentionPhase::kPrefill}) {
    const bool prefill = phase == AttentionPhase::kPrefill;
    if ((prefill ? args.metadata.num_prefill_seqs : args.metadata.num_decode_seqs) == 0) continue;
    bytes =
        std::max(bytes, selection_.at(phase).kernel->workspace_bytes(phase_params(args, phase)));
  }
  return bytes;
}

void AttentionOp::run_phase(const AttentionOpArgs& args, AttentionPhase phase, void* stream) const {
  const AttentionConfig& config = selection_.config();
  const AttentionPhaseDecision& decision = selection_.at(phase);
  const bool device = decision.kernel->memory_space() == MemorySpace::kDevice;
  const PhaseSlice slice = phase_slice(args.metadata, phase);
  const int64_t q_row_elems = static_cast<int64_t>(config.num_q_heads) * config.head_dim_qk;

  const AttentionParams params = phase_params(args, phase);  // checks q_fp8 is there
  if (is_fp8(decision.q_dtype) && !args.q_fp8_ready && slice.num_rows > 0) {
    const auto* q_rows = static_cast<const uint16_t*>(args.q) + slice.first_row * q_row_elems;
    uint8_t* q_fp8_rows = args.q_fp8 + slice.first_row * q_row_elems;
    const int64_t count = slice.num_rows * q_row_elems;
    if (device) {
      quantize_query_device(q_rows, config.model_dtype, q_fp8_rows, decision.q_dtype, count,
                            scales_.q_scale(), stream);
    } else {
      quantize_query_host(q_rows, config.model_dtype, q_fp8_rows, decision.q_dtype, count,
                          scales_.q_scale());
    }
  }
  decision.kernel->run(params, KernelWorkspace{args.workspace, args.workspace_bytes}, stream);
}

AttentionParams AttentionOp::phase_params(const AttentionOpArgs& args, AttentionPhase phase) const {
  const AttentionConfig& config = selection_.config();
  const AttentionPhaseDecision& decision = selection_.at(phase);
  const AttentionMetadataView& m = args.metadata;
  const bool prefill = phase == AttentionPhase::kPrefill;
  const bool device = decision.kernel->memory_space() == MemorySpace::kDevice;

  const auto [first_seq, first_row, num_rows] = phase_slice(m, phase);
  const int64_t q_row_elems = static_cast<int64_t>(config.num_q_heads) * config.head_dim_qk;

  AttentionParams p;
  p.q_dtype = decision.q_dtype;
  if (is_fp8(decision.q_dtype)) {
    QUENCH_REQUIRE(args.q_fp8 != nullptr || num_rows == 0, "the ", attention_phase_name(phase),
                   " kernel '", decision.kernel->name(), "' takes an FP8 query: q_fp8 is needed");
    p.q = args.q_fp8 == nullptr ? nullptr : args.q_fp8 + first_row * q_row_elems;
    p.q_scale = scales_.q_scale();
  } else {
    QUENCH_REQUIRE(decision.q_dtype == config.model_dtype, "the ", attention_phase_name(phase),
                   " kernel '", decision.kernel->name(), "' asked for a ",
                   dtype_name(decision.q_dtype), " query; the op has ",
                   dtype_name(config.model_dtype), " or FP8");
    p.q = advance_bytes(args.q, first_row * row_bytes(config.model_dtype, q_row_elems));
  }

  p.k_cache = args.k_cache;
  p.v_cache = args.v_cache;
  p.kv = args.kv;
  if (config.kv_dtype != DType::kBF16) {
    p.k_scale = scales_.k_scale();
    p.v_scale = scales_.v_scale();
    if (device && p.k_scale.per_head) p.k_scale.per_head = settings_.device_k_scale_per_head;
    if (device && p.v_scale.per_head) p.v_scale.per_head = settings_.device_v_scale_per_head;
  }

  p.num_q_heads = config.num_q_heads;
  p.num_seqs = prefill ? m.num_prefill_seqs : m.num_decode_seqs;
  p.num_tokens = num_rows;
  p.q_offsets = prefill ? m.prefill_q_offsets : m.q_offsets;
  p.seq_lens = m.seq_lens + first_seq;
  p.block_table = m.block_table + static_cast<int64_t>(first_seq) * m.max_pages;
  p.block_table_stride = m.max_pages;
  p.max_q_len = prefill ? m.max_prefill_q_len : m.max_decode_q_len;
  p.max_seq_len = prefill ? m.max_prefill_seq_len : m.max_decode_seq_len;

  p.sm_scale = settings_.sm_scale;
  p.window_left = config.sliding_window > 0 ? config.sliding_window - 1 : -1;
  p.logit_soft_cap = config.logit_soft_cap;
  p.sinks = settings_.sinks;

  const int64_t out_row_elems = static_cast<int64_t>(config.num_q_heads) * config.head_dim_vo;
  p.out = args.out == nullptr
              ? nullptr
              : advance_bytes(args.out, first_row * row_bytes(config.out_dtype, out_row_elems));
  if (!prefill) p.out_fp8 = args.out_fp8;  // run() allows it in decode-only batches
  p.out_dtype = config.out_dtype;
  p.o_scale = scales_.o_scale();
  p.out_block_scales = args.out_block_scales;
  p.out_scale_rows = args.out_scale_rows;
  p.out_scale_row_offset = args.out_scale_row_offset + first_row;
  p.nvfp4_global_scale = args.nvfp4_global_scale;
  p.lse = args.lse == nullptr ? nullptr
                              : args.lse + static_cast<int64_t>(first_row) * config.num_q_heads;

  return p;
}

}  // namespace quench
