#include "quench/engine/engine_flags.h"

#include <nlohmann/json.hpp>

#include <unistd.h>
#include <chrono>

#include "quench/attention/attention_kernel_registry.h"
#include "quench/model/tiny_model.h"

namespace quench {

const FlagTable& engine_flag_table() {
  static const FlagTable flags = {{"--model", true},
                                  {"--device", true},
                                  {"--kv-cache-dtype", true},
                                  {"--block-size", true},
                                  {"--max-model-len", true},
                                  {"--max-num-seqs", true},
                                  {"--max-num-batched-tokens", true},
                                  {"--num-kv-pages", true},
                                  {"--gpu-memory-utilization", true},
                                  {"--speculative-config", true},
                                  {"--seed", true},
                                  {"--prefill-kernel", true},
                                  {"--decode-kernel", true},
                                  {"--builtin", true},
                                  {"--no-enable-prefix-caching", false},
                                  {"--enforce-eager", false}};
  return flags;
}

FlagTable command_flag_table(std::initializer_list<const char*> with_value,
                             std::initializer_list<const char*> switches) {
  FlagTable f = engine_flag_table();
  for (const char* name : with_value)
    f[name] = true;
  for (const char* name : switches)
    f[name] = false;
  f["--help"] = false;
  return f;
}

const char* engine_flags_usage() {
  return "  [--model DIR] [--device auto|cpu|gpu] [--kv-cache-dtype "
         "auto|bf16|fp8|fp8_e4m3|fp8_e5m2]\n"
         "  [--block-size 16|32|64] [--max-model-len L] [--max-num-seqs N]\n"
         "  [--max-num-batched-tokens N] [--num-kv-pages N] [--gpu-memory-utilization F]\n"
         "  [--seed S]\n"
         "  [--prefill-kernel auto|NAME|!NAME] [--decode-kernel auto|NAME|!NAME]\n"
         "  [--no-enable-prefix-caching]   (prefix caching is on by default)\n"
         "  [--enforce-eager]   (GPU: no CUDA graphs for decode steps)\n"
         "  [--speculative-config JSON]   n-gram speculation of greedy requests, e.g.\n"
         "      '{\"method\": \"ngram\", \"num_speculative_tokens\": 4, \"prompt_lookup_max\": "
         "4}'\n"
         "  [--builtin tiny|llama3.2-1b|qwen2.5-0.5b|qwen3-0.6b|llama3-8b,\n"
         "             each also NAME-fp8 or NAME-fp8-block]\n"
         "Without --model, quench writes a built-in model with random weights to a temporary\n"
         "directory and loads it: tiny (2 layers, hidden 256, a 512-token BPE vocabulary; the\n"
         "default) or a real architecture's shape, for speed figures (token-id prompts only).\n"
         "--device auto runs on the GPU when one is usable, else on the CPU backend. On the GPU\n"
         "the KV cache takes what --gpu-memory-utilization (default 0.9) of the GPU's memory\n"
         "leaves after the weights and step buffers, unless --num-kv-pages is given.\n";
}

NgramSpeculation parse_speculative_config(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(str_cat("not JSON (", e.what(), ")"));
  }
  QUENCH_REQUIRE(j.is_object(), "must be a JSON object");
  NgramSpeculation spec;
  for (const auto& [key, value] : j.items()) {
    if (key == "method") {
      QUENCH_REQUIRE(value == "ngram", "method ", value.dump(),
                     " is not supported; allowed: ngram");
      continue;
    }
    int32_t* field = key == "num_speculative_tokens" ? &spec.num_speculative_tokens
                     : key == "prompt_lookup_max"    ? &spec.prompt_lookup_max
                     : key == "prompt_lookup_min"    ? &spec.prompt_lookup_min
                                                     : nullptr;
    QUENCH_REQUIRE(field != nullptr, "unknown field '", key,
                   "'; allowed: method, num_speculative_tokens, prompt_lookup_max, "
                   "prompt_lookup_min");
    QUENCH_REQUIRE(
        value.is_number_integer() && value.get<int64_t>() >= 0 && value.get<int64_t>() <= 1024, key,
        " must be an integer in [0, 1024], got ", value.dump());
    *field = static_cast<int32_t>(value.get<int64_t>());
  }
  QUENCH_REQUIRE(j.contains("method"), "'method' is required (allowed: ngram)");
  QUENCH_REQUIRE(spec.num_speculative_tokens >= 1, "num_speculative_tokens is required (1 to ",
                 kMaxSpeculativeTokens, ")");
  spec.validate();
  return spec;
}

