#include "quench/layer/layer_demo_options.h"

#include <map>
#include <string>

namespace quench {
namespace {

const FlagTable& known_flags() {
  static const FlagTable flags = {
      {"--num-q-heads", true},    {"--num-kv-heads", true},  {"--head-dim", true},
      {"--kv-cache-dtype", true}, {"--page-size", true},     {"--layout", true},
      {"--decode-seqs", true},    {"--prefill-seqs", true},  {"--context", true},
      {"--chunk", true},          {"--seed", true},          {"--device", true},
      {"--prefill-kernel", true}, {"--decode-kernel", true}, {"--fusion", true},
      {"--help", false}};
  return flags;
}

DType parse_kv_cache_dtype(const std::string& text) {
  require_allowed_flag_value("--kv-cache-dtype", text, {"bf16", "fp8", "fp8_e4m3", "fp8_e5m2"});
  return parse_dtype(text);
}

LayerDevice parse_device(const std::string& text) {
  require_allowed_flag_value("--device", text, {"cpu", "gpu", "auto"});
  if (text == "cpu") return LayerDevice::kCpu;
  if (text == "gpu") return LayerDevice::kGpu;
  return LayerDevice::kAuto;
}

}  // namespace

RopeConfig llama3_rope_config(int32_t head_dim) {
  RopeConfig rope;
  rope.style = RopeStyle::kNeox;
  rope.rotary_dim = head_dim;
  rope.theta = 500000.0f;
  rope.llama3_factor = 8.0f;
  rope.llama3_low_freq_factor = 1.0f;
  rope.llama3_high_freq_factor = 4.0f;
  rope.llama3_original_max_position = 8192;
  return rope;
}

const char* layer_demo_usage() {
  return "usage: quench layer [--num-q-heads N] [--num-kv-heads N] [--head-dim 64|128|256]\n"
         "  [--kv-cache-dtype bf16|fp8|fp8_e4m3|fp8_e5m2] [--page-size 16|32|64] [--layout "
         "NHD|HND]\n"
         "  [--decode-seqs 0..1024] [--prefill-seqs 0..1024] [--context 1..65536]\n"
         "  [--chunk 1..65536] [--seed N]\n"
         "  [--device cpu|gpu|auto] [--prefill-kernel auto|NAME|!NAME]\n"
         "  [--decode-kernel auto|NAME|!NAME] [--fusion fused|unfused]\n"
         "Defaults: Llama-3-8B attention (32 q heads, 8 KV heads, head dim 128, RoPE theta 500000\n"
         "with llama3 scaling), fp8_e4m3 KV cache, page 16, NHD, 4 decode sequences of ~384 "
         "cached\n"
         "tokens and 2 prefill chunks of 64 tokens, device auto (GPU if one is present).\n";
}

LayerDemoOptions parse_layer_demo_flags(int argc, char** argv) {
  const auto flags = split_flags(argc, argv, known_flags(), layer_demo_usage());
  auto get = [&](const char* name) -> const std::string* {
    const auto it = flags.find(name);
    return it == flags.end() ? nullptr : &it->second;
  };
  LayerDemoOptions o;
  o.help = get("--help") != nullptr;
  if (const auto* v = get("--num-q-heads")) o.num_q_heads = parse_int_flag("--num-q-heads", *v, 1);
  if (const auto* v = get("--num-kv-heads"))
    o.num_kv_heads = parse_int_flag("--num-kv-heads", *v, 1);
  if (const auto* v = get("--head-dim")) {
    o.head_dim = parse_int_flag("--head-dim", *v, 1);
    require_allowed_flag_value("--head-dim", *v, o.head_dim, {64, 128, 256});
  }
  if (o.num_q_heads % o.num_kv_heads != 0) {
    throw UsageError(str_cat("--num-q-heads ", o.num_q_heads,
                             " must be a multiple of --num-kv-heads ", o.num_kv_heads));
  }
  if (const auto* v = get("--kv-cache-dtype")) o.kv_dtype = parse_kv_cache_dtype(*v);
  if (const auto* v = get("--page-size")) {
    o.page_size = parse_int_flag("--page-size", *v, 1);
    require_allowed_flag_value("--page-size", *v, o.page_size, {16, 32, 64});
  }
  if (const auto* v = get("--layout")) {
    o.layout = parse_flag_value("--layout", [&] { return parse_kv_layout(*v); });
  }
  if (const auto* v = get("--decode-seqs")) {
    o.decode_seqs = parse_int_flag("--decode-seqs", *v, 0, kMaxLayerDemoSeqs);
  }
  if (const auto* v = get("--prefill-seqs")) {
    o.prefill_seqs = parse_int_flag("--prefill-seqs", *v, 0, kMaxLayerDemoSeqs);
  }
  if (o.decode_seqs + o.prefill_seqs == 0) {
    throw UsageError("--decode-seqs and --prefill-seqs are both 0; the step needs a sequence");
  }
  if (const auto* v = get("--context")) {
    o.context = parse_int_flag("--context", *v, 1, kMaxLayerDemoTokens);
  }
  if (const auto* v = get("--chunk")) {
    o.chunk = parse_int_flag("--chunk", *v, 1, kMaxLayerDemoTokens);
  }
  if (const auto* v = get("--seed")) o.seed = parse_int_flag<uint64_t>("--seed", *v, 0);
  if (const auto* v = get("--device")) o.device = parse_device(*v);
  if (const auto* v = get("--fusion")) {
    o.fusion = parse_flag_value("--fusion", [&] { return parse_rope_append_path(*v); });
  }
  const auto& registry = AttentionKernelRegistry::builtin();
  if (const auto* v = get("--prefill-kernel")) {
    o.prefill_override = parse_flag_value(
        "--prefill-kernel", [&] { return AttentionKernelOverride::parse(*v, registry); });
  }
  if (const auto* v = get("--decode-kernel")) {
    o.decode_override = parse_flag_value(
        "--decode-kernel", [&] { return AttentionKernelOverride::parse(*v, registry); });
  }
  return o;
}

}  // namespace quench
