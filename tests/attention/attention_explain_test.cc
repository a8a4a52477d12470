// `quench explain` from config.json files the test writes (Llama-3-8B-like, Qwen3-32B-like):
// the config parsing and decision table in the library, then the command-line program itself
// when it is built next to this test binary.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "harness/fake_attention_kernel.h"
#include "harness/log_capture.h"
#include "quench/attention/attention_decision_table.h"
#include "quench/attention/hf_attention_config.h"
#include "quench/attention/reference_attention_kernel.h"
#include "quench/core/error.h"

namespace quench {
namespace {

namespace fs = std::filesystem;

constexpr const char* kLlama3_8B = R"({
  "architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "rope_theta": 500000.0, "torch_dtype": "bfloat16", "vocab_size": 128256
})";

constexpr const char* kQwen3_32B = R"({
  "architectures": ["Qwen3ForCausalLM"], "head_dim": 128, "hidden_size": 5120,
  "num_attention_heads": 64, "num_hidden_layers": 64, "num_key_value_heads": 8,
  "sliding_window": null, "use_sliding_window": false, "max_window_layers": 64,
  "torch_dtype": "bfloat16", "vocab_size": 151936
})";

// One directory per test process, removed when the process exits.
const fs::path& test_dir() {
  static const struct Dir {
    fs::path path = fs::temp_directory_path() / ("quench_explain_test_" + std::to_string(getpid()));
    ~Dir() { fs::remove_all(path); }
  } dir;
  return dir.path;
}

std::string write_config(const std::string& name, const char* text) {
  fs::create_directories(test_dir() / name);
  const fs::path path = test_dir() / name / "config.json";
  std::ofstream(path) << text;
  return path.string();
}

TEST(HfAttentionConfig, Llama3_8BDerivesHeadDimFromHiddenSize) {
  const HfAttentionFields f = read_hf_attention_fields(write_config("llama", kLlama3_8B));
  EXPECT_EQ(f.num_q_heads, 32);
  EXPECT_EQ(f.num_kv_heads, 8);
  EXPECT_EQ(f.head_dim, 128);
  EXPECT_EQ(f.sliding_window, 0);
  EXPECT_EQ(f.logit_soft_cap, 0.0f);
  EXPECT_EQ(f.model_dtype, DType::kBF16);
}

TEST(HfAttentionConfig, Qwen3_32BHasExplicitHeadDimAndDisabledWindow) {
  const HfAttentionFields f = read_hf_attention_fields(write_config("qwen", kQwen3_32B));
  EXPECT_EQ(f.num_q_heads, 64);
  EXPECT_EQ(f.num_kv_heads, 8);
  EXPECT_EQ(f.head_dim, 128);
  EXPECT_EQ(f.sliding_window, 0);
}

TEST(HfAttentionConfig, Gemma2StyleWindowAndSoftCap) {
  const HfAttentionFields f = parse_hf_attention_fields(
      R"({"num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
          "sliding_window": 4096, "attn_logit_softcapping": 50.0, "torch_dtype": "float16"})",
      "gemma");
  EXPECT_EQ(f.sliding_window, 4096);
  EXPECT_EQ(f.logit_soft_cap, 50.0f);
  EXPECT_EQ(f.model_dtype, DType::kF16);
}

