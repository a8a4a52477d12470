// `quench layer` on the CPU backend with a tiny configuration: the report names both phases'
// kernels, FP8 costs a little accuracy against the bf16 KV cache (non-zero, bounded), and bad
// flags exit 2 naming the allowed values.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "harness/command_run.h"
#include "harness/expect_error.h"
#include "quench/layer/layer_demo.h"
#include "quench/layer/layer_workload.h"

namespace quench {
namespace {

using testing_support::CommandRun;

CommandRun run_layer(std::vector<std::string> args) {
  return testing_support::run_command(run_layer_command, "layer", std::move(args));
}

// The value after `key` in the summary line ("... key=1.234e-02 ...").
double summary_value(const std::string& out, const std::string& key) {
  const size_t at = out.find(key + "=");
  EXPECT_NE(at, std::string::npos) << "no " << key << " in:\n" << out;
  return at == std::string::npos ? -1.0 : std::stod(out.substr(at + key.size() + 1));
}

const std::vector<std::string> kTinyCpu = {
    "--device",   "cpu", "--num-q-heads", "4", "--num-kv-heads", "2",
    "--head-dim", "64",  "--decode-seqs", "3", "--prefill-seqs", "2",
    "--context",  "40",  "--chunk",       "9", "--seed",         "7"};

TEST(LayerCommand, TinyCpuRunReportsKernelsAndSmallFp8Error) {
  const CommandRun run = run_layer(kTinyCpu);
  ASSERT_EQ(run.exit_code, 0) << run.err << run.out;
  EXPECT_NE(run.out.find("prefill  cpu"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("decode   cpu"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("prefill=cpu decode=cpu"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("kv=fp8_e4m3"), std::string::npos) << run.out;
  // 3 decode rows + 2 chunks of 9.
  EXPECT_NE(run.out.find("rows=21"), std::string::npos) << run.out;
  // e4m3 keeps 3 mantissa bits: a few percent rounding error per cached element, which the
  // attention average neither removes nor grows (3.4e-2 here). Zero would mean the cache was
  // not FP8; far more would mean a scale applied the wrong way.
  const double rel = summary_value(run.out, "rel_l2_vs_bf16");
  EXPECT_GT(rel, 1e-3) << run.out;
  EXPECT_LT(rel, 5e-2) << run.out;
}

TEST(LayerCommand, Bf16CacheMatchesTheReferenceExactlyOnCpu) {
  std::vector<std::string> args = kTinyCpu;
  args.insert(args.end(), {"--kv-cache-dtype", "bf16", "--layout", "HND", "--page-size", "32"});
  const CommandRun run = run_layer(args);
  ASSERT_EQ(run.exit_code, 0) << run.err << run.out;
  EXPECT_EQ(summary_value(run.out, "rel_l2_vs_bf16"), 0.0) << run.out;
}

TEST(LayerCommand, BadFlagsExit2WithAllowedValues) {
  const CommandRun dtype = run_layer({"--kv-cache-dtype", "int4"});
  EXPECT_EQ(dtype.exit_code, 2);
  EXPECT_NE(dtype.err.find("allowed: bf16, fp8, fp8_e4m3, fp8_e5m2"), std::string::npos)
      << dtype.err;

  const CommandRun device = run_layer({"--device", "tpu"});
  EXPECT_EQ(device.exit_code, 2);
  EXPECT_NE(device.err.find("allowed: cpu, gpu, auto"), std::string::npos) << device.err;

  const CommandRun page = run_layer({"--page-size=8"});
  EXPECT_EQ(page.exit_code, 2);
  EXPECT_NE(page.err.find("allowed: 16, 32, 64"), std::string::npos) << page.err;

  const CommandRun unknown = run_layer({"--batch", "4"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("usage: quench layer"), std::string::npos) << unknown.err;

  const CommandRun kernel = run_layer({"--decode-kernel", "nonexistent"});
  EXPECT_EQ(kernel.exit_code, 2);
  EXPECT_NE(kernel.err.find("reference"), std::string::npos) << kernel.err;

  EXPECT_TRUE(dtype.out.empty() && device.out.empty());
}

// Sizes past the bounds used to reach make_layer_workload, whose int32 token and page counts
// overflowed (--context 2147483647 failed with "PageAllocator: num_pages -436207603") or which
// asked for terabytes ("std::bad_alloc"). They are usage errors naming the allowed range.
TEST(LayerCommand, WorkloadSizesPastTheirBoundsAreUsageErrors) {
  const struct {
    std::vector<std::string> args;
    const char* message;
  } cases[] = {
      {{"--context", "2147483647"}, "--context '2147483647' must be an integer in [1, 65536]"},
      {{"--context", "65537"}, "--context '65537' must be an integer in [1, 65536]"},
      {{"--chunk=2147483647"}, "--chunk '2147483647' must be an integer in [1, 65536]"},
      {{"--decode-seqs", "2147483647"},
       "--decode-seqs '2147483647' must be an integer in [0, 1024]"},
      {{"--prefill-seqs", "1025"}, "--prefill-seqs '1025' must be an integer in [0, 1024]"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = c.args;
    args.insert(args.begin(), "layer");
    std::vector<char*> argv;
    for (std::string& a : args)
      argv.push_back(a.data());
    try {
      parse_layer_demo_flags(static_cast<int>(argv.size()), argv.data());
      ADD_FAILURE() << "accepted " << args[1];
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
    }
  }
  const CommandRun largest_bounds =
      run_layer({"--context", "65536", "--chunk", "65536", "--decode-seqs", "1024", "--help"});
  EXPECT_EQ(largest_bounds.exit_code, 0) << largest_bounds.err;
}

// Within the flags' bounds a step can still ask for terabytes (1024 decode sequences of 64k
// cached tokens and 1024 chunks of 64k new ones): the workload names its size before allocating
// anything, where it used to end in std::bad_alloc.
TEST(LayerCommand, AStepLargerThanHostMemoryIsNamedBeforeAllocating) {
  LayerDemoOptions o;
  o.context = 65536;
  o.chunk = 65536;
  o.decode_seqs = 1024;
  o.prefill_seqs = 1024;
  EXPECT_QUENCH_ERROR(make_layer_workload(o),
                      {"GiB of host memory", "allowed: a smaller --context"});
}

TEST(LayerCommand, UnfusedOnCpuIsARunErrorNotAUsageError) {
  std::vector<std::string> args = kTinyCpu;
  args.insert(args.end(), {"--fusion", "unfused"});
  const CommandRun run = run_layer(args);
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("--fusion unfused is a GPU path"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace quench
