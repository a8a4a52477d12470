#include "explain_command.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include "quench/attention/attention_decision_table.h"
#include "quench/attention/attention_kernel_selection.h"
#include "quench/attention/hf_attention_config.h"
#include "quench/core/error.h"
#include "quench/core/flag_parsing.h"
#include "quench/core/log.h"

namespace quench::cli {
namespace {

const FlagTable& known_flags() {
  static const FlagTable flags = {
      {"--model-config", true},   {"--num-q-heads", true},    {"--num-kv-heads", true},
      {"--head-dim", true},       {"--kv-cache-dtype", true}, {"--page-size", true},
      {"--layout", true},         {"--sliding-window", true}, {"--softcap", true},
      {"--sinks", false},         {"--out-dtype", true},      {"--gpu-arch", true},
      {"--prefill-kernel", true}, {"--decode-kernel", true},  {"--no-q-quant", false},
      {"--help", false}};
  return flags;
}

// from_chars, not stof: stof also takes leading spaces, hex ("0x10") and "inf".
float parse_non_negative(const std::string& flag, const std::string& text) {
  float value = -1.0f;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value) ||
      value < 0.0f) {
    throw UsageError(str_cat(flag, " '", text, "' must be a finite number >= 0 (0 = none)"));
  }
  return value;
}

DType parse_kv_cache_dtype(const std::string& text, DType model_dtype) {
  require_allowed_flag_value("--kv-cache-dtype", text,
                             {"auto", "bf16", "fp8", "fp8_e4m3", "fp8_e5m2"});
  return text == "auto" ? model_dtype : parse_dtype(text);
}

DType parse_out_dtype(const std::string& text) {
  require_allowed_flag_value("--out-dtype", text, {"bf16", "fp8", "fp8_e4m3", "fp8_e5m2", "nvfp4"});
  return parse_dtype(text);
}

AttentionConfig config_from_flags(const std::map<std::string, std::string>& flags) {
  auto get = [&](const char* name) -> const std::string* {
    const auto it = flags.find(name);
    return it == flags.end() ? nullptr : &it->second;
  };
  AttentionConfig config;
  if (const auto* path = get("--model-config")) {
    apply_hf_attention_fields(
        parse_flag_value("--model-config", [&] { return read_hf_attention_fields(*path); }),
        config);
  } else if (!get("--num-q-heads") || !get("--head-dim")) {
    throw UsageError(
        str_cat("give --model-config, or --num-q-heads and --head-dim. ", explain_usage()));
  }
  if (const auto* v = get("--num-q-heads")) {
    config.num_q_heads = parse_int_flag("--num-q-heads", *v, 1);
    if (!get("--model-config")) config.num_kv_heads = config.num_q_heads;
  }
  if (const auto* v = get("--num-kv-heads"))
    config.num_kv_heads = parse_int_flag("--num-kv-heads", *v, 1);
  if (const auto* v = get("--head-dim")) {
    config.head_dim_qk = config.head_dim_vo = parse_int_flag("--head-dim", *v, 1);
  }
  if (const auto* v = get("--sliding-window")) {
    config.sliding_window = parse_int_flag("--sliding-window", *v, 0);
  }
  if (const auto* v = get("--softcap")) config.logit_soft_cap = parse_non_negative("--softcap", *v);
  config.has_sinks = get("--sinks") != nullptr;
  config.allow_fp8_query = get("--no-q-quant") == nullptr;
  config.kv_dtype = parse_kv_cache_dtype(
      get("--kv-cache-dtype") ? *get("--kv-cache-dtype") : "auto", config.model_dtype);
  config.out_dtype = get("--out-dtype") ? parse_out_dtype(*get("--out-dtype")) : config.model_dtype;
  if (const auto* v = get("--page-size")) {
    config.page_size = parse_int_flag("--page-size", *v, 1);
    require_allowed_flag_value("--page-size", *v, config.page_size, {16, 32, 64});
  }
  if (const auto* v = get("--layout")) {
    config.layout = parse_flag_value("--layout", [&] { return parse_kv_layout(*v); });
  }
  const std::string arch = get("--gpu-arch") ? *get("--gpu-arch") : "sm_90";
  config.compute_capability = parse_flag_value("--gpu-arch", [&] { return parse_gpu_arch(arch); });
  return config;
}

}  // namespace

const char* explain_usage() {
  return "usage: quench explain (--model-config config.json | --num-q-heads N --head-dim D)\n"
         "  [--num-kv-heads N] [--kv-cache-dtype auto|bf16|fp8|fp8_e4m3|fp8_e5m2]\n"
         "  [--page-size 16|32|64] [--layout NHD|HND] [--sliding-window TOKENS] [--softcap X]\n"
         "  [--sinks] [--out-dtype bf16|fp8|fp8_e4m3|fp8_e5m2|nvfp4]\n"
         "  [--gpu-arch sm_90|sm_89|sm_80|cpu] (default sm_90)\n"
         "  [--prefill-kernel auto|NAME|!NAME] [--decode-kernel auto|NAME|!NAME] [--no-q-quant]\n"
         "Flags override the values read from config.json.\n";
}

int run_explain_command(int argc, char** argv) {
  AttentionConfig config;
  AttentionKernelOverride prefill_override;
  AttentionKernelOverride decode_override;
  try {
    const auto flags = split_flags(argc, argv, known_flags(), explain_usage());
    if (flags.count("--help")) {
      std::printf("%s", explain_usage());
      return 0;
    }
    config = config_from_flags(flags);
    const auto& registry = AttentionKernelRegistry::builtin();
    auto override_of = [&](const char* flag) {
      const auto it = flags.find(flag);
      if (it == flags.end()) return AttentionKernelOverride{};
      return parse_flag_value(flag,
                              [&] { return AttentionKernelOverride::parse(it->second, registry); });
    };
    prefill_override = override_of("--prefill-kernel");
    decode_override = override_of("--decode-kernel");
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  // The table repeats the selection's info lines; keep only its warnings on stderr.
  const LogSink previous = set_log_sink([](LogLevel level, const std::string& message) {
    if (level >= LogLevel::kWarning) {
      std::fprintf(stderr, "%s quench: %s\n", log_level_name(level), message.c_str());
    }
  });
  try {
    const auto selection =
        AttentionBackendSelection::decide(config, prefill_override, decode_override);
    set_log_sink(previous);
    std::printf("%s", format_attention_decision_table(selection).c_str());
  } catch (const Error& e) {
    set_log_sink(previous);
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace quench::cli
