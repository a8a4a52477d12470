#include "quench/engine/generate_command.h"

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "quench/attention/attention_decision_table.h"
#include "quench/core/error.h"
#include "quench/core/flag_parsing.h"
#include "quench/core/log.h"
#include "quench/engine/engine_flags.h"
#include "quench/engine/llm_engine.h"
#include "quench/model/tiny_model.h"
#include "quench/tokenizer/tokenizer.h"

namespace quench {
namespace {

// printf-style formatting into a string (the report's columns).
[[gnu::format(printf, 1, 2)]] std::string fmt(const char* format, ...) {
  va_list args;
  va_start(args, format);
  char buffer[1024];
  std::vsnprintf(buffer, sizeof buffer, format, args);
  va_end(args);
  return buffer;
}

// Warnings (no k/v scale in the checkpoint, an override not honoured) go to err; info lines
// stay off the output, which prints the kernel table itself.
class WarningsTo {
 public:
  explicit WarningsTo(std::ostream& err)
      : previous_(set_log_sink([&err](LogLevel level, const std::string& message) {
          if (level >= LogLevel::kWarning)
            err << log_level_name(level) << " quench: " << message << "\n";
        })) {}
  WarningsTo(const WarningsTo&) = delete;
  WarningsTo& operator=(const WarningsTo&) = delete;
  ~WarningsTo() { set_log_sink(previous_); }

