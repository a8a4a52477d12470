// The GPU decoder against the CPU decoder (the reference path) on the built-in tiny model: the
// logits of a prefill and of the decode step after it agree for Llama and Qwen3 shapes, head dims
// 64 and 128 (the latter takes the Hopper kernels on sm_90), bf16 and FP8 caches. The two sides
// sum in different orders (cuBLAS, the kernels' reductions), so they agree to bf16 rounding, and
// an FP8 cache adds the odd value rounded to the neighbouring code (and on sm_90 the prefill takes
// an FP8 query where the CPU keeps bf16: the hd128 FP8 cases allow more). Tolerances are first
// guesses, not yet run on a GPU. Then the engine runs on the GPU end to end.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <optional>
#include <tuple>
#include <utility>

#include "harness/expect_error.h"
#include "harness/model_with_scales.h"
#include "harness/rel_l2.h"
#include "harness/scratch_dir.h"
#include "quench/core/cuda_device.h"
#include "quench/core/error.h"
#include "quench/engine/llm_engine.h"
#include "quench/model/decoder_model.h"
#include "quench/model/device_decoder_model.h"
#include "quench/model/tiny_model.h"
#include "quench/ops/argmax/argmax_reference.h"
#include "quench/ops/linear/linear_fp8_weight.h"
#include "quench/ops/logprobs/row_logprobs_reference.h"
#include "quench/ops/sampling/logit_edits.h"
#include "quench/ops/sampling/sample_rows_reference.h"

namespace quench {
namespace {

using testing_support::rel_l2;

std::vector<int32_t> iota_rows_for_test(int32_t n) {
  std::vector<int32_t> rows(static_cast<size_t>(n));
  for (int32_t r = 0; r < n; ++r)
    rows[static_cast<size_t>(r)] = r;
  return rows;
}

// A prefill of 76 tokens (the logits of rows 0, 40 and 75), then the decode step of token 77, on
// both decoders (pages of 16 tokens out of 64): their logits within `tolerance` (relative l2).
void expect_prefill_and_decode_agree(DeviceDecoderModel& gpu, DecoderModel& cpu, double tolerance) {
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < 77; ++i)
    ids.push_back(6 + (i * 37) % 500);
  const std::vector<int32_t> pages = {3, 1, 7, 2, 9, 4};
  const std::vector<ScheduledSequence> prefill = {{pages, 0, 76}};
  const AttentionMetadata pm = build_attention_metadata({}, prefill, 16, 64);
  const std::vector<int32_t> rows = {0, 40, 75};
  const std::span<const int32_t> prompt(ids.data(), 76);
  EXPECT_LT(rel_l2<float>(gpu.forward(prompt, pm, rows), cpu.forward(prompt, pm, rows)), tolerance)
      << "prefill";
  const std::vector<ScheduledSequence> decode = {{pages, 76, 1}};
  const AttentionMetadata dm = build_attention_metadata(decode, {}, 16, 64);
  const std::vector<int32_t> last = {ids[76]};
  const std::vector<int32_t> row0 = {0};
  EXPECT_LT(rel_l2<float>(gpu.forward(last, dm, row0), cpu.forward(last, dm, row0)), tolerance)
      << "decode";
}

// This GPU's compute capability as one number (90 for sm_90).
int32_t current_sm() {
  const CudaDeviceProperties props = require_current_cuda_device_properties("the test");
  return props.compute_capability_major * 10 + props.compute_capability_minor;
}

// A tiny FP8 checkpoint (spec.fp8_weights) loaded twice: dequantized to bf16, as the CPU decoder
// takes it, and with its FP8 weights kept, as the GPU runner does.
struct Fp8TinyModel {
  ModelConfig config;
  ModelWeights dequantized;
  ModelWeights kept;
};

// The checkpoint of `spec` written under `name`; nullopt where this GPU keeps no FP8 weights.
std::optional<Fp8TinyModel> load_fp8_tiny_model(const TinyModelSpec& spec,
                                                const std::string& name) {
  const std::string dir = testing_support::scratch_dir("quench_device_model_test", name);
  write_tiny_model(dir, spec);
  const Checkpoint checkpoint(dir);
  ModelConfig config = read_model_config(checkpoint.config_path());
  if (!DeviceDecoderModel::keeps_fp8_weights(config, current_sm())) return std::nullopt;
  // The weights keep the checkpoint's mappings (ModelWeights::mapped_files).
  ModelWeights dequantized = ModelWeights::load(config, checkpoint);
  ModelWeights kept = ModelWeights::load(config, checkpoint, /*keep_fp8=*/true);
  return Fp8TinyModel{std::move(config), std::move(dequantized), std::move(kept)};
}

// The runner options both FP8-weight tests take: a bf16 cache of 64 pages of 16 tokens.
DecoderModelOptions fp8_tiny_model_options() {
  DecoderModelOptions o;
  o.kv_dtype = DType::kBF16;
  o.page_size = 16;
  o.num_pages = 64;
  o.max_model_len = 512;
  return o;
}

// `seqs` prompts of 20 tokens and more (3 pages of 16 each) in one prefill step, then one decode
// step of them all, the GPU runner against the CPU decoder at 8e-2 (FP8 weights, bf16 cache);
// `after_prefill` runs between the two.
template <typename AfterPrefill>
void expect_batched_decode_matches_cpu(DeviceDecoderModel& gpu, DecoderModel& cpu, int32_t seqs,
                                       AfterPrefill&& after_prefill) {
  std::vector<ScheduledSequence> prefills, decodes;
  std::vector<int32_t> prompt_ids, next_ids, prompt_rows;
  int32_t page = 1;
  for (int32_t s = 0; s < seqs; ++s) {
    const int32_t len = 20 + s;
    std::vector<int32_t> pages = {page, page + 1, page + 2};
    page += 3;
    prefills.push_back({pages, 0, len});
    decodes.push_back({pages, len, 1});
    for (int32_t i = 0; i < len; ++i)
      prompt_ids.push_back(6 + (i * 37 + s * 11) % 500);
    prompt_rows.push_back(static_cast<int32_t>(prompt_ids.size()) - 1);
    next_ids.push_back(9 + s * 13);
  }
  const AttentionMetadata pm = build_attention_metadata({}, prefills, 16, 64);
  EXPECT_LT(rel_l2<float>(gpu.forward(prompt_ids, pm, prompt_rows),
                          cpu.forward(prompt_ids, pm, prompt_rows)),
            8e-2)
      << "prefill of " << seqs;
  after_prefill();
  const AttentionMetadata dm = build_attention_metadata(decodes, {}, 16, 64);
  const std::vector<int32_t> rows = iota_rows_for_test(seqs);
  EXPECT_LT(rel_l2<float>(gpu.forward(next_ids, dm, rows), cpu.forward(next_ids, dm, rows)), 8e-2)
      << "decode step of " << seqs;
}

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

