// A Llama/Qwen3 decoder run on the CPU backend: embeddings, then per layer
//   h = RMSNorm(x); q,k,v = h Wq/Wk/Wv; [q/k RMSNorm]; RoPE + quantize + paged KV append;
//   attention (the attention op, kernels chosen per phase); x += attn Wo;
//   h = RMSNorm(x); x += (silu(h Wgate) * h Wup) Wdown
// then the final RMSNorm and lm_head on the rows whose logits are asked for.
// Every op is its CPU reference (fp32 math) but the linear layers, which take linear_cpu (the
// reference's fp32 sums in another order, fast enough to serve a 1B model on two cores); every
// tensor between ops is rounded to bf16, the activation dtype the GPU path will keep, the
// residual stream included (as HF runs in bf16).
// The model owns one paged K and V cache per layer (layout, dtype and page count from the
// options); which pages a sequence uses is the caller's business (AttentionMetadata).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "quench/attention/attention_kernel_override.h"
#include "quench/attention/attention_metadata.h"
#include "quench/attention/attention_op.h"
#include "quench/model/model_runner.h"
#include "quench/model/model_weights.h"

namespace quench {

struct DecoderModelOptions {
  DType kv_dtype = DType::kFP8E4M3;  // bf16, fp8_e4m3 or fp8_e5m2
  int32_t page_size = 16;
  KvLayout layout = KvLayout::kNHD;
  int32_t num_pages = 0;      // including the null page 0
  int32_t max_model_len = 0;  // positions must stay below it (the cos/sin cache's rows)
  AttentionKernelOverride prefill_kernel;
  AttentionKernelOverride decode_kernel;
  // The GPU runner's step limits (the CPU runner ignores them): its per-step buffers are sized for
  // steps of max_num_batched_tokens rows and max_num_seqs sequences at start, and decode steps of
  // up to max_num_seqs sequences run as CUDA graphs captured then, unless enforce_eager. 0 = no
  // sizing at start and no graphs.
  int32_t max_num_seqs = 0;
  int32_t max_num_batched_tokens = 0;
  bool enforce_eager = false;
};

// The attention ops of a model for a backend (compute capability 0 = the CPU), one per layer: the
// model's heads, the options' cache format, bf16 activations and output, kernels chosen per phase
// (with the options' overrides, decided once), and each layer's checkpoint k/v/q scales for an
// FP8 cache (1.0 where the checkpoint has none, with one warning; a bf16 cache stores values
// unscaled and takes none).
std::vector<AttentionOp> model_attention_ops(const ModelConfig& config, const ModelWeights& weights,
                                             const DecoderModelOptions& options,
                                             int32_t compute_capability);

// What model_attention_ops builds the ops from: the kernels, the settings every layer shares, and
// each layer's scales. A device runner whose layers have per-head k/v scales uploads them and
// builds its ops with their device arrays in the settings.
struct ModelAttentionPlan {
  AttentionBackendSelection selection;
  AttentionLayerSettings settings;
  std::vector<AttentionScales> scales;  // per layer
};
ModelAttentionPlan model_attention_plan(const ModelConfig& config, const ModelWeights& weights,
                                        const DecoderModelOptions& options,
                                        int32_t compute_capability);

class DecoderModel : public ModelRunner {
 public:
  // The weights must outlive the model. Throws quench::Error for options the attention backend
  // cannot serve on the CPU (naming the reason) or sizes out of range.
  DecoderModel(const ModelConfig& config, const ModelWeights& weights,
               const DecoderModelOptions& options);

  const ModelConfig& config() const { return config_; }
  const DecoderModelOptions& options() const { return options_; }
  const AttentionBackendSelection& attention_selection() const override {
    return attention_.front().selection();
  }
  const char* device_name() const override { return "cpu"; }
  int32_t vocab_size() const override { return config_.vocab_size; }
  // K and V of every layer, in bytes.
  int64_t kv_cache_bytes() const override;

  // One step over the rows the metadata describes (decode rows first, then prefill rows; see
  // attention_metadata.h): token_ids[r] is row r's token, at metadata.positions[r], stored into
  // metadata.slot_mapping[r]. Returns fp32 logits [logit_rows.size(), vocab_size], row i for
  // query row logit_rows[i]. Throws when sizes disagree or a position is >= max_model_len.
  std::vector<float> forward(std::span<const int32_t> token_ids, const AttentionMetadata& metadata,
                             std::span<const int32_t> logit_rows) override;

 private:
  ModelConfig config_;
  const ModelWeights& weights_;
  DecoderModelOptions options_;
  KvCacheLayout kv_;
  std::vector<AttentionOp> attention_;          // per layer (their scales differ)
  std::vector<float> cos_sin_cache_;            // [max_model_len, head_dim]
  std::vector<std::vector<uint8_t>> k_caches_;  // [layer] kv_.tensor_bytes()
  std::vector<std::vector<uint8_t>> v_caches_;
};

}  // namespace quench
