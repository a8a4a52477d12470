// What `quench layer` runs: the attention path of one decoder layer (RoPE + quantize + paged KV
// append, then attention) on a built-in workload. Defaults are Llama-3-8B's attention with an
// FP8 (e4m3) KV cache and a small mixed step, sized so the CPU backend finishes in seconds.
#pragma once

#include <cstdint>

#include "quench/attention/attention_kernel_override.h"
#include "quench/core/dtype.h"
#include "quench/core/flag_parsing.h"
#include "quench/kv_cache/kv_cache_layout.h"
#include "quench/ops/rope/rope_config.h"
#include "quench/ops/rope_quant_append/rope_append_path.h"

namespace quench {

// kAuto: the GPU when the CUDA runtime reports one, else the CPU.
enum class LayerDevice : uint8_t { kCpu, kGpu, kAuto };

// Upper bounds of the workload flags. They keep every sequence within Llama-3.1's 131072
// positions (a decode sequence caches up to 1.5 x context tokens, a prefill chunk follows up to
// context / 2) and the step's token and page counts far inside int32.
inline constexpr int32_t kMaxLayerDemoTokens = 65536;  // --context, --chunk
inline constexpr int32_t kMaxLayerDemoSeqs = 1024;     // --decode-seqs, --prefill-seqs

struct LayerDemoOptions {
  int32_t num_q_heads = 32;
  int32_t num_kv_heads = 8;
  int32_t head_dim = 128;
  DType kv_dtype = DType::kFP8E4M3;
  int32_t page_size = 16;
  KvLayout layout = KvLayout::kNHD;
  int32_t decode_seqs = 4;   // decode steps, each with a cached context of about `context`
  int32_t prefill_seqs = 2;  // prefill chunks: even ones fresh, odd ones after context/2 cached
  int32_t context = 384;     // cached tokens of the first decode sequence (the others a bit more)
  int32_t chunk = 64;        // new tokens of each prefill chunk
  uint64_t seed = 1;
  LayerDevice device = LayerDevice::kAuto;
  AttentionKernelOverride prefill_override;
  AttentionKernelOverride decode_override;
  RopeAppendPath fusion = RopeAppendPath::kFused;  // GPU only
  bool help = false;
};

// Llama-3's RoPE (neox, theta 500000, llama3 scaling factor 8, low 1, high 4, original 8192)
// over the whole head.
RopeConfig llama3_rope_config(int32_t head_dim);

// Parses `quench layer` flags (argv[0] is "layer"). Throws UsageError (quench/core/flag_parsing.h)
// naming the bad flag or value and the allowed values.
LayerDemoOptions parse_layer_demo_flags(int argc, char** argv);

const char* layer_demo_usage();

}  // namespace quench