  expect_prefill_and_decode_agree(gpu, cpu, c.tolerance);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, DeviceDecoderModelVsCpu,
    ::testing::Values(
        Case{"llama_hd64_bf16", ModelArchitecture::kLlama, 64, 4, 2, 256, DType::kBF16, 1e-2},
        Case{"llama_hd64_fp8", ModelArchitecture::kLlama, 64, 4, 2, 256, DType::kFP8E4M3, 3e-2},
        Case{"qwen3_hd128_bf16", ModelArchitecture::kQwen3, 128, 8, 2, 512, DType::kBF16, 1e-2},
        Case{"qwen3_hd128_fp8", ModelArchitecture::kQwen3, 128, 8, 2, 512, DType::kFP8E4M3, 6e-2},
        Case{"llama_hd128_e5m2", ModelArchitecture::kLlama, 128, 8, 2, 512, DType::kFP8E5M2, 8e-2},
        Case{"qwen2_hd64_fp8", ModelArchitecture::kQwen2, 64, 4, 2, 256, DType::kFP8E4M3, 3e-2}),
    [](const ::testing::TestParamInfo<Case>& p) { return std::string(p.param.name); });

// An FP8 checkpoint's linear weights kept FP8 on the GPU (per-channel scales, and 128 x 128
// blocks) against the CPU decoder over the same checkpoint dequantized to bf16: the GPU computes
// fp8 x scale exactly where the CPU rounds it to bf16, and its prefill (76 rows, padded to 80 for
// the block GEMM) quantizes the activations to e4m3 per token (per 128 columns for blocks), a few
// percent on the logits; the one-token decode streams the FP8 weights against bf16 activations,
// within bf16 rounding. The kept weights take half the bytes.
TEST(DeviceDecoderModelFp8Weights, KeptFp8WeightsMatchTheDequantizedCpuDecoder) {
  for (const auto& [name, arch, head_dim, q_heads, hidden, block] :
       std::vector<std::tuple<const char*, ModelArchitecture, int32_t, int32_t, int32_t, int32_t>>{
           {"llama_hd64", ModelArchitecture::kLlama, 64, 4, 256, 0},
           {"qwen3_hd128", ModelArchitecture::kQwen3, 128, 8, 512, 0},
           {"llama_hd64_blocks", ModelArchitecture::kLlama, 64, 8, 512, 128},
           {"qwen3_hd128_blocks", ModelArchitecture::kQwen3, 128, 4, 512, 128}}) {
    SCOPED_TRACE(name);
    TinyModelSpec spec;
    spec.architecture = arch;
    spec.head_dim = head_dim;
    spec.num_q_heads = q_heads;
    spec.num_kv_heads = 2;
    spec.hidden_size = hidden;
    spec.intermediate_size = block > 0 ? 1024 : spec.intermediate_size;
    spec.fp8_weights = true;
    spec.fp8_block = block;
    const std::optional<Fp8TinyModel> model =
        load_fp8_tiny_model(spec, std::string("fp8w_") + name);
    if (!model) GTEST_SKIP() << "FP8 weights: sm_90+";
    const auto& [config, dequantized, kept] = *model;
    ASSERT_TRUE(kept.has_fp8_linears());
    ASSERT_FALSE(dequantized.has_fp8_linears());
    EXPECT_LT(DeviceDecoderModel::weight_bytes(kept),
              DeviceDecoderModel::weight_bytes(dequantized));
    const DecoderModelOptions o = fp8_tiny_model_options();
    DecoderModel cpu(config, dequantized, o);
    DeviceDecoderModel gpu(config, kept, o);
    expect_prefill_and_decode_agree(gpu, cpu, 8e-2);
  }
}

