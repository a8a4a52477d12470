// The GPU decoder against the CPU decoder (the reference path) on the built-in tiny model: the
// logits of a prefill and of the decode step after it agree for Llama and Qwen3 shapes, head dims
// 64 and 128 (the latter takes the Hopper kernels on sm_90), bf16 and FP8 caches. The two sides
// sum in different orders (cuBLAS, the kernels' reductions), so they agree to bf16 rounding, and
// an FP8 cache adds the odd value rounded to the neighbouring code (and on sm_90 the prefill takes
// an FP8 query where the CPU keeps bf16: the hd128 FP8 cases allow more). Tolerances are first
// guesses, not yet run on a GPU. Then the engine runs on the GPU end to end.
#include <gtest/gtest.h>

#include <cmath>

#include "harness/expect_error.h"
#include "harness/rel_l2.h"
#include "harness/scratch_dir.h"
#include "quench/core/cuda_device.h"
#include "quench/engine/llm_engine.h"
#include "quench/model/decoder_model.h"
#include "quench/model/device_decoder_model.h"
#include "quench/model/tiny_model.h"

namespace quench {
namespace {

using testing_support::rel_l2;

struct Case {
  const char* name;
  ModelArchitecture arch;
  int32_t head_dim, q_heads, kv_heads, hidden;
  DType kv;
  double tolerance;
};

class DeviceDecoderModelVsCpu : public ::testing::TestWithParam<Case> {};

TEST_P(DeviceDecoderModelVsCpu, PrefillAndDecodeLogitsAgree) {
  const Case c = GetParam();
  TinyModelSpec spec;
  spec.architecture = c.arch;
  spec.head_dim = c.head_dim;
  spec.num_q_heads = c.q_heads;
  spec.num_kv_heads = c.kv_heads;
  spec.hidden_size = c.hidden;
  const std::string dir = testing_support::scratch_dir("quench_device_model_test", c.name);
  write_tiny_model(dir, spec);
  const Checkpoint checkpoint(dir);
  const ModelConfig config = read_model_config(checkpoint.config_path());
  const ModelWeights weights = ModelWeights::load(config, checkpoint);
  DecoderModelOptions o;
  o.kv_dtype = c.kv;
  o.page_size = 16;
  o.num_pages = 64;
  o.max_model_len = 512;
  DecoderModel cpu(config, weights, o);
  DeviceDecoderModel gpu(config, weights, o);

  std::vector<int32_t> ids;
  for (int32_t i = 0; i < 77; ++i)
    ids.push_back(6 + (i * 37) % 500);
  const std::vector<int32_t> pages = {3, 1, 7, 2, 9, 4};
  // Prefill of 76 tokens (logits of rows 0, 40 and 75), then the decode step of token 77.
  const std::vector<ScheduledSequence> prefill = {{pages, 0, 76}};
  const AttentionMetadata pm = build_attention_metadata({}, prefill, 16, 64);
  const std::vector<int32_t> rows = {0, 40, 75};
  const std::span<const int32_t> prompt(ids.data(), 76);
  EXPECT_LT(rel_l2<float>(gpu.forward(prompt, pm, rows), cpu.forward(prompt, pm, rows)),
            c.tolerance);
  const std::vector<ScheduledSequence> decode = {{pages, 76, 1}};
  const AttentionMetadata dm = build_attention_metadata(decode, {}, 16, 64);
  const std::vector<int32_t> last = {ids[76]};
  const std::vector<int32_t> row0 = {0};
  EXPECT_LT(rel_l2<float>(gpu.forward(last, dm, row0), cpu.forward(last, dm, row0)), c.tolerance);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, DeviceDecoderModelVsCpu,
    ::testing::Values(
        Case{"llama_hd64_bf16", ModelArchitecture::kLlama, 64, 4, 2, 256, DType::kBF16, 1e-2},
        Case{"llama_hd64_fp8", ModelArchitecture::kLlama, 64, 4, 2, 256, DType::kFP8E4M3, 3e-2},
        Case{"qwen3_hd128_bf16", ModelArchitecture::kQwen3, 128, 8, 2, 512, DType::kBF16, 1e-2},
        Case{"qwen3_hd128_fp8", ModelArchitecture::kQwen3, 128, 8, 2, 512, DType::kFP8E4M3, 6e-2},
        Case{"llama_hd128_e5m2", ModelArchitecture::kLlama, 128, 8, 2, 512, DType::kFP8E5M2, 8e-2}),
    [](const ::testing::TestParamInfo<Case>& p) { return std::string(p.param.name); });

TEST(DeviceEngine, GeneratesEveryRequestInFullOnTheGpu) {
  const std::string dir = testing_support::scratch_dir("quench_device_model_test", "engine");
  write_tiny_model(dir, TinyModelSpec{});
  EngineOptions o;
  o.model_dir = dir;
  o.device = EngineDevice::kGpu;
  o.max_model_len = 256;
  o.max_num_batched_tokens = 64;
  o.num_kv_pages = 96;
  LlmEngine engine(o);
  EXPECT_STREQ(engine.model().device_name(), "gpu");
  SamplingParams s;
  s.max_tokens = 20;
  s.ignore_eos = true;
  std::vector<std::vector<int32_t>> prompts;
  for (int32_t len : {3, 90, 17, 1})
    prompts.push_back(std::vector<int32_t>(static_cast<size_t>(len), 100 + len));
  for (const RequestOutput& out : engine.generate(prompts, s)) {
    EXPECT_EQ(out.output.size(), 20u);
    for (int32_t t : out.output)
      EXPECT_TRUE(t >= 0 && t < 512);
  }
}

// Without --num-kv-pages the cache takes what --gpu-memory-utilization leaves: within the share
// (weights, step buffers and cache together), and the engine still serves requests.
TEST(DeviceEngine, SizesTheKvCacheFromGpuMemoryUtilization) {
  const std::string dir = testing_support::scratch_dir("quench_device_model_test", "utilization");
  write_tiny_model(dir, TinyModelSpec{});
  const CudaMemoryInfo before = current_cuda_memory_info("the test");
  EngineOptions o;
  o.model_dir = dir;
  o.device = EngineDevice::kGpu;
  o.max_model_len = 256;
  o.max_num_batched_tokens = 64;
  o.gpu_memory_utilization = 0.05;
  LlmEngine engine(o);
  const double share = 0.05 * static_cast<double>(before.total_bytes);
  EXPECT_LE(static_cast<double>(engine.model().kv_cache_bytes()), share);
  EXPECT_GE(static_cast<double>(engine.model().kv_cache_bytes()), 0.5 * share);
  const CudaMemoryInfo after = current_cuda_memory_info("the test");
  EXPECT_LE(static_cast<double>(before.free_bytes - after.free_bytes), share * 1.02)
      << "the engine took more than its share";
  SamplingParams s;
  s.max_tokens = 8;
  s.ignore_eos = true;
  const std::vector<RequestOutput> outputs =
      engine.generate({std::vector<int32_t>(40, 9), std::vector<int32_t>(3, 11)}, s);
  ASSERT_EQ(outputs.size(), 2u);
  for (const RequestOutput& out : outputs)
    EXPECT_EQ(out.output.size(), 8u);
  o.gpu_memory_utilization = 1.0;  // more than is free now that this engine holds its share
  EXPECT_QUENCH_ERROR(LlmEngine{o}, {"--gpu-memory-utilization 1", "are free"});
}

}  // namespace
}  // namespace quench
