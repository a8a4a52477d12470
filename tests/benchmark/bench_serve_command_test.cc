// `quench bench-serve --launch` measures the built-in model through its own server: every request
// succeeds with exactly the asked-for tokens, the summary and the JSON agree; engine flags
// without --launch and bad numbers exit 2.
#include "quench/benchmark/bench_serve_command.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "harness/command_run.h"
#include "harness/scratch_dir.h"

namespace quench {
namespace {

int run(std::vector<std::string> args, std::string* out_text, std::string* err_text) {
  const testing_support::CommandRun r =
      testing_support::run_command(run_bench_serve_command, "bench-serve", std::move(args));
  *out_text = r.out;
  *err_text = r.err;
  return r.exit_code;
}

TEST(BenchServeCommand, LaunchedServerServesEveryRequestInFull) {
  const std::string json_path =
      testing_support::scratch_dir("quench_bench_serve_test", "out") + "/r.json";
  std::string out, err;
  ASSERT_EQ(
      run({"--launch", "--num-prompts", "6", "--random-input-len", "20", "--random-output-len", "5",
           "--max-concurrency", "3", "--request-rate", "200", "--result-json", json_path},
          &out, &err),
      0)
      << out << err;
  EXPECT_NE(out.find("Successful requests:                     6"), std::string::npos) << out;
  EXPECT_NE(out.find("Total generated tokens:                  30"), std::string::npos) << out;
  const nlohmann::json r = nlohmann::json::parse(std::ifstream(json_path));
  EXPECT_EQ(r["completed"], 6);
  EXPECT_EQ(r["total_input_tokens"], 120);
  EXPECT_EQ(r["total_output_tokens"], 30);
  EXPECT_GT(r["ttft"]["mean_ms"].get<double>(), 0.0);
  EXPECT_GT(r["tpot"]["mean_ms"].get<double>(), 0.0);
}

// Sampled requests (temperature, top-p, top-k) through the same path; the result names them.
TEST(BenchServeCommand, SampledRequestsRunAndAreRecorded) {
  const std::string json_path =
      testing_support::scratch_dir("quench_bench_serve_test", "sampled") + "/r.json";
  std::string out, err;
  ASSERT_EQ(
      run({"--launch", "--num-prompts", "3", "--random-input-len", "12", "--random-output-len", "4",
           "--temperature", "0.8", "--top-p", "0.9", "--top-k", "20", "--result-json", json_path},
          &out, &err),
      0)
      << out << err;
  const nlohmann::json r = nlohmann::json::parse(std::ifstream(json_path));
  EXPECT_EQ(r["completed"], 3);
  EXPECT_EQ(r["total_output_tokens"], 12);
  EXPECT_DOUBLE_EQ(r["temperature"].get<double>(), 0.8);
  EXPECT_DOUBLE_EQ(r["top_p"].get<double>(), 0.9);
  EXPECT_EQ(r["top_k"], 20);
  // A logit adjustment on every request (the runner applies it before the pick).
  ASSERT_EQ(
      run({"--launch", "--num-prompts", "3", "--random-input-len", "12", "--random-output-len", "4",
           "--repetition-penalty", "1.2", "--result-json", json_path},
          &out, &err),
      0)
      << out << err;
  const nlohmann::json penalized = nlohmann::json::parse(std::ifstream(json_path));
  EXPECT_EQ(penalized["completed"], 3);
  EXPECT_DOUBLE_EQ(penalized["repetition_penalty"].get<double>(), 1.2);
}

// Requests that ask for logprobs (streamed) and for the prompt's too (echo, not streamed, as
// loglikelihood evaluations send them): each answer is checked to hold them, and the result names
// the options.
TEST(BenchServeCommand, LogprobsAndEchoRequestsAreCheckedAndRecorded) {
  const std::string dir = testing_support::scratch_dir("quench_bench_serve_test", "logprobs");
  for (const bool echo : {false, true}) {
    const std::string json_path = dir + (echo ? "/echo.json" : "/logprobs.json");
    std::vector<std::string> args = {
        "--launch", "--num-prompts", "3", "--random-input-len", "12",     "--random-output-len",
        "2",        "--logprobs",    "3", "--result-json",      json_path};
    if (echo) args.push_back("--echo");
    std::string out, err;
    ASSERT_EQ(run(args, &out, &err), 0) << out << err;
    const nlohmann::json r = nlohmann::json::parse(std::ifstream(json_path));
    EXPECT_EQ(r["completed"], 3) << out << err;
    EXPECT_EQ(r["failed"], 0) << out << err;
    EXPECT_EQ(r["total_output_tokens"], 6);
    EXPECT_EQ(r["logprobs"], 3);
    EXPECT_EQ(r["echo"], echo);
  }
}

TEST(BenchServeCommand, BadFlagsExit2) {
  std::string out, err;
  EXPECT_EQ(run({"--model", "/some/model"}, &out, &err), 2);
  EXPECT_NE(err.find("--launch"), std::string::npos) << err;
  EXPECT_EQ(run({"--request-rate", "-1"}, &out, &err), 2);
  EXPECT_EQ(run({"--random-range-ratio", "1.5"}, &out, &err), 2);
  EXPECT_EQ(run({"--port", "0"}, &out, &err), 2);
  EXPECT_EQ(run({"--top-p", "0"}, &out, &err), 2);
  EXPECT_NE(err.find("--top-p"), std::string::npos) << err;
  EXPECT_EQ(run({"--temperature", "-0.5"}, &out, &err), 2);
  EXPECT_EQ(run({"--top-k", "x"}, &out, &err), 2);
  EXPECT_EQ(run({"--logprobs", "21"}, &out, &err), 2);
  EXPECT_NE(err.find("--logprobs"), std::string::npos) << err;
  EXPECT_EQ(run({"--repetition-penalty", "0"}, &out, &err), 2);
  EXPECT_NE(err.find("--repetition-penalty"), std::string::npos) << err;
  EXPECT_EQ(run({"--echo"}, &out, &err), 2);
  EXPECT_NE(err.find("--logprobs K"), std::string::npos) << err;
}

}  // namespace
}  // namespace quench