// A batched decode step over FP8 weights (16 sequences: the o projection on the 128-column
// block-scaled GEMM, per-channel and 128 x 128 block checkpoints at head_dim 128) writes the o
// projection's FP8 input from the attention epilogue (AttentionOpArgs::out_fp8, bit for bit the
// quantization pass it replaces: decode_fp8_rows_gpu_test) and matches the CPU decoder over the
// dequantized checkpoint, as the one-sequence steps do.
TEST(DeviceDecoderModelFp8Weights, BatchedDecodeWritesTheOInputInAttention) {
  for (const int32_t block : {0, 128}) {
    SCOPED_TRACE(block > 0 ? "128 x 128 blocks" : "per channel");
    TinyModelSpec spec;
    spec.architecture = ModelArchitecture::kQwen3;
    spec.head_dim = 128;
    spec.num_q_heads = 8;  // the o projection: 1024 -> 512
    spec.num_kv_heads = 2;
    spec.hidden_size = 512;
    spec.intermediate_size = 1024;
    spec.fp8_weights = true;
    spec.fp8_block = block;
    const std::optional<Fp8TinyModel> model =
        load_fp8_tiny_model(spec, str_cat("fp8w_batched_", block));
    if (!model) GTEST_SKIP() << "FP8 weights: sm_90+";
    const auto& [config, dequantized, kept] = *model;
    const DecoderModelOptions o = fp8_tiny_model_options();
    DecoderModel cpu(config, dequantized, o);
    DeviceDecoderModel gpu(config, kept, o);

    expect_batched_decode_matches_cpu(gpu, cpu, 16, [&] {
      EXPECT_EQ(gpu.attention_fp8_row_layers(), 0) << "a prefill step quantizes the o input itself";
    });
    // Per-channel weights take 128-column activation scales on sm_90 only (the runner's
    // channel_groups); blocks on every GPU that keeps FP8 weights.
    if (block > 0 || current_sm() == 90) {
      EXPECT_GE(gpu.attention_fp8_row_layers(), config.num_layers)
          << "the decode step's attention did not write the o projection's input";
    }
  }
}

// Decode steps of 3 and 4 sequences over FP8 weights where the down projection (8192 -> 2048,
// 16 Mi elements) takes the FP8 GEMM (linear_fp8_streams streams at 3-4 tokens only weights of
// at most 8 Mi elements), its input written by SwiGLU with the GEMM's padded rows, while qkv and
// o stream: the runner still matches the CPU decoder, per channel and with 128 x 128 blocks.
TEST(DeviceDecoderModelFp8Weights, FewSequenceStepsMixStreamedAndGemmLayers) {
  ASSERT_FALSE(linear_fp8_streams(3, 8192, 2048)) << "the down projection must take the GEMM";
  ASSERT_TRUE(linear_fp8_streams(4, 2048, 3072)) << "qkv must stream";
  for (const int32_t block : {0, 128}) {
    SCOPED_TRACE(block > 0 ? "128 x 128 blocks" : "per channel");
    TinyModelSpec spec;
    spec.head_dim = 128;
    spec.num_q_heads = 16;  // qkv 2048 -> 3072, o 2048 -> 2048
    spec.num_kv_heads = 4;
    spec.hidden_size = 2048;
    spec.intermediate_size = 8192;
    spec.fp8_weights = true;
    spec.fp8_block = block;
    const std::optional<Fp8TinyModel> model =
        load_fp8_tiny_model(spec, str_cat("fp8w_few_", block));
    if (!model) GTEST_SKIP() << "FP8 weights: sm_90+";
    const auto& [config, dequantized, kept] = *model;
    const DecoderModelOptions o = fp8_tiny_model_options();
    DecoderModel cpu(config, dequantized, o);
    DeviceDecoderModel gpu(config, kept, o);
    for (const int32_t seqs : {3, 4})
      expect_batched_decode_matches_cpu(gpu, cpu, seqs, [] {});
  }
}

