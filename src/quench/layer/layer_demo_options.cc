#include "quench/layer/layer_demo_options.h"

#include <charconv>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace quench {
namespace {

const std::map<std::string_view, bool>& known_flags() {
  // flag -> takes a value
  static const std::map<std::string_view, bool> flags = {
      {"--num-q-heads", true},    {"--num-kv-heads", true},  {"--head-dim", true},
      {"--kv-cache-dtype", true}, {"--page-size", true},     {"--layout", true},
      {"--decode-seqs", true},    {"--prefill-seqs", true},  {"--context", true},
      {"--chunk", true},          {"--seed", true},          {"--device", true},
      {"--prefill-kernel", true}, {"--decode-kernel", true}, {"--fusion", true},
      {"--help", false}};
  return flags;
}

std::map<std::string, std::string> split_flags(int argc, char** argv) {
  std::map<std::string, std::string> values;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::optional<std::string> value;
    if (const size_t eq = arg.find('='); eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg.resize(eq);
    }
    const auto flag = known_flags().find(arg);
    if (flag == known_flags().end()) {
      throw LayerUsageError(str_cat("unknown argument '", argv[i], "'. ", layer_demo_usage()));
    }
    if (flag->second && !value) {
      if (i + 1 >= argc)
        throw LayerUsageError(str_cat(arg, " needs a value. ", layer_demo_usage()));
      value = argv[++i];
    }
    if (!flag->second && value) throw LayerUsageError(str_cat(arg, " takes no value"));
    values[arg] = value.value_or("");
  }
  return values;
}

template <typename Int>
Int parse_int(const std::string& flag, const std::string& text, Int min_value) {
  Int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < min_value) {
    throw LayerUsageError(str_cat(flag, " '", text, "' must be an integer >= ", min_value));
  }
  return value;
}

// Runs a quench parser on a flag's value, turning its error into a usage error.
template <typename Parse>
auto parse_with(const std::string& flag, const Parse& parse) {
  try {
    return parse();
  } catch (const LayerUsageError&) {
    throw;
  } catch (const Error& e) {
    throw LayerUsageError(str_cat(flag, ": ", e.what()));
  }
}

DType parse_kv_cache_dtype(const std::string& text) {
  if (text == "bf16" || text == "fp8" || text == "fp8_e4m3" || text == "fp8_e5m2") {
    return parse_dtype(text);
  }
  throw LayerUsageError(str_cat("--kv-cache-dtype '", text,
                                "' is not supported; allowed: bf16, fp8, fp8_e4m3, fp8_e5m2"));
}

LayerDevice parse_device(const std::string& text) {
  if (text == "cpu") return LayerDevice::kCpu;
  if (text == "gpu") return LayerDevice::kGpu;
  if (text == "auto") return LayerDevice::kAuto;
  throw LayerUsageError(str_cat("--device '", text, "' is not supported; allowed: cpu, gpu, auto"));
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
         "  [--decode-seqs N] [--prefill-seqs N] [--context TOKENS] [--chunk TOKENS] [--seed N]\n"
         "  [--device cpu|gpu|auto] [--prefill-kernel auto|NAME|!NAME]\n"
         "  [--decode-kernel auto|NAME|!NAME] [--fusion fused|unfused]\n"
         "Defaults: Llama-3-8B attention (32 q heads, 8 KV heads, head dim 128, RoPE theta 500000\n"
         "with llama3 scaling), fp8_e4m3 KV cache, page 16, NHD, 4 decode sequences of ~384 "
         "cached\n"
         "tokens and 2 prefill chunks of 64 tokens, device auto (GPU if one is present).\n";
}

LayerDemoOptions parse_layer_demo_flags(int argc, char** argv) {
  const auto flags = split_flags(argc, argv);
  auto get = [&](const char* name) -> const std::string* {
    const auto it = flags.find(name);
    return it == flags.end() ? nullptr : &it->second;
  };
  LayerDemoOptions o;
  o.help = get("--help") != nullptr;
  if (const auto* v = get("--num-q-heads")) o.num_q_heads = parse_int("--num-q-heads", *v, 1);
  if (const auto* v = get("--num-kv-heads")) o.num_kv_heads = parse_int("--num-kv-heads", *v, 1);
  if (const auto* v = get("--head-dim")) {
    o.head_dim = parse_int("--head-dim", *v, 1);
    if (o.head_dim != 64 && o.head_dim != 128 && o.head_dim != 256) {
      throw LayerUsageError(
          str_cat("--head-dim '", *v, "' is not supported; allowed: 64, 128, 256"));
    }
  }
  if (o.num_q_heads % o.num_kv_heads != 0) {
    throw LayerUsageError(str_cat("--num-q-heads ", o.num_q_heads,
                                  " must be a multiple of --num-kv-heads ", o.num_kv_heads));
  }
  if (const auto* v = get("--kv-cache-dtype")) o.kv_dtype = parse_kv_cache_dtype(*v);
  if (const auto* v = get("--page-size")) {
    o.page_size = parse_int("--page-size", *v, 1);
    if (o.page_size != 16 && o.page_size != 32 && o.page_size != 64) {
      throw LayerUsageError(
          str_cat("--page-size '", *v, "' is not supported; allowed: 16, 32, 64"));
    }
  }
  if (const auto* v = get("--layout")) {
    o.layout = parse_with("--layout", [&] { return parse_kv_layout(*v); });
  }
  if (const auto* v = get("--decode-seqs")) o.decode_seqs = parse_int("--decode-seqs", *v, 0);
  if (const auto* v = get("--prefill-seqs")) o.prefill_seqs = parse_int("--prefill-seqs", *v, 0);
  if (o.decode_seqs + o.prefill_seqs == 0) {
    throw LayerUsageError("--decode-seqs and --prefill-seqs are both 0; the step needs a sequence");
  }
  if (const auto* v = get("--context")) o.context = parse_int("--context", *v, 1);
  if (const auto* v = get("--chunk")) o.chunk = parse_int("--chunk", *v, 1);
  if (const auto* v = get("--seed")) o.seed = parse_int<uint64_t>("--seed", *v, 0);
  if (const auto* v = get("--device")) o.device = parse_device(*v);
  if (const auto* v = get("--fusion")) {
    o.fusion = parse_with("--fusion", [&] { return parse_rope_append_path(*v); });
  }
  const auto& registry = AttentionKernelRegistry::builtin();
  if (const auto* v = get("--prefill-kernel")) {
    o.prefill_override = parse_with("--prefill-kernel",
                                    [&] { return AttentionKernelOverride::parse(*v, registry); });
  }
  if (const auto* v = get("--decode-kernel")) {
    o.decode_override =
        parse_with("--decode-kernel", [&] { return AttentionKernelOverride::parse(*v, registry); });
  }
  return o;
}

}  // namespace quench