TEST(HfAttentionConfig, BadFieldsNameTheField) {
  auto message = [](const char* text) {
    try {
      parse_hf_attention_fields(text, "cfg");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("{").find("cfg: not valid JSON"), std::string::npos);
  EXPECT_NE(message(R"({"hidden_size": 4096})").find("'num_attention_heads' is missing"),
            std::string::npos);
  EXPECT_NE(message(R"({"num_attention_heads": 32})").find("neither 'head_dim' nor 'hidden_size'"),
            std::string::npos);
  EXPECT_NE(message(R"({"num_attention_heads": -2, "head_dim": 64})")
                .find("'num_attention_heads' = -2 must be a positive integer"),
            std::string::npos);
  // The upper bound is stated, not only enforced.
  EXPECT_NE(
      message(R"({"num_attention_heads": 32, "head_dim": 1073741824})")
          .find("'head_dim' = 1073741824 must be a positive integer <= 1073741823 (2^30 - 1)"),
      std::string::npos);
  EXPECT_NE(message(R"({"num_attention_heads": 2, "head_dim": 64, "torch_dtype": "int8"})")
                .find("torch_dtype 'int8' is not supported"),
            std::string::npos);
  // A soft-cap past float's range would become inf in the float field.
  EXPECT_NE(
      message(R"({"num_attention_heads": 2, "head_dim": 64, "attn_logit_softcapping": 1e39})")
          .find("'attn_logit_softcapping' = 1e+39 must be a positive number that a float holds"),
      std::string::npos);
  EXPECT_THROW(read_hf_attention_fields("/nonexistent/config.json"), Error);
}

AttentionConfig config_from(const char* name, const char* json, DType kv, int32_t arch) {
  AttentionConfig c;
  apply_hf_attention_fields(read_hf_attention_fields(write_config(name, json)), c);
  c.kv_dtype = kv;
  c.compute_capability = arch;
  return c;
}

TEST(AttentionDecisionTable, Llama3_8BOnCpu) {
  testing_support::LogCapture quiet;
  const auto s = AttentionBackendSelection::decide(
      config_from("llama", kLlama3_8B, DType::kFP8E4M3, 0), {}, {});
  EXPECT_EQ(format_attention_decision_table(s),
            "Attention backend for cpu, 32 q heads, 8 KV heads, head_dim 128, KV fp8_e4m3 page 16 "
            "NHD, model bf16, out bf16\n"
            "phase    kernel  q dtype  KV dtype  out dtype  reason\n"
            "prefill  cpu     bf16     fp8_e4m3  bf16       CPU backend: any configuration, fp32 "
            "vector math. Preferred over reference.\n"
            "decode   cpu     bf16     fp8_e4m3  bf16       CPU backend: any configuration, fp32 "
            "vector math. Preferred over reference.\n");
}

TEST(AttentionDecisionTable, Qwen3_32BOnSm90WithGpuStandIns) {
  AttentionKernelRegistry r;
  register_reference_attention_kernel(r);
  testing_support::register_gpu_standin_kernels(r);
  testing_support::LogCapture quiet;
  const auto s = AttentionBackendSelection::decide(
      config_from("qwen", kQwen3_32B, DType::kFP8E4M3, 90), {}, {}, r);
  const std::string table = format_attention_decision_table(s);
  EXPECT_NE(table.find("Attention backend for sm_90, 64 q heads, 8 KV heads, head_dim 128"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("prefill  prefill_hopper  fp8_e4m3  fp8_e4m3  bf16       Hopper TMA/wgmma "
                       "prefill. Preferred over prefill_mma.\n"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("decode   decode_gqa      bf16      fp8_e4m3  bf16       Grouped-query "
                       "decode.\n"),
            std::string::npos)
      << table;
}

// Runs `quench <args>` next to this test binary; returns {exit code, stdout + stderr}.
std::pair<int, std::string> run_quench(const std::string& args) {
  const fs::path exe = fs::read_symlink("/proc/self/exe").parent_path() / "quench";
  if (!fs::exists(exe)) return {-1, ""};
  FILE* pipe = popen((exe.string() + " " + args + " 2>&1").c_str(), "r");
  std::string output;
  std::array<char, 512> buffer;
  while (fgets(buffer.data(), buffer.size(), pipe) != nullptr)
    output += buffer.data();
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -2, output};
}

TEST(ExplainCommand, PrintsTableFromConfigJson) {
  const auto [code, out] =
      run_quench("explain --model-config " + write_config("qwen", kQwen3_32B) + " --gpu-arch cpu");
  if (code == -1) GTEST_SKIP() << "the quench program is not built next to quench_tests";
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("cpu, 64 q heads, 8 KV heads, head_dim 128, KV bf16"), std::string::npos)
      << out;
  EXPECT_NE(out.find("prefill  cpu     bf16"), std::string::npos) << out;
  EXPECT_EQ(out.find("INFO"), std::string::npos) << out;  // the table replaces the info lines
}

TEST(ExplainCommand, FlagsOverrideAndWarn) {
  const auto [code, out] = run_quench(
      "explain --num-q-heads 32 --num-kv-heads 8 --head-dim 128 --gpu-arch cpu "
      "--kv-cache-dtype fp8 --out-dtype nvfp4 --prefill-kernel !cpu --decode-kernel decode_gqa");
  if (code == -1) GTEST_SKIP() << "the quench program is not built next to quench_tests";
  EXPECT_EQ(code, 0) << out;
  // An exclusion another kernel can honour, without a warning.
  EXPECT_NE(out.find("prefill  reference  bf16     fp8_e4m3  nvfp4      Override excludes 'cpu'."),
            std::string::npos)
      << out;
  // A GPU kernel asked for on the CPU: warned, and the default stands in.
  EXPECT_NE(out.find("WARNING quench: Attention decode kernel: cpu"), std::string::npos) << out;
  EXPECT_NE(out.find("Cannot use attention kernel 'decode_gqa' for decode: mma.sync bf16 needs "
                     "sm_80 or newer; got cpu. Using 'cpu'"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("decode   cpu        bf16     fp8_e4m3  nvfp4"), std::string::npos) << out;
  EXPECT_EQ(out.find("WARNING quench: Attention prefill kernel"), std::string::npos) << out;
}

TEST(ExplainCommand, BadFlagsExitWithCode2AndAllowedValues) {
  const struct {
    const char* args;
    const char* message;
  } cases[] = {
      {"explain --num-q-heads 32 --head-dim 128 --kv-cache-dtype int4",
       "allowed: auto, bf16, fp8, fp8_e4m3, fp8_e5m2"},
      {"explain --num-q-heads 32 --head-dim 128 --gpu-arch sm_75",
       "allowed: sm_90, sm_89, sm_80, cpu"},
      {"explain --num-q-heads 32 --head-dim 128 --page-size 48", "allowed: 16, 32, 64"},
      {"explain --num-q-heads 32 --head-dim 128 --layout XYZ", "allowed: NHD, HND"},
      {"explain --num-q-heads 32 --head-dim 128 --prefill-kernel flash", "kernels: reference"},
      {"explain --num-q-heads x --head-dim 128", "must be an integer >= 1"},
      {"explain --head-dim 128", "give --model-config, or --num-q-heads and --head-dim"},
      {"explain --frobnicate", "unknown argument '--frobnicate'"},
      {"explain --model-config /nonexistent/config.json", "cannot open model config"},
  };
  for (const auto& c : cases) {
    const auto [code, out] = run_quench(c.args);
    if (code == -1) GTEST_SKIP() << "the quench program is not built next to quench_tests";
    EXPECT_EQ(code, 2) << c.args << "\n" << out;
    EXPECT_NE(out.find(c.message), std::string::npos) << c.args << "\n" << out;
  }
  EXPECT_EQ(run_quench("frobnicate").first, 2);
  EXPECT_EQ(run_quench("--help").first, 0);
}

// --softcap takes a finite decimal number: not "inf" (NaN scores), hex, spaces or trailing junk.
TEST(ExplainCommand, SoftCapMustBeAFiniteNumber) {
  const std::string base = "explain --num-q-heads 32 --head-dim 128 --gpu-arch cpu --softcap ";
  for (const char* bad : {"inf", "-1", "nan", "0x10", "' 5'", "5x", "1e39"}) {
    const auto [code, out] = run_quench(base + bad);
    if (code == -1) GTEST_SKIP() << "the quench program is not built next to quench_tests";
    EXPECT_EQ(code, 2) << bad << "\n" << out;
    EXPECT_NE(out.find("must be a finite number >= 0 (0 = none)"), std::string::npos) << bad << "\n"
                                                                                      << out;
  }
  const auto [code, out] = run_quench(base + "30.5");
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("soft-cap 30.5"), std::string::npos) << out;
}

TEST(ExplainCommand, NoKernelExitsWithCode1) {
  const auto [code, out] = run_quench("explain --num-q-heads 32 --head-dim 96 --gpu-arch cpu");
  if (code == -1) GTEST_SKIP() << "the quench program is not built next to quench_tests";
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("head_dim 96 is not supported"), std::string::npos) << out;
}

}  // namespace
}  // namespace quench