// Per-KV-head checkpoint scales reach the GPU kernels: head 0's k/v scales are so small that
// its FP8 cache saturates (the logits move far from unit scales), head 1's are ordinary; the GPU
// runner matches the CPU decoder, which applies them per head. Head dims 64 and 128 (the Hopper
// kernels on sm_90).
TEST(DeviceDecoderModelScales, PerHeadCheckpointScalesMatchTheCpuDecoder) {
  for (const int32_t head_dim : {64, 128}) {
    TinyModelSpec spec;
    spec.head_dim = head_dim;
    std::vector<std::pair<std::string, std::vector<float>>> extra;
    for (int32_t layer = 0; layer < spec.num_layers; ++layer) {
      const std::string prefix = str_cat("model.layers.", layer, ".self_attn.");
      extra.push_back({prefix + "k_scale", {0.002f, 0.05f + 0.01f * static_cast<float>(layer)}});
      extra.push_back({prefix + "v_scale", {0.001f, 0.04f}});
    }
    const std::string dir =
        testing_support::model_with_scales(str_cat("per_head_hd", head_dim), extra, spec);
    const Checkpoint checkpoint(dir);
    const ModelConfig config = read_model_config(checkpoint.config_path());
    const ModelWeights weights = ModelWeights::load(config, checkpoint);
    DecoderModelOptions o;
    o.kv_dtype = DType::kFP8E4M3;
    o.num_pages = 16;
    o.max_model_len = 256;
    DecoderModel cpu(config, weights, o);
    DeviceDecoderModel gpu(config, weights, o);
    std::vector<int32_t> ids;
    for (int32_t i = 0; i < 41; ++i)
      ids.push_back(6 + (i * 53) % 500);
    const std::vector<int32_t> pages = {2, 5, 7};
    const std::vector<ScheduledSequence> prefill = {{pages, 0, 40}};
    const AttentionMetadata pm = build_attention_metadata({}, prefill, 16, 16);
    const std::vector<int32_t> rows = {39};
    const std::span<const int32_t> prompt(ids.data(), 40);
    const std::vector<float> want = cpu.forward(prompt, pm, rows);
    EXPECT_LT(rel_l2<float>(gpu.forward(prompt, pm, rows), want), 3e-2) << head_dim;
    const std::vector<ScheduledSequence> decode = {{pages, 40, 1}};
    const AttentionMetadata dm = build_attention_metadata(decode, {}, 16, 16);
    const std::vector<int32_t> last = {ids[40]};
    const std::vector<int32_t> row0 = {0};
    const std::vector<float> want_decode = cpu.forward(last, dm, row0);
    EXPECT_LT(rel_l2<float>(gpu.forward(last, dm, row0), want_decode), 3e-2) << head_dim;

    // The test's power: without the scales (unit k/v scales) the CPU logits are far away.
    const std::string plain_dir =
        testing_support::model_with_scales(str_cat("unit_hd", head_dim), {}, spec);
    const Checkpoint plain_checkpoint(plain_dir);
    const ModelWeights plain_weights = ModelWeights::load(config, plain_checkpoint);
    DecoderModel unit(config, plain_weights, o);
    EXPECT_GT(rel_l2<float>(unit.forward(prompt, pm, rows), want), 0.1) << head_dim;
  }
}