 private:
  LogSink previous_;
};

const char* generate_usage() {
  static const std::string usage =
      std::string(
          "usage: quench generate [--prompt TEXT | --prompt-ids 1,2,3[;4,5,...]]\n"
          "  [--num-prompts N] [--input-len L]   (random prompts when no prompt is given)\n"
          "  [--max-tokens N] [--temperature T] [--top-k K] [--top-p P] [--ignore-eos]\n"
          "  [--no-compare]   (with an FP8 cache the requests also run over a bf16 cache and the\n"
          "                    outputs are compared; this skips that)\n") +
      engine_flags_usage();
  return usage.c_str();
}

const FlagTable& known_flags() {
  static const FlagTable flags =
      command_flag_table({"--prompt-ids", "--prompt", "--num-prompts", "--input-len",
                          "--max-tokens", "--temperature", "--top-k", "--top-p"},
                         {"--ignore-eos", "--no-compare"});
  return flags;
}

// "1,2,3;4,5" -> {{1,2,3},{4,5}}.
std::vector<std::vector<int32_t>> parse_prompt_ids(const std::string& text) {
  std::vector<std::vector<int32_t>> prompts(1);
  std::string number;
  auto flush = [&] {
    if (number.empty()) throw UsageError(str_cat("--prompt-ids '", text, "': an empty token id"));
    prompts.back().push_back(parse_int_flag<int32_t>("--prompt-ids", number, 0));
    number.clear();
  };
  for (char ch : text) {
    if (ch == ',') {
      flush();
    } else if (ch == ';') {
      flush();
      prompts.emplace_back();
    } else {
      number += ch;
    }
  }
  flush();
  return prompts;
}

std::string join_ids(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) s += ' ';
    s += std::to_string(ids[i]);
  }
  return s;
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

const char* generate_command_usage() {
  return generate_usage();
}

int run_generate_command(int argc, char** argv, std::ostream& out, std::ostream& err) {
  EngineOptions options;
  SamplingParams sampling;
  std::vector<std::vector<int32_t>> prompts;
  int32_t num_prompts = 4, input_len = 24;
  std::optional<std::string> builtin;
  bool compare_kv = true;
  std::map<std::string, std::string> flags;
  try {
    flags = split_flags(argc, argv, known_flags(), generate_usage());
    if (flags.count("--help")) {
      out << generate_usage();
      return 0;
    }
    auto get = [&](const char* name) -> const std::string* {
      const auto it = flags.find(name);
      return it == flags.end() ? nullptr : &it->second;
    };
    builtin = engine_options_from_flags(flags, options);
    compare_kv = flags.count("--no-compare") == 0;
    if (const auto* v = get("--prompt-ids")) prompts = parse_prompt_ids(*v);
    if (get("--prompt") != nullptr && get("--prompt-ids") != nullptr) {
      throw UsageError("--prompt and --prompt-ids are alternatives; give one");
    }
    if (const auto* v = get("--num-prompts"))
      num_prompts = parse_int_flag<int32_t>("--num-prompts", *v, 1);
    if (const auto* v = get("--input-len"))
      input_len = parse_int_flag<int32_t>("--input-len", *v, 1);
    if (const auto* v = get("--max-tokens"))
      sampling.max_tokens = parse_int_flag<int32_t>("--max-tokens", *v, 1);
    if (const auto* v = get("--temperature"))
      sampling.temperature = static_cast<float>(parse_number_flag("--temperature", *v));
    if (const auto* v = get("--top-k")) sampling.top_k = parse_int_flag<int32_t>("--top-k", *v, 0);
    if (const auto* v = get("--top-p"))
      sampling.top_p = static_cast<float>(parse_number_flag("--top-p", *v));
    sampling.ignore_eos = get("--ignore-eos") != nullptr;
    parse_flag_value("--temperature/--top-k/--top-p", [&] {
      sampling.validate();
      return 0;
    });
  } catch (const Error& e) {
    err << "error: " << e.what() << "\n";
    return 2;
  }
  const WarningsTo warnings(err);
  try {
    std::unique_ptr<BuiltinModelDir> builtin_dir;
    if (builtin) {
      builtin_dir = std::make_unique<BuiltinModelDir>(*builtin);
      options.model_dir = builtin_dir->path();
    }

    const auto load_start = std::chrono::steady_clock::now();
    auto engine = std::make_unique<LlmEngine>(options);
    const double load_ms = ms_since(load_start);
    const ModelConfig& c = engine->config();
    const SchedulerConfig& sc = engine->scheduler_config();
    const std::string source =
        builtin ? str_cat("the built-in ", *builtin, " model (random weights)") : options.model_dir;
    out << fmt("quench generate: %s on %s\n", source.c_str(), engine->model().device_name());
    out << fmt("model      %s, %d layers, hidden %d, %d/%d heads x %d, vocab %d, %.1f M params\n",
               model_architecture_name(c.architecture), c.num_layers, c.hidden_size,
               c.num_q_heads(), c.num_kv_heads(), c.head_dim(), c.vocab_size,
               static_cast<double>(c.num_parameters()) / 1e6);
    const char* fp8_note = !c.quantization.fp8 ? ""
                           : engine->fp8_linear_weights()
                               ? " (FP8 linear weights, computed as FP8)"
                               : " (FP8 linear weights, dequantized to bf16)";
    out << fmt("weights    %.1f MiB loaded in %.0f ms%s\n",
               static_cast<double>(engine->checkpoint_bytes()) / (1 << 20), load_ms, fp8_note);
    const int64_t cache_tokens = static_cast<int64_t>(sc.num_pages - 1) * sc.page_size;
    out << fmt(
        "KV cache   %s, %lld tokens (%d pages of %d), %.1f MiB, max concurrency %.1fx for "
        "%d-token requests\n",
        dtype_name(options.kv_cache_dtype), static_cast<long long>(cache_tokens), sc.num_pages - 1,
        sc.page_size, static_cast<double>(engine->model().kv_cache_bytes()) / (1 << 20),
        static_cast<double>(cache_tokens) / sc.max_model_len, sc.max_model_len);
    out << format_attention_decision_table(engine->model().attention_selection());

    if (const auto it = flags.find("--prompt"); it != flags.end()) {
      QUENCH_REQUIRE(engine->tokenizer() != nullptr,
                     "--prompt needs the model's tokenizer.json, which ", options.model_dir,
                     " lacks; give --prompt-ids");
      prompts.push_back(engine->tokenizer()->encode(it->second));
    }
    if (prompts.empty()) {  // random prompts, as the serving benchmark's random dataset
      std::mt19937_64 rng(options.seed + 17);
      std::uniform_int_distribution<int32_t> id(3, c.vocab_size - 1);
      prompts.resize(static_cast<size_t>(num_prompts));
      for (auto& p : prompts) {
        p.resize(static_cast<size_t>(input_len));
        for (int32_t& t : p)
          t = id(rng);
      }
    }
    const auto run_start = std::chrono::steady_clock::now();
    const std::vector<RequestOutput> outputs = engine->generate(prompts, sampling);
    const double run_ms = ms_since(run_start);
    int64_t prompt_tokens = 0, output_tokens = 0;
    for (const RequestOutput& o : outputs) {
      prompt_tokens += static_cast<int64_t>(o.prompt.size());
      output_tokens += static_cast<int64_t>(o.output.size());
      out << fmt("request %lld  prompt %zu tokens  finish %s  ", static_cast<long long>(o.id),
                 o.prompt.size(), finish_reason_name(o.finish_reason));
      if (engine->tokenizer() !=
          nullptr) {  // the text as a JSON string: control bytes stay visible
        out << "output: " << nlohmann::json(output_text(*engine->tokenizer(), o)).dump() << "\n";
      } else {
        out << "output ids: " << join_ids(o.output) << "\n";
      }
    }
    out << fmt(
        "time       %.1f ms for %zu requests: %lld prompt + %lld generated tokens, "
        "%.1f generated tok/s\n",
        run_ms, outputs.size(), static_cast<long long>(prompt_tokens),
        static_cast<long long>(output_tokens),
        static_cast<double>(output_tokens) / (run_ms / 1000.0));
    if (engine->prefix_hit_tokens() > 0) {
      out << fmt("prefix     %lld of %lld prompt tokens came from the prefix cache\n",
                 static_cast<long long>(engine->prefix_hit_tokens()),
                 static_cast<long long>(engine->prefix_query_tokens()));
    }
    if (engine->spec_drafted_tokens() > 0) {
      out << fmt("drafts     %lld of %lld n-gram draft tokens accepted (%.1f%%)\n",
                 static_cast<long long>(engine->spec_accepted_tokens()),
                 static_cast<long long>(engine->spec_drafted_tokens()),
                 100.0 * static_cast<double>(engine->spec_accepted_tokens()) /
                     static_cast<double>(engine->spec_drafted_tokens()));
    }
    // Where a decode step's time goes: the host's own work, the runner's, the GPU's.
    for (const auto& [kind, t] : {std::pair{"decode", engine->decode_step_times()},
                                  std::pair{"prefill", engine->prefill_step_times()}}) {
      if (t.steps == 0) continue;
      const double n = static_cast<double>(t.steps);
      out << fmt(
          "steps      %lld %s steps, %.3f ms each: host %.3f ms (scheduling, sampling), "
          "runner %.3f ms",
          static_cast<long long>(t.steps), kind, t.wall_ms / n, (t.wall_ms - t.forward_ms) / n,
          t.forward_ms / n);
      out << (t.device_ms > 0.0 ? fmt(" (the GPU's stream %.3f ms)\n", t.device_ms / n) : "\n");
    }
    const std::string device = engine->model().device_name();
    // What the FP8 cache costs: the same requests over a bf16 cache, token for token. The first
    // engine goes first: on the GPU each takes its --gpu-memory-utilization share.
    engine.reset();
    std::string agreement;
    if (is_fp8(options.kv_cache_dtype) && compare_kv) {
      EngineOptions bf16_options = options;
      bf16_options.kv_cache_dtype = DType::kBF16;
      LlmEngine bf16_engine(bf16_options);
      const std::vector<RequestOutput> baseline = bf16_engine.generate(prompts, sampling);
      int64_t same = 0, compared = 0, identical = 0;
      for (size_t i = 0; i < outputs.size(); ++i) {
        const auto& a = outputs[i].output;
        const auto& b = baseline[i].output;
        size_t k = 0;  // tokens agree up to the first difference; after it the contexts differ
        while (k < a.size() && k < b.size() && a[k] == b[k])
          ++k;
        same += static_cast<int64_t>(k);
        compared += static_cast<int64_t>(std::max(a.size(), b.size()));
        identical += a == b ? 1 : 0;
      }
      out << fmt(
          "vs bf16 KV %lld of %zu requests identical; %lld of %lld generated tokens before the "
          "first "
          "difference\n",
          static_cast<long long>(identical), outputs.size(), static_cast<long long>(same),
          static_cast<long long>(compared));
      agreement =
          fmt(" identical_vs_bf16=%lld/%zu", static_cast<long long>(identical), outputs.size());
    }
    out << fmt(
        "summary: device=%s kv=%s requests=%zu prompt_tokens=%lld output_tokens=%lld ms=%.1f%s\n",
        device.c_str(), dtype_name(options.kv_cache_dtype), outputs.size(),
        static_cast<long long>(prompt_tokens), static_cast<long long>(output_tokens), run_ms,
        agreement.c_str());
    return 0;
  } catch (const Error& e) {
    err << "error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace quench
