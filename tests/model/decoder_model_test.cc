// The CPU decoder against a dense fp64 forward written out here (no paging, no bf16 rounding, no
// FP8): Llama-3 with its RoPE scaling, Qwen3 with q/k norm and tied embeddings, and Qwen2 with its
// q/k/v biases. Then the paged
// path against itself, bit for bit: a decode step after a prefill equals one longer prefill,
// chunked prefill equals one chunk, a mixed decode + prefill step equals its sequences alone, and
// the FP8 cache moves the logits a little (not zero, not far).
#include "quench/model/decoder_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "harness/expect_error.h"
#include "harness/rel_l2.h"
#include "harness/scratch_dir.h"
#include "quench/model/tiny_model.h"
#include "quench/numerics/bf16.h"

namespace quench {
namespace {

using testing_support::rel_l2;

using Matrix = std::vector<std::vector<double>>;  // [rows][cols]

double w_at(const Bf16Weight& w, int64_t i) {
  return bf16_bits_to_float(w.data()[i]);
}

// x [T][in] times weight [out][in]^T.
Matrix matmul(const Matrix& x, const Bf16Weight& w, int32_t out) {
  Matrix y(x.size(), std::vector<double>(static_cast<size_t>(out)));
  const auto in = static_cast<int64_t>(x[0].size());
  for (size_t t = 0; t < x.size(); ++t)
    for (int32_t n = 0; n < out; ++n) {
      double s = 0.0;
      for (int64_t k = 0; k < in; ++k)
        s += x[t][static_cast<size_t>(k)] * w_at(w, n * in + k);
      y[t][static_cast<size_t>(n)] = s;
    }
  return y;
}

// RMSNorm of each `width` slice of each row.
Matrix rms_norm(Matrix x, const Bf16Weight& w, int32_t width, double eps) {
  for (auto& row : x)
    for (size_t h = 0; h < row.size(); h += static_cast<size_t>(width)) {
      double ss = 0.0;
      for (int32_t i = 0; i < width; ++i)
        ss += row[h + i] * row[h + i];
      const double inv = 1.0 / std::sqrt(ss / width + eps);
      for (int32_t i = 0; i < width; ++i)
        row[h + i] *= inv * w_at(w, i);
    }
  return x;
}

// Neox RoPE of every head of every row (row t at position t).
void rope(Matrix& x, const ModelConfig& c) {
  const int32_t d = c.head_dim();
  for (size_t t = 0; t < x.size(); ++t)
    for (size_t h = 0; h < x[t].size(); h += static_cast<size_t>(d))
      for (int32_t i = 0; i < d / 2; ++i) {
        const double angle = static_cast<double>(t) * rope_inv_freq(c.rope, i);
        const double a = x[t][h + i], b = x[t][h + i + d / 2];
        x[t][h + i] = a * std::cos(angle) - b * std::sin(angle);
        x[t][h + i + d / 2] = b * std::cos(angle) + a * std::sin(angle);
      }
}

// Logits of every row of one sequence at positions 0..T-1.
Matrix dense_forward(const ModelConfig& c, const ModelWeights& w, const std::vector<int32_t>& ids) {
  const int32_t dm = c.hidden_size, hq = c.num_q_heads(), hkv = c.num_kv_heads(), hd = c.head_dim();
  const size_t T = ids.size();
  Matrix x(T, std::vector<double>(static_cast<size_t>(dm)));
  for (size_t t = 0; t < T; ++t)
    for (int32_t i = 0; i < dm; ++i)
      x[t][static_cast<size_t>(i)] = w_at(w.embed_tokens, int64_t{ids[t]} * dm + i);
  for (const DecoderLayerWeights& l : w.layers) {
    const Matrix h = rms_norm(x, l.input_norm, dm, c.rms_norm_eps);
    Matrix q = matmul(h, l.q_proj, hq * hd), k = matmul(h, l.k_proj, hkv * hd);
    Matrix v = matmul(h, l.v_proj, hkv * hd);
    if (c.qkv_bias) {
      for (auto [m, b] :
           {std::pair{&q, &l.q_bias}, std::pair{&k, &l.k_bias}, std::pair{&v, &l.v_bias}})
        for (auto& row : *m)
          for (size_t i = 0; i < row.size(); ++i)
            row[i] += w_at(*b, static_cast<int64_t>(i));
    }
    if (c.qk_norm) {
      q = rms_norm(q, l.q_norm, hd, c.rms_norm_eps);
      k = rms_norm(k, l.k_norm, hd, c.rms_norm_eps);
    }
    rope(q, c);
    rope(k, c);
    Matrix attn(T, std::vector<double>(static_cast<size_t>(hq * hd)));
    for (int32_t head = 0; head < hq; ++head) {
      const size_t qo = static_cast<size_t>(head * hd),
                   ko = static_cast<size_t>(head / (hq / hkv) * hd);
      for (size_t t = 0; t < T; ++t) {
        std::vector<double> p(t + 1);
        double top = -1e300, sum = 0.0;
        for (size_t j = 0; j <= t; ++j) {
          double s = 0.0;
          for (int32_t i = 0; i < hd; ++i)
            s += q[t][qo + i] * k[j][ko + i];
          p[j] = s / std::sqrt(static_cast<double>(hd));
          top = std::max(top, p[j]);
        }
        for (double& e : p)
          sum += (e = std::exp(e - top));
        for (size_t j = 0; j <= t; ++j)
          for (int32_t i = 0; i < hd; ++i)
            attn[t][qo + i] += p[j] / sum * v[j][ko + i];
      }
    }
    const Matrix o = matmul(attn, l.o_proj, dm);
    for (size_t t = 0; t < T; ++t)
      for (int32_t i = 0; i < dm; ++i)
        x[t][static_cast<size_t>(i)] += o[t][static_cast<size_t>(i)];
    const Matrix h2 = rms_norm(x, l.post_attention_norm, dm, c.rms_norm_eps);
    Matrix gate = matmul(h2, l.gate_proj, c.intermediate_size);
    const Matrix up = matmul(h2, l.up_proj, c.intermediate_size);
    for (size_t t = 0; t < T; ++t)
      for (size_t i = 0; i < gate[t].size(); ++i)
        gate[t][i] = gate[t][i] / (1.0 + std::exp(-gate[t][i])) * up[t][i];
    const Matrix down = matmul(gate, l.down_proj, dm);
    for (size_t t = 0; t < T; ++t)
      for (int32_t i = 0; i < dm; ++i)
        x[t][static_cast<size_t>(i)] += down[t][static_cast<size_t>(i)];
  }
  return matmul(rms_norm(x, w.final_norm, dm, c.rms_norm_eps), w.lm_head, c.vocab_size);
}

struct TinyModel {
  explicit TinyModel(const TinyModelSpec& spec, const std::string& name)
      : dir(testing_support::scratch_dir("quench_decoder_model_test", name)),
        checkpoint((write_tiny_model(dir, spec), dir)),
        config(read_model_config(checkpoint.config_path())),
        weights(ModelWeights::load(config, checkpoint)) {}
  DecoderModel model(DType kv_dtype) const {
    DecoderModelOptions o;
    o.kv_dtype = kv_dtype;
    o.page_size = 16;
    o.num_pages = 32;
    o.max_model_len = 256;
    return DecoderModel(config, weights, o);
  }
  std::string dir;
  Checkpoint checkpoint;
  ModelConfig config;
  ModelWeights weights;
};

std::vector<int32_t> random_ids(int32_t n, int32_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> id(0, vocab - 1);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t& v : ids)
    v = id(rng);
  return ids;
}

// Runs chunks of sequences in one step: decode steps (1 row) then prefill chunks. Returns the
// logits of the last row of each, in that order.
struct Chunk {
  std::vector<int32_t> pages;
  std::vector<int32_t> ids;  // all tokens of the sequence so far
  int32_t cached = 0;        // tokens already in the cache; the chunk is ids[cached:]
};

std::vector<float> run_step(DecoderModel& model, const std::vector<Chunk>& decode,
                            const std::vector<Chunk>& prefill) {
  std::vector<ScheduledSequence> d, p;
  std::vector<int32_t> tokens, logit_rows;
  for (const auto* list : {&decode, &prefill})
    for (const Chunk& c : *list) {
      const auto n = static_cast<int32_t>(c.ids.size()) - c.cached;
      (list == &decode ? d : p).push_back({c.pages, c.cached, n});
      tokens.insert(tokens.end(), c.ids.begin() + c.cached, c.ids.end());
      logit_rows.push_back(static_cast<int32_t>(tokens.size()) - 1);
    }
  const AttentionMetadata m = build_attention_metadata(d, p, 16, model.options().num_pages);
  return model.forward(tokens, m, logit_rows);
}

class DecoderModelVsDense : public ::testing::TestWithParam<ModelArchitecture> {};

TEST_P(DecoderModelVsDense, LogitsOfEveryPromptRowMatchAnFp64Forward) {
  TinyModelSpec spec;
  spec.architecture = GetParam();
  spec.tie_word_embeddings = GetParam() == ModelArchitecture::kQwen3;
  spec.llama3_rope_scaling = GetParam() == ModelArchitecture::kLlama;
  const TinyModel tiny(spec, str_cat("dense_", static_cast<int>(GetParam())));
  DecoderModel model = tiny.model(DType::kBF16);
  const std::vector<int32_t> ids = random_ids(40, spec.vocab_size, 3);
  std::vector<ScheduledSequence> prefill = {{{1, 2, 3}, 0, 40}};
  const AttentionMetadata m = build_attention_metadata({}, prefill, 16, 32);
  const std::vector<int32_t> rows = {0, 17, 39};
  const std::vector<float> got = model.forward(ids, m, rows);
  const Matrix want = dense_forward(tiny.config, tiny.weights, ids);
  const auto vocab = static_cast<size_t>(spec.vocab_size);
  for (size_t i = 0; i < rows.size(); ++i) {
    const double err = rel_l2<double>(std::span<const float>(got.data() + i * vocab, vocab),
                                      want[static_cast<size_t>(rows[i])]);
    // bf16 activations between ops cost ~5e-3 here; a wrong rotation, head mapping or norm is O(1).
    EXPECT_LT(err, 1.5e-2) << "row " << rows[i];
  }
}

INSTANTIATE_TEST_SUITE_P(Architectures, DecoderModelVsDense,
                         ::testing::Values(ModelArchitecture::kLlama, ModelArchitecture::kQwen3,
                                           ModelArchitecture::kQwen2));

TEST(DecoderModel, DecodeAfterPrefillEqualsOneLongerPrefill) {
  const TinyModel tiny(TinyModelSpec{}, "decode_after_prefill");
  const std::vector<int32_t> ids = random_ids(21, 512, 5);
  DecoderModel one = tiny.model(DType::kBF16);
  const std::vector<float> want = run_step(one, {}, {{{1, 2}, ids, 0}});
  DecoderModel two = tiny.model(DType::kBF16);
  run_step(two, {}, {{{1, 2}, std::vector<int32_t>(ids.begin(), ids.end() - 1), 0}});
  const std::vector<float> got = run_step(two, {{{1, 2}, ids, 20}}, {});
  EXPECT_EQ(got, want);  // the same fp32 sums in the same order: bit for bit
}

TEST(DecoderModel, ChunkedPrefillEqualsOneChunk) {
  const TinyModel tiny(TinyModelSpec{}, "chunked");
  const std::vector<int32_t> ids = random_ids(50, 512, 6);
  DecoderModel one = tiny.model(DType::kFP8E4M3);
  const std::vector<float> want = run_step(one, {}, {{{4, 5, 6, 7}, ids, 0}});
  DecoderModel chunks = tiny.model(DType::kFP8E4M3);
  int32_t cached = 0;
  for (int32_t end : {13, 32, 49}) {
    run_step(chunks, {},
             {{{4, 5, 6, 7}, std::vector<int32_t>(ids.begin(), ids.begin() + end), cached}});
    cached = end;
  }
  const std::vector<float> got = run_step(chunks, {}, {{{4, 5, 6, 7}, ids, 49}});
  EXPECT_EQ(got, want);  // the same fp32 sums in the same order: bit for bit
}

TEST(DecoderModel, MixedStepEqualsItsSequencesAlone) {
  const TinyModel tiny(TinyModelSpec{}, "mixed");
  const std::vector<int32_t> a = random_ids(30, 512, 7), b = random_ids(25, 512, 8);
  // Alone: a's prefix then its decode step; b's prefill.
  DecoderModel alone = tiny.model(DType::kFP8E4M3);
  run_step(alone, {}, {{{1, 2}, std::vector<int32_t>(a.begin(), a.end() - 1), 0}});
  const std::vector<float> a_want = run_step(alone, {{{1, 2}, a, 29}}, {});
  const std::vector<float> b_want = run_step(alone, {}, {{{3, 4}, b, 0}});
  // Together in one step.
  DecoderModel mixed = tiny.model(DType::kFP8E4M3);
  run_step(mixed, {}, {{{1, 2}, std::vector<int32_t>(a.begin(), a.end() - 1), 0}});
  const std::vector<float> got = run_step(mixed, {{{1, 2}, a, 29}}, {{{3, 4}, b, 0}});
  EXPECT_EQ(std::vector<float>(got.begin(), got.begin() + 512), a_want);
  EXPECT_EQ(std::vector<float>(got.begin() + 512, got.end()), b_want);
}

TEST(DecoderModel, Fp8CacheMovesLogitsALittle) {
  const TinyModel tiny(TinyModelSpec{}, "fp8");
  const std::vector<int32_t> ids = random_ids(40, 512, 9);
  DecoderModel bf16 = tiny.model(DType::kBF16);
  DecoderModel e4m3 = tiny.model(DType::kFP8E4M3);
  DecoderModel e5m2 = tiny.model(DType::kFP8E5M2);
  const std::vector<float> want = run_step(bf16, {}, {{{1, 2, 3}, ids, 0}});
  const double err_e4m3 = rel_l2<float>(run_step(e4m3, {}, {{{1, 2, 3}, ids, 0}}), want);
  const double err_e5m2 = rel_l2<float>(run_step(e5m2, {}, {{{1, 2, 3}, ids, 0}}), want);
  // Measured 2.3e-2 and 3.4e-2 (per-tensor scale 1, uniform-ish attention).
  EXPECT_GT(err_e4m3, 1e-3);
  EXPECT_LT(err_e4m3, 0.06);
  EXPECT_GT(err_e5m2, err_e4m3);  // two mantissa bits against three
  EXPECT_LT(err_e5m2, 0.12);
}

TEST(DecoderModel, BadInputsNameTheRowAndTheLimit) {
  const TinyModel tiny(TinyModelSpec{}, "bad");
  DecoderModel model = tiny.model(DType::kBF16);
  std::vector<ScheduledSequence> prefill = {{{1}, 0, 2}};
  const AttentionMetadata m = build_attention_metadata({}, prefill, 16, 32);
  const std::vector<int32_t> rows = {1};
  EXPECT_QUENCH_ERROR(model.forward(std::vector<int32_t>{3, 512}, m, rows),
                      {"token id 512", "row 1", "[0, 512)"});
  EXPECT_QUENCH_ERROR(model.forward(std::vector<int32_t>{3}, m, rows), {"1 token ids for 2"});
  EXPECT_QUENCH_ERROR(model.forward(std::vector<int32_t>{3, 4}, m, std::vector<int32_t>{2}),
                      {"logit row 2"});
  std::vector<ScheduledSequence> far = {
      {{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}, 256, 1}};
  EXPECT_QUENCH_ERROR(
      model.forward(std::vector<int32_t>{3}, build_attention_metadata({}, far, 16, 32),
                    std::vector<int32_t>{0}),
      {"position 256", ">= max_model_len 256"});
}

}  // namespace
}  // namespace quench