// Decode steps under CUDA graphs (padded to the ladder's sizes, the split count of the longest
// sequence frozen in) against the same steps run eagerly and on the CPU decoder: five sequences
// of different lengths, then decode steps of 5, 3, 1 and 5 of them (sizes 8, 4, 1, 8).
TEST(DeviceDecoderModelGraphs, DecodeStepsMatchEagerAndCpu) {
  for (const DType kv : {DType::kBF16, DType::kFP8E4M3}) {
    TinyModelSpec spec;
    spec.head_dim = 128;
    spec.num_q_heads = 8;
    spec.num_kv_heads = 2;
    spec.hidden_size = 512;
    const std::string dir = testing_support::scratch_dir("quench_device_model_test",
                                                         str_cat("graphs_", dtype_name(kv)));
    write_tiny_model(dir, spec);
    const Checkpoint checkpoint(dir);
    const ModelConfig config = read_model_config(checkpoint.config_path());
    const ModelWeights weights = ModelWeights::load(config, checkpoint);
    DecoderModelOptions o;
    o.kv_dtype = kv;
    o.page_size = 16;
    o.num_pages = 64;
    o.max_model_len = 512;
    o.max_num_seqs = 8;
    o.max_num_batched_tokens = 256;
    DecoderModel cpu(config, weights, o);
    DeviceDecoderModel graphs(config, weights, o);
    ASSERT_TRUE(graphs.cuda_graphs_captured());
    o.enforce_eager = true;
    DeviceDecoderModel eager(config, weights, o);
    EXPECT_FALSE(eager.cuda_graphs_captured());
    const int32_t max_pages = 512 / 16;

    const std::vector<int32_t> lengths = {3, 17, 40, 1, 70};
    std::vector<std::vector<int32_t>> pages(lengths.size());
    int32_t next_page = 1;
    for (auto& p : pages)
      for (int32_t i = 0; i < 6; ++i)
        p.push_back(next_page++);
    std::vector<int32_t> len(lengths.begin(), lengths.end());
    // The prompts in one eager prefill step on every runner.
    std::vector<ScheduledSequence> prefill;
    std::vector<int32_t> ids, rows;
    for (size_t i = 0; i < len.size(); ++i) {
      prefill.push_back({pages[i], 0, len[i]});
      for (int32_t j = 0; j < len[i]; ++j)
        ids.push_back(6 + (static_cast<int32_t>(i) * 101 + j * 37) % 500);
      rows.push_back(static_cast<int32_t>(ids.size()) - 1);
    }
    const AttentionMetadata pm = build_attention_metadata({}, prefill, 16, 64, max_pages);
    cpu.forward(ids, pm, rows);
    graphs.forward(ids, pm, rows);
    eager.forward(ids, pm, rows);
    int32_t step = 0;
    for (const std::vector<size_t>& members :
         std::vector<std::vector<size_t>>{{0, 1, 2, 3, 4}, {4, 0, 2}, {3}, {0, 1, 2, 3, 4}}) {
      std::vector<ScheduledSequence> decode;
      std::vector<int32_t> tokens;
      for (size_t i : members) {
        decode.push_back({pages[i], len[i], 1});
        tokens.push_back(7 + (step * 13 + static_cast<int32_t>(i) * 29) % 500);
        ++len[i];
      }
      const AttentionMetadata dm = build_attention_metadata(decode, {}, 16, 64, max_pages);
      const std::vector<int32_t> out_rows =
          iota_rows_for_test(static_cast<int32_t>(members.size()));
      const std::vector<float> want = cpu.forward(tokens, dm, out_rows);
      const std::vector<float> got = graphs.forward(tokens, dm, out_rows);
      const std::vector<float> plain = eager.forward(tokens, dm, out_rows);
      // The graph and the eager step differ only in the decode kernel's split count (fp32 partial
      // sums in another order): far below bf16 rounding of the activations.
      EXPECT_LT(rel_l2<float>(got, plain), 5e-3) << dtype_name(kv) << " step " << step;
      EXPECT_LT(rel_l2<float>(got, want), is_fp8(kv) ? 3e-2 : 1e-2)
          << dtype_name(kv) << " step " << step;
      // The same step again (the same tokens at the same slots: the cache writes repeat) with
      // the rows picked in turn by argmax, by a draw and as logits: the device's picks are those
      // of the logits copied above, and the logits rows come back whole.
      std::vector<RowPick> picks(out_rows.size());
      std::vector<int32_t> expect_ids(out_rows.size(), -1);
      std::vector<float> expect_logits;
      const auto vocab = static_cast<size_t>(config.vocab_size);
      for (size_t i = 0; i < picks.size(); ++i) {
        const std::span<const float> row(got.data() + i * vocab, vocab);
        if ((i + static_cast<size_t>(step)) % 3 == 0) {
          picks[i].kind = RowPick::Kind::kArgmax;
          argmax_rows_reference(row.data(), 1, config.vocab_size, &expect_ids[i]);
        } else if ((i + static_cast<size_t>(step)) % 3 == 1) {
          picks[i].kind = RowPick::Kind::kDraw;
          picks[i].sampler = RowSampler{0.9f, i % 2 == 0 ? 40 : 0, 0.95f, 0.0f, 1000u + i};
          expect_ids[i] = sample_row_reference(row, picks[i].sampler);
        } else {
          expect_logits.insert(expect_logits.end(), row.begin(), row.end());
        }
      }
      const StepLogits picked = graphs.forward_for_sampling(tokens, dm, out_rows, picks);
      EXPECT_EQ(picked.picked, expect_ids) << dtype_name(kv) << " step " << step;
      EXPECT_EQ(picked.logits, expect_logits) << dtype_name(kv) << " step " << step;
      ++step;
    }
    // One decode step of `rows` query rows for each of `members` on the graph runner against the
    // CPU decoder.
    const auto expect_step_matches_cpu = [&](const std::vector<size_t>& members, int32_t rows,
                                             const char* what) {
      std::vector<ScheduledSequence> seqs;
      std::vector<int32_t> tokens;
      for (size_t i : members) {
        seqs.push_back({pages[i], len[i], rows});
        for (int32_t j = 0; j < rows; ++j)
          tokens.push_back(11 + (j * 53 + static_cast<int32_t>(i) * 7) % 500);
        len[i] += rows;
      }
      const AttentionMetadata m = build_attention_metadata(seqs, {}, 16, 64, max_pages);
      const std::vector<int32_t> all_rows = iota_rows_for_test(static_cast<int32_t>(tokens.size()));
      EXPECT_LT(
          rel_l2<float>(graphs.forward(tokens, m, all_rows), cpu.forward(tokens, m, all_rows)),
          is_fp8(kv) ? 3e-2 : 1e-2)
          << dtype_name(kv) << " " << what;
    };
    // An eager step with drafts (8 query rows for each sequence: 40 rows, each with two splits
    // of its <= 81 keys, are more split partials than the largest graph's 8 rows x 8 splits)
    // fits the workspace sized at start; the next decode step runs its graph without a capture
    // again (a grown workspace would capture again there).
    expect_step_matches_cpu({0, 1, 2, 3, 4}, 8, "drafts");
    expect_step_matches_cpu({0, 1, 4}, 1, "after drafts");
    EXPECT_EQ(graphs.cuda_graph_captures(), 1) << dtype_name(kv);
  }
}

