// The decoder on the GPU: the same layers and the same rounding points as DecoderModel (every
// tensor between ops is bf16), run by device kernels on one stream:
//   embedding_lookup -> per layer [rms_norm (+ residual add) -> fused QKV GEMM (cuBLAS) ->
//   fused RoPE + quantize + paged KV append (q/k RMSNorm for Qwen3) -> attention op (kernels
//   chosen for this GPU) -> o GEMM -> rms_norm with the residual add -> fused gate/up GEMM ->
//   SwiGLU -> down GEMM] -> the last residual add and final norm -> the logit rows gathered ->
//   lm_head GEMM in fp32 (in passes of logit_rows_per_pass rows) -> argmax, draws or logits
//   copied to the host.
// Weights are uploaded once (q/k/v and gate/up concatenated so each is one GEMM); per-step
// buffers are sized for the engine's largest step at start. Decode steps of up to max_num_seqs
// sequences run as CUDA graphs captured at start for a ladder of batch sizes (decode_graph_plan.h),
// unless options.enforce_eager; a capture that fails leaves decode eager, with a warning.
#pragma once

#include <functional>
#include <memory>

#include "quench/model/decoder_model.h"

namespace quench {

class DeviceDecoderModel : public ModelRunner {
 public:
  // On the current CUDA device. Throws quench::Error when there is none, when the attention
  // backend cannot serve the options on it, or when memory runs out.
  DeviceDecoderModel(const ModelConfig& config, const ModelWeights& weights,
                     const DecoderModelOptions& options);
  ~DeviceDecoderModel() override;

  std::vector<float> forward(std::span<const int32_t> token_ids, const AttentionMetadata& metadata,
                             std::span<const int32_t> logit_rows) override;
  int64_t kv_cache_bytes() const override;
  const AttentionBackendSelection& attention_selection() const override;
  const char* device_name() const override { return "gpu"; }
  int32_t vocab_size() const override;
  // Argmax rows (argmax_rows_cuda) and draws (sample_rows_cuda) are picked on the device; only
  // kLogits rows' logits are copied to the host.
  StepLogits forward_for_sampling(std::span<const int32_t> token_ids,
                                  const AttentionMetadata& metadata,
                                  std::span<const int32_t> logit_rows,
                                  std::span<const RowPick> picks,
                                  const std::function<void()>& fill_edits = {}) override;
  bool cuda_graphs_captured() const;  // decode steps run as graphs
  // How many times the decode graphs were captured: 1 after start, more when a step moved a
  // per-step buffer or the attention workspace (a stall of every size's capture).
  int32_t cuda_graph_captures() const;
  // Layers enqueued (eagerly or into a graph's capture) whose attention wrote the o projection's
  // FP8 input itself: decode steps over FP8 weights with 128-column activation scales at head_dim
  // 128 (AttentionOpArgs::out_fp8). For tests and diagnostics.
  int64_t attention_fp8_row_layers() const;

  // The lm_head's logits buffer holds this many rows: a step with more logit rows (prompt
  // logprobs ask for every prompt row) runs the lm_head and the picks in passes over it, so the
  // buffer does not grow to max_num_batched_tokens x vocab fp32 (4 GiB for a 128k vocabulary at
  // 8192 tokens). Every decode graph's rows fit one pass (at least max_num_seqs).
  static int32_t logit_rows_per_pass(int32_t max_num_seqs);

  // Device bytes of the weights the runner uploads (bf16; a tied lm_head once), and of its
  // per-step buffers at the largest step (max_tokens rows, each a logit row at most, for an
  // engine of max_num_seqs sequences) plus a reserve for the attention workspace, cuBLAS and
  // allocator slack: what --gpu-memory-utilization sets aside before the KV cache.
  static int64_t weight_bytes(const ModelWeights& weights);
  // Whether the runner computes with the checkpoint's FP8 weights as FP8 (ModelWeights::load's
  // keep_fp8) on a GPU of compute capability `sm` (e.g. 90): Hopper or newer (cuBLASLt's
  // per-channel and block FP8 scalings), then per-tensor and per-channel always, 128 x 128 blocks
  // where every linear input is a multiple of 512 and q/k/v are whole 128-row blocks. Otherwise
  // load them dequantized.
  static bool keeps_fp8_weights(const ModelConfig& config, int32_t sm);
  static int64_t step_bytes(const ModelConfig& config, int32_t max_tokens, int32_t max_num_seqs);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// True when a CUDA device is usable in this process (the engine's --device auto).
bool cuda_device_available();

}  // namespace quench
