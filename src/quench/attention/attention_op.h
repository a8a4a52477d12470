// The attention op of one layer: runs a mixed batch (decode rows first, then prefill rows) with
// the kernels chosen at initialisation, quantizing the query only for the phase whose kernel
// takes an FP8 query (SPEC §1: FP8 KV on sm_90 gives prefill an FP8 query, decode a bf16 one).
//
// Scales (SPEC §1.2, attention_scales.h): q_scale divides here, when the query is quantized, and
// multiplies in the kernel; a bf16/f16 query never gets a q_scale. k/v scales and 1/o_scale are
// passed to the kernels, which apply them (a bf16 cache gets unit k/v scales: it stores values
// unscaled).
//
// Buffers are host memory when the chosen kernels are host kernels (the CPU reference) and
// device memory when they are GPU kernels; both phases' kernels must agree. No CUDA type appears
// here: a stream is a cudaStream_t passed as void*.
#pragma once

#include <cstdint>

#include "quench/attention/attention_kernel_selection.h"
#include "quench/attention/attention_metadata.h"
#include "quench/attention/attention_scales.h"

namespace quench {

// AttentionMetadata as the kernels read it: arrays in the kernels' memory space.
struct AttentionMetadataView {
  int32_t num_decode_seqs = 0;
  int32_t num_decode_tokens = 0;
  int32_t num_prefill_seqs = 0;
  int32_t num_prefill_tokens = 0;
  int32_t max_decode_q_len = 0;
  int32_t max_decode_seq_len = 0;
  int32_t max_prefill_q_len = 0;
  int32_t max_prefill_seq_len = 0;
  int32_t max_pages = 0;                       // block_table row stride
  const int32_t* q_offsets = nullptr;          // [num_seqs + 1]
  const int32_t* prefill_q_offsets = nullptr;  // [num_prefill_seqs + 1], rebased to 0
  const int32_t* seq_lens = nullptr;           // [num_seqs]
  const int32_t* block_table = nullptr;        // [num_seqs, max_pages]
};

// A view of host metadata (pointers into `metadata`, valid while it lives and is unchanged).
AttentionMetadataView host_metadata_view(const AttentionMetadata& metadata);

// Per-layer constants besides the scales.
struct AttentionLayerSettings {
  float sm_scale = 0.0f;         // multiplies q·k; typically 1/sqrt(head_dim)
  const float* sinks = nullptr;  // [num_q_heads] sink logits in kernel memory; required iff
                                 // config.has_sinks
  // Per-KV-head k/v scales in kernel memory, for device kernels when the checkpoint has per-head
  // scales ([num_kv_heads] floats, a copy of AttentionScales::k_values()/v_values()). Host
  // kernels read the AttentionScales' own host arrays and ignore these.
  const float* device_k_scale_per_head = nullptr;
  const float* device_v_scale_per_head = nullptr;
};

struct AttentionOpArgs {
  // Query in the model dtype (bf16 or f16): [num_tokens, num_q_heads, head_dim], row-major.
  const void* q = nullptr;
  // FP8 query buffer, [num_tokens, num_q_heads, head_dim] bytes, row r at r * Hq * D: the rows of
  // a phase whose kernel takes an FP8 query are written (and read) here at their own rows.
  // Needed only when such a phase has rows.
  uint8_t* q_fp8 = nullptr;
  // True when those FP8 rows were already written upstream (the fused RoPE + quantize kernel,
  // with the same q_scale): the op then does not quantize.
  bool q_fp8_ready = false;

  const void* k_cache = nullptr;  // kv_cache_layout.h, dtype config.kv_dtype
  const void* v_cache = nullptr;
  KvCacheLayout kv;

  AttentionMetadataView metadata;

  // Output: [num_tokens, num_q_heads, head_dim] in config.out_dtype, or for nvfp4 packed bytes
  // [num_tokens, num_q_heads * head_dim / 2] plus the shared swizzled block-scale tensor, of
  // which this batch's row r writes scale row out_scale_row_offset + r.
  void* out = nullptr;
  uint8_t* out_block_scales = nullptr;
  int32_t out_scale_rows = 0;
  int32_t out_scale_row_offset = 0;
  float nvfp4_global_scale = 1.0f;  // multiplies before NVFP4 quantization

  float* lse = nullptr;  // optional [num_tokens, num_q_heads]
  // Optional, for a batch of decode rows only (config.out_dtype bf16, and writes_fp8_rows()):
  // the output also as the o projection's e4m3 rows (AttentionParams::out_fp8), so that it needs
  // no quantization pass; out may then be null.
  Fp8RowsOut out_fp8;

  // Scratch for the kernels (split-KV partials), in their memory space: at least
  // AttentionOp::workspace_bytes(args) bytes, allocated once before graph capture and zeroed
  // then (decode keeps split-merge counters there that every run returns to zero).
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

class AttentionOp {
 public:
  // Throws quench::Error when the two phases' kernels use different memory spaces, sinks are
  // missing (or given without config.has_sinks), or sm_scale is not finite and > 0.
  AttentionOp(AttentionBackendSelection selection, AttentionScales scales,
              AttentionLayerSettings settings);

  const AttentionBackendSelection& selection() const { return selection_; }
  const AttentionScales& scales() const { return scales_; }
  MemorySpace memory_space() const { return selection_.decode().kernel->memory_space(); }

  // Runs the decode rows with the decode kernel, then the prefill rows with the prefill kernel.
  // Rows beyond num_decode_tokens + num_prefill_tokens (graph padding) are neither read nor
  // written. Throws when args disagree with the configuration (KV layout, missing buffers).
  void run(const AttentionOpArgs& args, void* stream) const;

  // Whether run() takes AttentionOpArgs::out_fp8: bf16 output and a decode kernel that writes it.
  bool writes_fp8_rows() const;
  // Scratch run(args) needs: the larger of the two phases' kernels' needs.
  size_t workspace_bytes(const AttentionOpArgs& args) const;

 private:
  void run_phase(const AttentionOpArgs& args, AttentionPhase phase, void* stream) const;
  // The kernel parameters of one phase's slice of the batch (no side effects).
  AttentionParams phase_params(const AttentionOpArgs& args, AttentionPhase phase) const;

  AttentionBackendSelection selection_;
  AttentionScales scales_;
  AttentionLayerSettings settings_;
};

}  // namespace quench