// A prefill step whose logit rows outnumber one lm_head pass (prompt logprobs ask for every prompt
// row) runs the lm_head in passes over one buffer: its logits match the CPU decoder's, and the
// same step with rows picked by argmax, by draws (each with or without its token's logprobs and
// logit edits), as
// logits and as logprobs in both passes returns the picks of those logits (logprobs as
// row_logprobs_reference gives them) and the logits rows whole.
TEST(DeviceDecoderModelLogitPasses, PromptRowsPastOnePassMatchTheCpu) {
  TinyModelSpec spec;
  const std::string dir = testing_support::scratch_dir("quench_device_model_test", "logit_passes");
  write_tiny_model(dir, spec);
  const Checkpoint checkpoint(dir);
  const ModelConfig config = read_model_config(checkpoint.config_path());
  const ModelWeights weights = ModelWeights::load(config, checkpoint);
  DecoderModelOptions o;
  o.kv_dtype = DType::kBF16;
  o.page_size = 16;
  o.num_pages = 80;
  o.max_model_len = 1024;
  DecoderModel cpu(config, weights, o);
  DeviceDecoderModel gpu(config, weights, o);
  const int32_t per_pass = DeviceDecoderModel::logit_rows_per_pass(o.max_num_seqs);
  const int32_t n = per_pass + per_pass / 2 + 3;  // two passes, the second not full
  ASSERT_LE(n, o.max_model_len);
  std::vector<int32_t> ids, pages;
  for (int32_t i = 0; i < n; ++i)
    ids.push_back(6 + (i * 37) % 500);
  for (int32_t p = 0; p * 16 < n; ++p)
    pages.push_back(1 + (p * 7) % 79);  // a permutation of 1..79: 7 and 79 are coprime
  const std::vector<ScheduledSequence> prefill = {{pages, 0, n}};
  const AttentionMetadata m = build_attention_metadata({}, prefill, 16, 80);
  const std::vector<int32_t> rows = iota_rows_for_test(n);
  const std::vector<float> got = gpu.forward(ids, m, rows);
  const std::vector<float> want = cpu.forward(ids, m, rows);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_LT(rel_l2<float>(got, want), 1e-2);
  // Each pass on its own: a pass computed from the wrong hidden rows would still pass the
  // whole-step norm above if it were the short one.
  const auto vocab = static_cast<size_t>(config.vocab_size);
  const auto split = static_cast<size_t>(per_pass) * vocab;
  EXPECT_LT(rel_l2<float>(std::span<const float>(got).subspan(split),
                          std::span<const float>(want).subspan(split)),
            1e-2);

  std::vector<RowPick> picks(rows.size());
  std::vector<int32_t> expect_ids(rows.size(), -1);
  std::vector<float> expect_logits;
  std::vector<TokenLogprobs> expect_logprobs;
  std::deque<RowLogitEdits> edits;  // addresses stay put as it grows
  std::deque<std::vector<float>> edited_rows;
  for (size_t i = 0; i < picks.size(); ++i) {
    const std::span<const float> row(got.data() + i * vocab, vocab);
    // Every other argmax or draw after a request's logit edits (its pick from the edited row,
    // its logprobs from the model's): the row's argmax masked, a bias, a repetition penalty,
    // and on some a JSON-like mask allowing only the ids below 300.
    std::span<const float> pick_row = row;
    if (i % 4 <= 1 && (i / 4) % 2 == 1) {
      RowLogitEdits& e = edits.emplace_back();
      int32_t best = 0;
      argmax_rows_reference(row.data(), 1, config.vocab_size, &best);
      e.edits.push_back(LogitEdit{best, 0.0f, 1.0f, 0.0f, 1u});
      for (int32_t t : {3, 77, 250, 400}) {
        if (t == best) continue;
        e.edits.push_back(LogitEdit{t, t == 77 ? 2.5f : 0.0f, 1.4f, t == 400 ? 0.6f : 0.0f, 0u});
      }
      std::sort(e.edits.begin(), e.edits.end(),
                [](const LogitEdit& a, const LogitEdit& b) { return a.token < b.token; });
      if (i % 3 == 0) {
        e.has_allowed = true;
        e.allowed_bits.assign((300 + 31) / 32, 0u);
        for (int32_t t = 0; t < 300; ++t)
          e.allowed_bits[static_cast<size_t>(t / 32)] |= 1u << (t % 32);
      }
      edited_rows.emplace_back(row.begin(), row.end());
      apply_logit_edits_reference(edited_rows.back(), e);
      pick_row = edited_rows.back();
      picks[i].edits = &e;
    }
    if (i % 4 == 0) {
      picks[i].kind = RowPick::Kind::kArgmax;
      argmax_rows_reference(pick_row.data(), 1, config.vocab_size, &expect_ids[i]);
    } else if (i % 4 == 1) {
      picks[i].kind = RowPick::Kind::kDraw;
      picks[i].sampler = RowSampler{0.9f, i % 2 == 0 ? 40 : 0, 0.95f, 0.0f, 7000u + i};
      expect_ids[i] = sample_row_reference(pick_row, picks[i].sampler);
    }
    if (i % 4 <= 1) {
      // An argmax or a draw that also asks for its token's logprobs (a request's `logprobs`), on
      // two rows of three.
      picks[i].top = (i / 4) % 3 == 0 ? -1 : static_cast<int32_t>(i % 21);
      if (picks[i].top >= 0)
        expect_logprobs.push_back(row_logprobs_reference(row, expect_ids[i], picks[i].top));
    } else if (i % 4 == 2) {
      expect_logits.insert(expect_logits.end(), row.begin(), row.end());
    } else {
      // A prompt row's logprobs: a known token and 0 to 20 top entries.
      picks[i].kind = RowPick::Kind::kLogprobs;
      picks[i].token = static_cast<int32_t>((i * 13) % vocab);
      picks[i].top = static_cast<int32_t>(i % 21);
      expect_logprobs.push_back(row_logprobs_reference(row, picks[i].token, picks[i].top));
    }
  }
  const StepLogits picked = gpu.forward_for_sampling(ids, m, rows, picks);
  EXPECT_EQ(picked.picked, expect_ids);
  EXPECT_EQ(picked.logits, expect_logits);
  // Logprobs to fp32 rounding of the device's sum of exponentials; the same top ids.
  ASSERT_EQ(picked.logprobs.size(), expect_logprobs.size());
  for (size_t j = 0; j < expect_logprobs.size(); ++j) {
    const TokenLogprobs& g = picked.logprobs[j];
    const TokenLogprobs& w = expect_logprobs[j];
    EXPECT_NEAR(g.logprob, w.logprob, 5e-5 + 1e-6 * std::fabs(w.logprob)) << "logprobs row " << j;
    ASSERT_EQ(g.top.size(), w.top.size()) << "logprobs row " << j;
    for (size_t k = 0; k < w.top.size(); ++k) {
      EXPECT_EQ(g.top[k].first, w.top[k].first) << "logprobs row " << j << " entry " << k;
      EXPECT_NEAR(g.top[k].second, w.top[k].second, 5e-5 + 1e-6 * std::fabs(w.top[k].second));
    }
  }
  // The same step with its edits written by fill_edits while the forward runs (as the engine
  // builds them): the same picks; then a fill that throws leaves the runner able to run the step.
  std::deque<RowLogitEdits> late(edits.size());
  std::vector<RowPick> late_picks = picks;
  size_t filled = 0;
  for (RowPick& p : late_picks)
    if (p.edits != nullptr) p.edits = &late[filled++];
  ASSERT_EQ(filled, late.size());
  ASSERT_GT(filled, 0u);
  const auto fill = [&] { std::copy(edits.begin(), edits.end(), late.begin()); };
  const StepLogits again = gpu.forward_for_sampling(ids, m, rows, late_picks, fill);
  EXPECT_EQ(again.picked, expect_ids);
  EXPECT_EQ(again.logits, expect_logits);
  EXPECT_THROW(gpu.forward_for_sampling(ids, m, rows, late_picks, [] { fail("the fill failed"); }),
               Error);
  const StepLogits after = gpu.forward_for_sampling(ids, m, rows, late_picks, fill);
  EXPECT_EQ(after.picked, expect_ids);
}