std::optional<std::string> engine_options_from_flags(
    const std::map<std::string, std::string>& flags, EngineOptions& options) {
  auto get = [&](const char* name) -> const std::string* {
    const auto it = flags.find(name);
    return it == flags.end() ? nullptr : &it->second;
  };
  if (const auto* v = get("--device")) {
    require_allowed_flag_value("--device", *v, {"auto", "cpu", "gpu"});
    options.device = *v == "gpu"   ? EngineDevice::kGpu
                     : *v == "cpu" ? EngineDevice::kCpu
                                   : EngineDevice::kAuto;
  }
  if (const auto* v = get("--model")) options.model_dir = *v;
  if (const auto* v = get("--kv-cache-dtype")) {
    require_allowed_flag_value("--kv-cache-dtype", *v,
                               {"auto", "bf16", "fp8", "fp8_e4m3", "fp8_e5m2"});
    // auto = the activation dtype: the CPU backend runs bf16 activations.
    options.kv_cache_dtype = *v == "auto" ? DType::kBF16 : parse_dtype(*v);
  }
  if (const auto* v = get("--block-size")) {
    options.block_size = parse_int_flag<int32_t>("--block-size", *v, 1);
    require_allowed_flag_value("--block-size", *v, options.block_size, {16, 32, 64});
  }
  if (const auto* v = get("--max-model-len"))
    options.max_model_len = parse_int_flag<int32_t>("--max-model-len", *v, 2);
  if (const auto* v = get("--max-num-seqs"))
    options.max_num_seqs = parse_int_flag<int32_t>("--max-num-seqs", *v, 1);
  if (const auto* v = get("--max-num-batched-tokens")) {
    options.max_num_batched_tokens = parse_int_flag<int32_t>("--max-num-batched-tokens", *v, 1);
  }
  if (const auto* v = get("--num-kv-pages"))
    options.num_kv_pages = parse_int_flag<int32_t>("--num-kv-pages", *v, 2);
  if (const auto* v = get("--gpu-memory-utilization")) {
    options.gpu_memory_utilization = parse_number_flag("--gpu-memory-utilization", *v);
    if (!(options.gpu_memory_utilization > 0.0 && options.gpu_memory_utilization <= 1.0)) {
      throw UsageError(str_cat("--gpu-memory-utilization '", *v, "' must be in (0, 1]"));
    }
  }
  if (const auto* v = get("--seed")) options.seed = parse_int_flag<uint64_t>("--seed", *v, 0);
  const auto& registry = AttentionKernelRegistry::builtin();
  auto override_of = [&](const char* flag) {
    const auto* v = get(flag);
    if (v == nullptr) return AttentionKernelOverride{};
    return parse_flag_value(flag, [&] { return AttentionKernelOverride::parse(*v, registry); });
  };
  options.prefill_kernel = override_of("--prefill-kernel");
  options.decode_kernel = override_of("--decode-kernel");
  options.enable_prefix_caching = get("--no-enable-prefix-caching") == nullptr;
  options.enforce_eager = get("--enforce-eager") != nullptr;
  if (const auto* v = get("--speculative-config")) {
    options.speculation =
        parse_flag_value("--speculative-config", [&] { return parse_speculative_config(*v); });
  }
  if (get("--model") != nullptr) {
    if (get("--builtin") != nullptr)
      throw UsageError("--builtin and --model are alternatives; give one");
    return std::nullopt;
  }
  const std::string name = get("--builtin") ? *get("--builtin") : "tiny";
  parse_flag_value("--builtin", [&] { return builtin_model_spec(name); });
  return name;
}

BuiltinModelDir::BuiltinModelDir(const std::string& name)
    : dir_(std::filesystem::temp_directory_path() /
           str_cat("quench-tiny-model-", getpid(), "-",
                   std::chrono::steady_clock::now().time_since_epoch().count())) {
  write_tiny_model(dir_.string(), builtin_model_spec(name));
}

BuiltinModelDir::~BuiltinModelDir() {
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

}  // namespace quench
