#include "quench/benchmark/bench_serve_command.h"

#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "quench/benchmark/serving_benchmark.h"
#include "quench/core/error.h"
#include "quench/engine/engine_flags.h"
#include "quench/ops/logprobs/token_logprobs.h"
#include "quench/server/openai_server.h"

namespace quench {
namespace {

const char* bench_usage() {
  static const std::string usage =
      std::string(
          "usage: quench bench-serve [--host ADDR] [--port N] [--served-model-name NAME]\n"
          "  [--num-prompts N] [--random-input-len L] [--random-output-len L] "
          "[--random-range-ratio R]\n"
          "  [--request-rate R|inf] [--max-concurrency N] [--vocab-size N] [--seed S]\n"
          "  [--temperature T] [--top-p P] [--top-k K]   (sampling; default greedy)\n"
          "  [--repetition-penalty R]   (each request asks for it: a logit adjustment; > 0)\n"
          "  [--logprobs K]   (each request asks for its tokens' logprobs, K top entries, 0-20)\n"
          "  [--echo]   (with --logprobs: the prompt's logprobs too, as loglikelihood evaluations\n"
          "              ask; not streamed, so TTFT is the whole request)\n"
          "  [--result-json FILE]\n"
          "  [--launch]   start quench serve in this process (on a free port) with the engine "
          "flags:\n") +
      engine_flags_usage();
  return usage.c_str();
}

const FlagTable& known_flags() {
  static const FlagTable flags = command_flag_table(
      {"--host", "--port", "--served-model-name", "--num-prompts", "--random-input-len",
       "--random-output-len", "--random-range-ratio", "--request-rate", "--max-concurrency",
       "--vocab-size", "--result-json", "--temperature", "--top-p", "--top-k", "--logprobs",
       "--repetition-penalty"},
      {"--launch", "--echo"});
  return flags;
}

double parse_number(const std::string& flag, const std::string& text, double min_value) {
  if (text == "inf") return std::numeric_limits<double>::infinity();
  double value = NAN;
  try {
    value = parse_number_flag(flag, text);
  } catch (const UsageError&) {  // said below, with the range
  }
  if (!(value >= min_value)) {
    throw UsageError(str_cat(flag, " '", text, "' must be a number >= ", min_value, " (or inf)"));
  }
  return value;
}

nlohmann::json summary_json(const ServingBenchmarkResult& r, const ServingBenchmarkOptions& o) {
  const ServingSummary& s = r.summary;
  auto stats = [](const LatencyStats& l) {
    return nlohmann::json{{"mean_ms", l.mean_ms}, {"median_ms", l.median_ms}, {"p99_ms", l.p99_ms}};
  };
  return {{"model", r.model},
          {"num_prompts", o.num_prompts},
          {"random_input_len", o.input_len},
          {"random_output_len", o.output_len},
          {"request_rate",
           std::isinf(o.request_rate) ? nlohmann::json("inf") : nlohmann::json(o.request_rate)},
          {"max_concurrency", o.max_concurrency},
          {"temperature", o.temperature},
          {"top_p", o.top_p},
          {"top_k", o.top_k},
          {"logprobs", o.logprobs},
          {"repetition_penalty", o.repetition_penalty},
          {"echo", o.echo},
          {"completed", s.completed},
          {"failed", s.failed},
          {"duration_s", s.duration_s},
          {"total_input_tokens", s.total_input_tokens},
          {"total_output_tokens", s.total_output_tokens},
          {"request_throughput", s.request_throughput},
          {"output_throughput", s.output_throughput},
          {"total_token_throughput", s.total_token_throughput},
          {"ttft", stats(s.ttft)},
          {"tpot", stats(s.tpot)},
          {"itl", stats(s.itl)},
          {"e2el", stats(s.e2el)}};
}

}  // namespace

int run_bench_serve_command(int argc, char** argv, std::ostream& out, std::ostream& err) {
  ServingBenchmarkOptions o;
  ServeOptions serve;
  bool launch = false;
  std::optional<std::string> builtin;
  std::string result_json;
  try {
    const auto flags = split_flags(argc, argv, known_flags(), bench_usage());
    if (flags.count("--help")) {
      out << bench_usage();
      return 0;
    }
    auto get = [&](const char* name) -> const std::string* {
      const auto it = flags.find(name);
      return it == flags.end() ? nullptr : &it->second;
    };
    launch = get("--launch") != nullptr;
    builtin = engine_options_from_flags(flags, serve.engine);
    if (!launch && (get("--model") || get("--kv-cache-dtype") || get("--max-num-seqs"))) {
      throw UsageError(
          "engine flags (--model, --kv-cache-dtype, ...) need --launch; without it the server "
          "runs elsewhere");
    }
    if (const auto* v = get("--host")) o.host = *v;
    if (const auto* v = get("--port")) o.port = parse_int_flag<int32_t>("--port", *v, 1, 65535);
    if (const auto* v = get("--served-model-name")) o.model = *v;
    if (const auto* v = get("--num-prompts"))
      o.num_prompts = parse_int_flag<int32_t>("--num-prompts", *v, 1);
    if (const auto* v = get("--random-input-len"))
      o.input_len = parse_int_flag<int32_t>("--random-input-len", *v, 1);
    if (const auto* v = get("--random-output-len"))
      o.output_len = parse_int_flag<int32_t>("--random-output-len", *v, 1);
    if (const auto* v = get("--random-range-ratio")) {
      o.range_ratio = parse_number("--random-range-ratio", *v, 0.0);
      if (o.range_ratio >= 1.0) throw UsageError("--random-range-ratio must be below 1");
    }
    if (const auto* v = get("--request-rate")) {
      o.request_rate = parse_number("--request-rate", *v, 0.0);
      if (o.request_rate <= 0.0) throw UsageError("--request-rate must be > 0 (or inf)");
    }
    if (const auto* v = get("--max-concurrency"))
      o.max_concurrency = parse_int_flag<int32_t>("--max-concurrency", *v, 1);
    if (const auto* v = get("--vocab-size"))
      o.vocab_size = parse_int_flag<int32_t>("--vocab-size", *v, 2);
    if (const auto* v = get("--seed")) o.seed = parse_int_flag<uint64_t>("--seed", *v, 0);
    if (const auto* v = get("--result-json")) result_json = *v;
    if (const auto* v = get("--temperature")) {
      o.temperature = parse_number("--temperature", *v, 0.0);
      if (std::isinf(o.temperature)) throw UsageError("--temperature must be a finite number >= 0");
    }
    if (const auto* v = get("--top-p")) {
      o.top_p = parse_number("--top-p", *v, 0.0);
      if (!(o.top_p > 0.0 && o.top_p <= 1.0)) throw UsageError("--top-p must be in (0, 1]");
    }
    if (const auto* v = get("--top-k")) o.top_k = parse_int_flag<int32_t>("--top-k", *v, 0);
    if (const auto* v = get("--logprobs"))
      o.logprobs = parse_int_flag<int32_t>("--logprobs", *v, 0, kMaxTopLogprobs);
    o.echo = get("--echo") != nullptr;
    if (const auto* v = get("--repetition-penalty")) {
      o.repetition_penalty = parse_number("--repetition-penalty", *v, 0.0);
      if (!(o.repetition_penalty > 0.0) || std::isinf(o.repetition_penalty))
        throw UsageError("--repetition-penalty must be a finite number > 0");
    }
    if (o.echo && o.logprobs < 0)
      throw UsageError("--echo asks for the prompt's logprobs: give --logprobs K too");
  } catch (const Error& e) {
    err << "error: " << e.what() << "\n";
    return 2;
  }
  try {
    std::unique_ptr<BuiltinModelDir> builtin_dir;
    std::unique_ptr<OpenAiServer> server;
    if (launch) {
      if (builtin) {
        builtin_dir = std::make_unique<BuiltinModelDir>(*builtin);
        serve.engine.model_dir = builtin_dir->path();
        serve.served_model_name = "quench-" + *builtin;
      }
      serve.port = 0;
      serve.log_interval_seconds = 0;
      server = std::make_unique<OpenAiServer>(serve);
      o.host = serve.host;
      o.port = server->start();
      QUENCH_REQUIRE(server->wait_until_loaded(),
                     "the launched server failed to load: ", server->load_error());
      out << "bench-serve: launched quench serve on port " << o.port << " ("
          << server->served_model_name() << ", KV " << dtype_name(serve.engine.kv_cache_dtype)
          << ")\n";
    }
    out << "bench-serve: " << o.num_prompts << " prompts of " << o.input_len << " tokens -> "
        << o.output_len << " tokens, request rate " << o.request_rate << "/s, max concurrency "
        << (o.max_concurrency > 0 ? std::to_string(o.max_concurrency) : std::string("none"))
        << "\n";
    const ServingBenchmarkResult result = run_serving_benchmark(o);
    out << format_serving_summary(result.summary);
    for (const RequestRecord& r : result.records) {
      if (!r.success) {
        err << "bench-serve: a request failed: " << r.error << "\n";
        break;
      }
    }
    if (!result_json.empty()) {
      std::ofstream file(result_json);
      file << summary_json(result, o).dump(2) << "\n";
      QUENCH_REQUIRE(file.good(), "cannot write ", result_json);
    }
    return result.summary.failed == 0 ? 0 : 1;
  } catch (const Error& e) {
    err << "error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace quench