// The engine on the GPU over the tiny model written to `dir` (256-token requests, 64-token steps).
EngineOptions tiny_gpu_engine(const std::string& dir) {
  EngineOptions o;
  o.model_dir = dir;
  o.device = EngineDevice::kGpu;
  o.max_model_len = 256;
  o.max_num_batched_tokens = 64;
  return o;
}

TEST(DeviceEngine, GeneratesEveryRequestInFullOnTheGpu) {
  const std::string dir = testing_support::scratch_dir("quench_device_model_test", "engine");
  write_tiny_model(dir, TinyModelSpec{});
  EngineOptions o = tiny_gpu_engine(dir);
  o.num_kv_pages = 96;
  LlmEngine engine(o);
  EXPECT_STREQ(engine.model().device_name(), "gpu");
  SamplingParams s;
  s.max_tokens = 20;
  s.ignore_eos = true;
  std::vector<std::vector<int32_t>> prompts;
  for (int32_t len : {3, 90, 17, 1})
    prompts.push_back(std::vector<int32_t>(static_cast<size_t>(len), 100 + len));
  const std::vector<RequestOutput> outputs = engine.generate(prompts, s);
  for (const RequestOutput& out : outputs) {
    EXPECT_EQ(out.output.size(), 20u);
    for (int32_t t : out.output)
      EXPECT_TRUE(t >= 0 && t < 512);
  }
  // The same requests with decode steps run eagerly (the engine above ran them as CUDA graphs):
  // greedy tokens agree but where the split count's rounding breaks a near tie.
  o.enforce_eager = true;
  LlmEngine eager(o);
  const std::vector<RequestOutput> eager_outputs = eager.generate(prompts, s);
  int64_t agreeing = 0;
  for (size_t i = 0; i < outputs.size(); ++i) {
    size_t k = 0;
    while (k < 20 && outputs[i].output[k] == eager_outputs[i].output[k])
      ++k;
    agreeing += static_cast<int64_t>(k);
  }
  EXPECT_GE(agreeing, 60) << "of 80 greedy tokens before the first difference";
}

// Sampled requests whose rows go through the logit-edits path on the GPU (a logit bias of 0 on
// every request: an edit that changes no logit) draw the tokens of the plain path for the same
// seeds: apply_logit_edits_cuda and the draws over edited rows leave such rows as they are.
// (sample_rows_cuda against the host's sampler is SampleRowsGpu's.)
TEST(DeviceEngine, DrawsThroughZeroEditsAreThePlainDraws) {
  const std::string dir = testing_support::scratch_dir("quench_device_model_test", "draws");
  write_tiny_model(dir, TinyModelSpec{});
  EngineOptions o = tiny_gpu_engine(dir);
  o.num_kv_pages = 96;
  std::vector<std::vector<int32_t>> prompts;
  for (int32_t len : {3, 40, 17, 1})
    prompts.push_back(std::vector<int32_t>(static_cast<size_t>(len), 100 + len));
  for (const auto& [top_k, top_p] : {std::pair{0, 1.0f}, {50, 1.0f}, {0, 0.9f}, {20, 0.8f}}) {
    SamplingParams s;
    s.max_tokens = 24;
    s.ignore_eos = true;
    s.temperature = 0.9f;
    s.top_k = top_k;
    s.top_p = top_p;
    s.seed = 1234;
    LlmEngine device_draws(o);
    const std::vector<RequestOutput> drawn = device_draws.generate(prompts, s);
    s.logit_bias = {{0, 0.0f}};
    LlmEngine edited_draws(o);
    const std::vector<RequestOutput> edited = edited_draws.generate(prompts, s);
    ASSERT_EQ(drawn.size(), edited.size());
    for (size_t i = 0; i < drawn.size(); ++i) {
      EXPECT_EQ(drawn[i].output, edited[i].output)
          << "request " << i << " top_k " << top_k << " top_p " << top_p;
    }
  }
}

// Logprobs computed on the GPU (generated tokens' `logprobs` beside their argmax or draw, and
// prompt_logprobs): rows with edits (a logit bias of 0: each row kept aside, then edited) give
// the logprobs of rows without, and the prompt rows' are the CPU engine's at bf16 rounding.
TEST(DeviceEngine, LogprobsThroughZeroEditsAreThePlainOnes) {
  const std::string dir = testing_support::scratch_dir("quench_device_model_test", "logprobs");
  write_tiny_model(dir, TinyModelSpec{});
  EngineOptions o = tiny_gpu_engine(dir);
  o.num_kv_pages = 96;
  std::vector<std::vector<int32_t>> prompts;
  for (int32_t len : {3, 40, 17})
    prompts.push_back(std::vector<int32_t>(static_cast<size_t>(len), 100 + len));
  const auto near = [](float a, float b) { return std::fabs(a - b) <= 5e-5 + 1e-6 * std::fabs(b); };
  for (const float temperature : {0.0f, 0.9f}) {
    SamplingParams s;
    s.max_tokens = 12;
    s.ignore_eos = true;
    s.temperature = temperature;
    s.seed = 99;
    s.logprobs = 4;
    s.prompt_logprobs = 2;
    LlmEngine device_logprobs(o);
    const std::vector<RequestOutput> got = device_logprobs.generate(prompts, s);
    SamplingParams zero_bias = s;
    zero_bias.logit_bias = {{0, 0.0f}};
    LlmEngine edited_logprobs(o);
    const std::vector<RequestOutput> want = edited_logprobs.generate(prompts, zero_bias);
    EngineOptions cpu_options = o;
    cpu_options.device = EngineDevice::kCpu;
    LlmEngine cpu(cpu_options);
    const std::vector<RequestOutput> on_cpu = cpu.generate(prompts, s);
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].output, want[i].output) << "request " << i << " T " << temperature;
      ASSERT_EQ(got[i].output_logprobs.size(), want[i].output_logprobs.size());
      for (size_t t = 0; t < got[i].output_logprobs.size(); ++t) {
        const TokenLogprobs& g = got[i].output_logprobs[t];
        const TokenLogprobs& w = want[i].output_logprobs[t];
        EXPECT_TRUE(near(g.logprob, w.logprob)) << i << " token " << t;
        ASSERT_EQ(g.top.size(), 4u);
        for (size_t k = 0; k < g.top.size(); ++k) {
          EXPECT_EQ(g.top[k].first, w.top[k].first) << i << " token " << t << " entry " << k;
          EXPECT_TRUE(near(g.top[k].second, w.top[k].second)) << i << " token " << t;
        }
      }
      // Every prompt token after the first, near the CPU engine's (bf16 activations apart).
      ASSERT_EQ(got[i].prompt_logprobs.size(), prompts[i].size());
      for (size_t t = 1; t < prompts[i].size(); ++t) {
        ASSERT_TRUE(got[i].prompt_logprobs[t].has_value()) << i << " prompt token " << t;
        EXPECT_EQ(got[i].prompt_logprobs[t]->top.size(), 2u);
        EXPECT_NEAR(got[i].prompt_logprobs[t]->logprob, on_cpu[i].prompt_logprobs[t]->logprob, 2e-2)
            << i << " prompt token " << t;
      }
    }
  }
}

// Without --num-kv-pages the cache takes what --gpu-memory-utilization leaves: within the share
// (weights, step buffers and cache together), and the engine still serves requests.
TEST(DeviceEngine, SizesTheKvCacheFromGpuMemoryUtilization) {
  const std::string dir = testing_support::scratch_dir("quench_device_model_test", "utilization");
  write_tiny_model(dir, TinyModelSpec{});
  const CudaMemoryInfo before = current_cuda_memory_info("the test");
  EngineOptions o = tiny_gpu_engine(dir);
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
