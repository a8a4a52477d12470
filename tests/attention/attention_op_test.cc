// The attention op against the CPU reference: every (prefill q dtype, KV dtype, output dtype)
// with non-unit q/k/v/o scales, mixed decode + prefill batches, graph padding, and the plumbing of
// each phase's slice (rows, offsets, scales) into its kernel.
#include "quench/attention/attention_op.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <utility>
#include <vector>

#include "harness/expect_error.h"
#include "harness/fake_attention_kernel.h"
#include "harness/log_capture.h"
#include "harness/random_inputs.h"
#include "quench/attention/reference_attention_kernel.h"
#include "quench/core/error.h"
#include "quench/numerics/bf16.h"
#include "quench/numerics/fp8.h"
#include "quench/numerics/nvfp4.h"
#include "quench/ops/attention/attention_reference.h"
#include "quench/ops/quantize/fp8_quantize_reference.h"

namespace quench {
namespace {

using testing_support::FakeKernelSpec;
using testing_support::LogCapture;
using testing_support::RandomInputs;

constexpr int32_t kHq = 8;
constexpr int32_t kHkv = 2;
constexpr int32_t kD = 64;
constexpr int32_t kPage = 16;
constexpr float kQScale = 0.0125f;  // |q| <= 1.5 -> |q / q_scale| <= 120
const float kKScales[kHkv] = {0.011f, 0.017f};
const float kVScales[kHkv] = {0.009f, 0.013f};
constexpr float kOScale = 0.0075f;
constexpr float kNvfp4GlobalScale = 448.0f * 6.0f / 4.0f;  // |o| <= max |v| = 3
constexpr uint8_t kPoison = 0x5a;

struct OpCase {
  DType prefill_q = DType::kBF16;  // decode always takes the model dtype (bf16)
  DType kv = DType::kBF16;
  DType out = DType::kBF16;
  bool per_head_kv_scales = false;
  int32_t sliding_window = 0;
  float soft_cap = 0.0f;
  bool sinks = false;
};

std::string describe(const OpCase& c) {
  return str_cat("prefill q ", dtype_name(c.prefill_q), ", KV ", dtype_name(c.kv), ", out ",
                 dtype_name(c.out), c.per_head_kv_scales ? ", per-head k/v scales" : "",
                 c.sliding_window ? ", window" : "", c.soft_cap > 0 ? ", soft-cap" : "",
                 c.sinks ? ", sinks" : "");
}

// A paged cache filled with random values, the true (unquantized) K/V of every sequence, and a
// bf16 query for every row.
class Batch {
 public:
  Batch(const OpCase& c, std::vector<ScheduledSequence> decodes,
        std::vector<ScheduledSequence> prefills, uint64_t seed)
      : case_(c), rng_(seed), decodes_(std::move(decodes)), prefills_(std::move(prefills)) {
    int32_t pages = 1;
    for (auto* list : {&decodes_, &prefills_}) {
      for (auto& s : *list) {
        const int32_t n = (s.num_cached_tokens + s.num_new_tokens + kPage - 1) / kPage;
        s.pages.clear();
        for (int32_t p = 0; p < n; ++p)
          s.pages.push_back(pages++);
        // Non-contiguous page order, so that a wrong block-table row shows.
        std::reverse(s.pages.begin(), s.pages.end());
      }
    }
    kv_.num_pages = pages;
    kv_.page_size = kPage;
    kv_.num_kv_heads = kHkv;
    kv_.head_dim = kD;
    kv_.dtype = c.kv;
    metadata_ = build_attention_metadata(decodes_, prefills_, kPage, kv_.num_pages);

    const size_t cache_bytes = static_cast<size_t>(kv_.tensor_bytes());
    k_cache_.resize(cache_bytes);
    v_cache_.resize(cache_bytes);
    for (auto* cache : {&k_cache_, &v_cache_}) {
      for (auto& byte : *cache)
        byte = static_cast<uint8_t>(rng_.uniform_int(0, 0x7e));
    }
    const int32_t num_seqs = metadata_.num_seqs;
    true_k_.resize(static_cast<size_t>(num_seqs));
    true_v_.resize(static_cast<size_t>(num_seqs));
    for (int32_t b = 0; b < num_seqs; ++b) {
      const int32_t len = metadata_.seq_lens[static_cast<size_t>(b)];
      true_k_[static_cast<size_t>(b)] =
          rng_.uniform(static_cast<size_t>(len) * kHkv * kD, -1.5f, 1.5f);
      true_v_[static_cast<size_t>(b)] = rng_.uniform(static_cast<size_t>(len) * kHkv * kD, -3, 3);
      for (int32_t j = 0; j < len; ++j) {
        const int32_t page =
            metadata_.block_table[static_cast<size_t>(b * metadata_.max_pages + j / kPage)];
        for (int32_t h = 0; h < kHkv; ++h) {
          for (int32_t d = 0; d < kD; ++d) {
            const size_t src = (static_cast<size_t>(j) * kHkv + h) * kD + d;
            const int64_t dst = kv_.offset(page, j % kPage, h, d);
            store(k_cache_, dst, true_k_[static_cast<size_t>(b)][src], k_scale(h));
            store(v_cache_, dst, true_v_[static_cast<size_t>(b)][src], v_scale(h));
          }
        }
      }
    }
    const size_t q_elems = static_cast<size_t>(metadata_.num_tokens) * kHq * kD;
    for (float x : rng_.uniform(q_elems, -2, 2))
      q_.push_back(float_to_bf16_bits(x));
    sinks_ = rng_.uniform(kHq, -1, 2);
  }

  float k_scale(int32_t h) const { return scales().k_scale().at(h); }
  float v_scale(int32_t h) const { return scales().v_scale().at(h); }

  AttentionScales scales() const {
    CheckpointAttentionScales ckpt;
    ckpt.q_scale = std::vector<float>{kQScale};
    ckpt.o_scale = std::vector<float>{kOScale};
    if (case_.per_head_kv_scales) {
      ckpt.k_scale = std::vector<float>(kKScales, kKScales + kHkv);
      ckpt.v_scale = std::vector<float>(kVScales, kVScales + kHkv);
    } else {
      ckpt.k_scale = std::vector<float>{kKScales[1]};
      ckpt.v_scale = std::vector<float>{kVScales[1]};
    }
    // A bf16 cache stores values unscaled (the checkpoint's FP8 scales do not apply).
    if (case_.kv == DType::kBF16) ckpt.k_scale = ckpt.v_scale = std::vector<float>{1.0f};
    return AttentionScales::from_checkpoint(ckpt, kHkv, case_.out, "test");
  }

  AttentionConfig config() const {
    AttentionConfig c;
    c.num_q_heads = kHq;
    c.num_kv_heads = kHkv;
    c.head_dim_qk = c.head_dim_vo = kD;
    c.kv_dtype = case_.kv;
    c.page_size = kPage;
    c.out_dtype = case_.out;
    c.sliding_window = case_.sliding_window;
    c.logit_soft_cap = case_.soft_cap;
    c.has_sinks = case_.sinks;
    return c;
  }

  int64_t out_row_bytes() const {
    return static_cast<int64_t>(dtype_bytes(case_.out, static_cast<size_t>(kHq) * kD));
  }
  int32_t scale_cols() const { return kHq * kD / kNvfp4BlockSize; }

  const OpCase& op_case() const { return case_; }
  const AttentionMetadata& metadata() const { return metadata_; }
  const KvCacheLayout& kv() const { return kv_; }
  const std::vector<uint8_t>& k_cache() const { return k_cache_; }
  const std::vector<uint8_t>& v_cache() const { return v_cache_; }
  const std::vector<uint16_t>& q() const { return q_; }
  const std::vector<float>& sinks() const { return sinks_; }
  const std::vector<float>& true_k(int32_t b) const { return true_k_[static_cast<size_t>(b)]; }
  const std::vector<float>& true_v(int32_t b) const { return true_v_[static_cast<size_t>(b)]; }

 private:
  void store(std::vector<uint8_t>& cache, int64_t index, float x, float scale) const {
    if (kv_.dtype == DType::kBF16) {
      const uint16_t bits = float_to_bf16_bits(x);
      std::memcpy(cache.data() + index * 2, &bits, 2);
    } else {
      cache[static_cast<size_t>(index)] = float_to_fp8(x / scale, fp8_format_of(kv_.dtype));
    }
  }

  OpCase case_;
  RandomInputs rng_;
  std::vector<ScheduledSequence> decodes_;
  std::vector<ScheduledSequence> prefills_;
  KvCacheLayout kv_;
  AttentionMetadata metadata_;
  std::vector<uint8_t> k_cache_;
  std::vector<uint8_t> v_cache_;
  std::vector<std::vector<float>> true_k_;
  std::vector<std::vector<float>> true_v_;
  std::vector<uint16_t> q_;
  std::vector<float> sinks_;
};

// Outputs of one op run: the output tensor, NVFP4 scales and FP8 query buffer, all poisoned first.
struct OpOutputs {
  std::vector<uint8_t> out;
  std::vector<uint8_t> block_scales;
  std::vector<uint8_t> q_fp8;
  std::vector<float> lse;
};

// A registry in which prefill takes `prefill_q` (an FP8 query on the CPU comes from a host
// stand-in kernel that runs the reference) and decode takes bf16 through the reference.
AttentionKernelRegistry registry_for(DType prefill_q) {
  AttentionKernelRegistry r;
  register_reference_attention_kernel(r);
  if (is_fp8(prefill_q)) {
    FakeKernelSpec fp8q;
    fp8q.name = "fp8q_prefill";
    fp8q.decode = false;
    fp8q.priority = 10;
    fp8q.query_dtype = [prefill_q](const AttentionConfig&, AttentionPhase) { return prefill_q; };
    r.add(testing_support::make_fake_kernel(fp8q));
  }
  return r;
}

OpOutputs run_op(const Batch& batch, const AttentionMetadata& metadata,
                 const AttentionKernelRegistry& registry) {
  LogCapture quiet;
  const AttentionBackendSelection selection =
      AttentionBackendSelection::decide(batch.config(), {}, {}, registry);
  AttentionLayerSettings settings;
  settings.sm_scale = 1.0f / std::sqrt(static_cast<float>(kD));
  settings.sinks = batch.op_case().sinks ? batch.sinks().data() : nullptr;
  const AttentionOp op(selection, batch.scales(), settings);

  const size_t rows = static_cast<size_t>(metadata.num_tokens);
  OpOutputs o;
  o.out.assign(rows * static_cast<size_t>(batch.out_row_bytes()), kPoison);
  o.block_scales.assign(
      static_cast<size_t>(nvfp4_scale_bytes(static_cast<int64_t>(rows) + 5, batch.scale_cols())),
      kPoison);
  o.q_fp8.assign(rows * kHq * kD, kPoison);
  o.lse.assign(rows * kHq, -12345.0f);
  std::vector<uint16_t> q = batch.q();
  q.resize(rows * kHq * kD, float_to_bf16_bits(1000.0f));  // padding rows: must be ignored

  AttentionOpArgs args;
  args.q = q.data();
  args.q_fp8 = o.q_fp8.data();
  args.k_cache = batch.k_cache().data();
  args.v_cache = batch.v_cache().data();
  args.kv = batch.kv();
  args.metadata = host_metadata_view(metadata);
  args.out = o.out.data();
  args.out_block_scales = o.block_scales.data();
  args.out_scale_rows = static_cast<int32_t>(rows) + 5;
  args.out_scale_row_offset = 5;  // this batch's rows start inside a larger shared tensor
  args.nvfp4_global_scale = kNvfp4GlobalScale;
  args.lse = o.lse.data();
  op.run(args, nullptr);
  return o;
}

// Output element (row, e) dequantized to float.
float dequantized_out(const Batch& batch, const OpOutputs& o, int64_t row, int64_t e) {
  const int64_t n = static_cast<int64_t>(kHq) * kD;
  switch (batch.op_case().out) {
    case DType::kBF16: {
      uint16_t bits;
      std::memcpy(&bits, o.out.data() + (row * n + e) * 2, 2);
      return bf16_bits_to_float(bits);
    }
    case DType::kNVFP4: {
      const uint8_t byte = o.out[static_cast<size_t>(row * n / 2 + e / 2)];
      const uint8_t code = (e % 2 == 0) ? (byte & 0xf) : (byte >> 4);
      const uint8_t bs = o.block_scales[static_cast<size_t>(
          nvfp4_scale_offset(5 + row, e / kNvfp4BlockSize, batch.scale_cols()))];
      return e2m1_to_float(code) * fp8_e4m3_to_float(bs) / kNvfp4GlobalScale;
    }
    default:
      return fp8_to_float(o.out[static_cast<size_t>(row * n + e)],
                          fp8_format_of(batch.op_case().out)) *
             kOScale;
  }
}

// fp64 attention of the true (unquantized) K/V with the bf16 query; `query_factor` multiplies
// the query (1 = correct; kQScale emulates applying q_scale to a bf16 query, vllm#53754).
std::vector<double> expected_attention(const Batch& batch, double query_factor) {
  const AttentionMetadata& m = batch.metadata();
  const double sm_scale = 1.0 / std::sqrt(static_cast<double>(kD));
  std::vector<double> out(static_cast<size_t>(m.num_tokens) * kHq * kD);
  for (int32_t b = 0; b < m.num_seqs; ++b) {
    const int32_t q0 = m.q_offsets[static_cast<size_t>(b)];
    const int32_t q_len = m.q_offsets[static_cast<size_t>(b) + 1] - q0;
    const int32_t len = m.seq_lens[static_cast<size_t>(b)];
    for (int32_t i = 0; i < q_len; ++i) {
      const int32_t pos = len - q_len + i;
      for (int32_t h = 0; h < kHq; ++h) {
        const int32_t hk = h / (kHq / kHkv);
        std::vector<double> s(static_cast<size_t>(pos) + 1);
        double mx = -1e300;
        for (int32_t j = 0; j <= pos; ++j) {
          double dot = 0;
          for (int32_t d = 0; d < kD; ++d) {
            dot +=
                bf16_bits_to_float(batch.q()[((static_cast<size_t>(q0) + i) * kHq + h) * kD + d]) *
                query_factor * batch.true_k(b)[(static_cast<size_t>(j) * kHkv + hk) * kD + d];
          }
          s[static_cast<size_t>(j)] = dot * sm_scale;
          mx = std::max(mx, s[static_cast<size_t>(j)]);
        }
        double den = 0;
        for (double& x : s)
          den += (x = std::exp(x - mx));
        for (int32_t d = 0; d < kD; ++d) {
          double acc = 0;
          for (int32_t j = 0; j <= pos; ++j) {
            acc += s[static_cast<size_t>(j)] *
                   batch.true_v(b)[(static_cast<size_t>(j) * kHkv + hk) * kD + d];
          }
          out[((static_cast<size_t>(q0) + i) * kHq + h) * kD + d] = acc / den;
        }
      }
    }
  }
  return out;
}

// Quantization noise allowed for a case, as a fraction of max |expected| (FP8 e4m3 has 3
// mantissa bits, e5m2 2, e2m1 1; errors of q, K, V and the output add up).
double tolerance(const OpCase& c) {
  auto noise = [](DType d) {
    switch (d) {
      case DType::kFP8E4M3:
        return 0.04;
      case DType::kFP8E5M2:
        return 0.08;
      case DType::kNVFP4:
        return 0.2;
      default:
        return 0.01;
    }
  };
  return noise(c.prefill_q) + 1.5 * noise(c.kv) + noise(c.out);
}

struct ErrorStats {
  double max_abs = 0;
  int64_t worst = -1;
};

ErrorStats compare(const Batch& batch, const OpOutputs& o, const std::vector<double>& expected) {
  ErrorStats stats;
  const int64_t n = static_cast<int64_t>(kHq) * kD;
  for (int64_t i = 0; i < static_cast<int64_t>(expected.size()); ++i) {
    const double err =
        std::fabs(dequantized_out(batch, o, i / n, i % n) - expected[static_cast<size_t>(i)]);
    if (err > stats.max_abs || std::isnan(err)) {
      stats.max_abs = std::isnan(err) ? 1e30 : err;
      stats.worst = i;
    }
  }
  return stats;
}

// Runs the reference on sequence b alone, from a query the test quantizes itself.
void expect_rows_equal_per_sequence_reference(const Batch& batch, const OpOutputs& o) {
  const OpCase& c = batch.op_case();
  const AttentionMetadata& m = batch.metadata();
  const AttentionScales scales = batch.scales();
  const int64_t row_elems = static_cast<int64_t>(kHq) * kD;
  for (int32_t b = 0; b < m.num_seqs; ++b) {
    const bool prefill = b >= m.num_decode_seqs;
    const int32_t q0 = m.q_offsets[static_cast<size_t>(b)];
    const int32_t q_len = m.q_offsets[static_cast<size_t>(b) + 1] - q0;
    const DType q_dtype = prefill ? c.prefill_q : DType::kBF16;
    std::vector<uint16_t> q_bf16(batch.q().begin() + q0 * row_elems,
                                 batch.q().begin() + (q0 + q_len) * row_elems);
    std::vector<uint8_t> q_fp8(q_bf16.size());
    if (is_fp8(q_dtype)) {
      for (size_t i = 0; i < q_bf16.size(); ++i) {
        q_fp8[i] = float_to_fp8(bf16_bits_to_float(q_bf16[i]) / kQScale, fp8_format_of(q_dtype));
      }
    }
    const int32_t q_offsets[2] = {0, q_len};
    std::vector<uint8_t> out(static_cast<size_t>(q_len * batch.out_row_bytes()), 0);
    std::vector<uint8_t> block_scales(o.block_scales.size(), kPoison);
    std::vector<float> lse(static_cast<size_t>(q_len) * kHq);

    AttentionParams p;
    p.q = is_fp8(q_dtype) ? static_cast<const void*>(q_fp8.data()) : q_bf16.data();
    p.q_dtype = q_dtype;
    p.q_scale = kQScale;  // the reference must ignore it for a bf16 query
    p.k_cache = batch.k_cache().data();
    p.v_cache = batch.v_cache().data();
    p.kv = batch.kv();
    p.k_scale = scales.k_scale();
    p.v_scale = scales.v_scale();
    p.num_q_heads = kHq;
    p.num_seqs = 1;
    p.num_tokens = q_len;
    p.q_offsets = q_offsets;
    p.seq_lens = &m.seq_lens[static_cast<size_t>(b)];
    p.block_table = &m.block_table[static_cast<size_t>(b * m.max_pages)];
    p.block_table_stride = m.max_pages;
    p.max_q_len = q_len;
    p.max_seq_len = m.seq_lens[static_cast<size_t>(b)];
    p.sm_scale = 1.0f / std::sqrt(static_cast<float>(kD));
    p.window_left = c.sliding_window > 0 ? c.sliding_window - 1 : -1;
    p.logit_soft_cap = c.soft_cap;
    p.sinks = c.sinks ? batch.sinks().data() : nullptr;
    p.out = out.data();
    p.out_dtype = c.out;
    p.o_scale = kOScale;
    p.out_block_scales = block_scales.data();
    p.out_scale_rows = static_cast<int32_t>(o.lse.size() / kHq) + 5;
    p.out_scale_row_offset = 5 + q0;
    p.nvfp4_global_scale = kNvfp4GlobalScale;
    p.lse = lse.data();
    validate_attention_params(p);
    attention_reference(p);

    const int64_t rb = batch.out_row_bytes();
    EXPECT_TRUE(std::equal(out.begin(), out.end(), o.out.begin() + q0 * rb))
        << describe(c) << ": sequence " << b << " rows differ from its own reference run";
    EXPECT_TRUE(std::equal(lse.begin(), lse.end(), o.lse.begin() + q0 * kHq))
        << describe(c) << ": sequence " << b << " lse differs";
    if (c.out == DType::kNVFP4) {
      for (int32_t r = 0; r < q_len; ++r) {
        for (int32_t col = 0; col < batch.scale_cols(); ++col) {
          const auto at = nvfp4_scale_offset(5 + q0 + r, col, batch.scale_cols());
          ASSERT_EQ(block_scales[static_cast<size_t>(at)], o.block_scales[static_cast<size_t>(at)])
              << describe(c) << ": sequence " << b << " row " << r << " scale column " << col;
        }
      }
    }
  }
}

std::vector<ScheduledSequence> mixed_decodes() {
  return {{{}, 20, 1}, {{}, 37, 1}};
}
std::vector<ScheduledSequence> mixed_prefills() {
  return {{{}, 16, 21}, {{}, 0, 9}};
}

TEST(AttentionOp, EveryDtypeCombinationWithNonUnitScales) {
  const DType q_dtypes[] = {DType::kBF16, DType::kFP8E4M3, DType::kFP8E5M2};
  const DType kv_dtypes[] = {DType::kBF16, DType::kFP8E4M3, DType::kFP8E5M2};
  const DType out_dtypes[] = {DType::kBF16, DType::kFP8E4M3, DType::kFP8E5M2, DType::kNVFP4};
  int index = 0;
  for (DType q : q_dtypes) {
    for (DType kv : kv_dtypes) {
      if (is_fp8(q) && !is_fp8(kv)) continue;  // no kernel takes an FP8 query over a bf16 cache
      for (DType out : out_dtypes) {
        OpCase c;
        c.prefill_q = q;
        c.kv = kv;
        c.out = out;
        c.per_head_kv_scales = (index++ / 4) % 2 == 1;  // both kinds for every output dtype
        const Batch batch(c, mixed_decodes(), mixed_prefills(),
                          1000 + static_cast<uint64_t>(index));
        const OpOutputs o = run_op(batch, batch.metadata(), registry_for(q));
        expect_rows_equal_per_sequence_reference(batch, o);

        const std::vector<double> expected = expected_attention(batch, 1.0);
        double amax = 0;
        for (double x : expected)
          amax = std::max(amax, std::fabs(x));
        const ErrorStats err = compare(batch, o, expected);
        const double tol = tolerance(c) * amax;
        EXPECT_LE(err.max_abs, tol) << describe(c) << ": max abs error " << err.max_abs
                                    << " at element " << err.worst << " (max |o| " << amax << ")";
        // The check can fail: a q_scale applied to the bf16 query (vllm#53754) is far outside.
        const ErrorStats wrong = compare(batch, o, expected_attention(batch, kQScale));
        EXPECT_GT(wrong.max_abs, 2 * tol) << describe(c);
      }
    }
  }
}

TEST(AttentionOp, WindowSoftCapAndSinksMatchPerSequenceReference) {
  OpCase c;
  c.prefill_q = DType::kFP8E4M3;
  c.kv = DType::kFP8E4M3;
  c.out = DType::kFP8E4M3;
  c.sliding_window = 8;
  c.soft_cap = 30.0f;
  c.sinks = true;
  const Batch batch(c, mixed_decodes(), mixed_prefills(), 7);
  expect_rows_equal_per_sequence_reference(
      batch, run_op(batch, batch.metadata(), registry_for(c.prefill_q)));
}

TEST(AttentionOp, PaddedBatchEqualsUnpaddedOnRealRowsAndTouchesNothingElse) {
  for (const bool mixed : {false, true}) {
    OpCase c;
    c.prefill_q = DType::kFP8E4M3;
    c.kv = DType::kFP8E4M3;
    const Batch batch(
        c, {{{}, 20, 1}, {{}, 3, 1}, {{}, 40, 1}},
        mixed ? std::vector<ScheduledSequence>{{{}, 5, 6}} : std::vector<ScheduledSequence>{}, 11);
    const AttentionKernelRegistry registry = registry_for(c.prefill_q);
    const OpOutputs plain = run_op(batch, batch.metadata(), registry);
    const std::vector<uint8_t> k_before = batch.k_cache();
    const std::vector<uint8_t> v_before = batch.v_cache();
    const AttentionMetadata padded = pad_attention_metadata(batch.metadata(), 8, 16);
    const OpOutputs o = run_op(batch, padded, registry);

    const size_t real_out = plain.out.size();
    EXPECT_TRUE(std::equal(plain.out.begin(), plain.out.end(), o.out.begin())) << mixed;
    EXPECT_TRUE(std::all_of(o.out.begin() + static_cast<std::ptrdiff_t>(real_out), o.out.end(),
                            [](uint8_t x) { return x == kPoison; }))
        << "padding rows were written (mixed=" << mixed << ")";
    EXPECT_TRUE(std::all_of(o.q_fp8.begin() + static_cast<std::ptrdiff_t>(plain.q_fp8.size()),
                            o.q_fp8.end(), [](uint8_t x) { return x == kPoison; }));
    EXPECT_TRUE(std::equal(plain.lse.begin(), plain.lse.end(), o.lse.begin()));
    EXPECT_EQ(batch.k_cache(), k_before);
    EXPECT_EQ(batch.v_cache(), v_before);
  }
}

TEST(AttentionOp, PrefilledFp8QueryIsNotQuantizedAgain) {
  OpCase c;
  c.prefill_q = DType::kFP8E4M3;
  c.kv = DType::kFP8E4M3;
  const Batch batch(c, mixed_decodes(), mixed_prefills(), 5);
  const AttentionKernelRegistry registry = registry_for(c.prefill_q);
  const OpOutputs first = run_op(batch, batch.metadata(), registry);

  // Second run: the FP8 rows come from "upstream" (the first run's buffer); the bf16 prefill
  // rows are garbage, so the result only matches if the op does not requantize them.
  LogCapture quiet;
  const AttentionOp op(AttentionBackendSelection::decide(batch.config(), {}, {}, registry),
                       batch.scales(), {1.0f / std::sqrt(static_cast<float>(kD)), nullptr});
  std::vector<uint16_t> q = batch.q();
  std::fill(q.begin() + batch.metadata().num_decode_tokens * kHq * kD, q.end(),
            float_to_bf16_bits(77.0f));
  std::vector<uint8_t> q_fp8 = first.q_fp8;
  std::vector<uint8_t> out(first.out.size(), kPoison);
  AttentionOpArgs args;
  args.q = q.data();
  args.q_fp8 = q_fp8.data();
  args.q_fp8_ready = true;
  args.k_cache = batch.k_cache().data();
  args.v_cache = batch.v_cache().data();
  args.kv = batch.kv();
  args.metadata = host_metadata_view(batch.metadata());
  args.out = out.data();
  op.run(args, nullptr);
  EXPECT_EQ(out, first.out);
}

// The slices each kernel receives, checked field by field with recording kernels.
TEST(AttentionOp, EachPhaseGetsItsOwnSliceDecodeFirst) {
  auto runs = std::make_shared<std::vector<AttentionParams>>();
  AttentionKernelRegistry r;
  FakeKernelSpec decode;
  decode.name = "rec_decode";
  decode.prefill = false;
  decode.run_reference = false;
  decode.runs = runs;
  r.add(testing_support::make_fake_kernel(decode));
  FakeKernelSpec prefill;
  prefill.name = "rec_prefill";
  prefill.decode = false;
  prefill.run_reference = false;
  prefill.runs = runs;
  prefill.query_dtype = testing_support::fp8_query_over_fp8_kv;
  r.add(testing_support::make_fake_kernel(prefill));

  OpCase c;
  c.kv = DType::kFP8E4M3;
  c.out = DType::kNVFP4;
  c.sliding_window = 4;
  c.soft_cap = 20.0f;
  const Batch batch(c, mixed_decodes(), mixed_prefills(), 3);
  const OpOutputs o = run_op(batch, batch.metadata(), r);
  ASSERT_EQ(runs->size(), 2u);
  const AttentionParams& d = (*runs)[0];
  const AttentionParams& p = (*runs)[1];
  const AttentionMetadata& m = batch.metadata();

  EXPECT_EQ(d.q_dtype, DType::kBF16);
  EXPECT_EQ(d.num_seqs, 2);
  EXPECT_EQ(d.num_tokens, 2);
  EXPECT_EQ(d.max_q_len, 1);
  EXPECT_EQ(d.max_seq_len, 38);
  EXPECT_EQ(d.out_scale_row_offset, 5);
  EXPECT_EQ(d.k_scale.at(0), kKScales[1]);
  EXPECT_EQ(d.v_scale.at(0), kVScales[1]);

  EXPECT_EQ(p.q_dtype, DType::kFP8E4M3);
  EXPECT_EQ(p.q_scale, kQScale);
  EXPECT_EQ(p.num_seqs, 2);
  EXPECT_EQ(p.num_tokens, 30);
  EXPECT_EQ(p.q_offsets[0], 0);
  EXPECT_EQ(p.q_offsets[2], 30);
  EXPECT_EQ(p.max_q_len, 21);
  EXPECT_EQ(p.max_seq_len, 37);
  EXPECT_EQ(p.seq_lens[0], 37);
  EXPECT_EQ(p.block_table, m.block_table.data() + 2 * m.max_pages);
  EXPECT_EQ(p.out_scale_row_offset, 5 + 2);
  EXPECT_EQ(p.window_left, 3);
  EXPECT_EQ(p.logit_soft_cap, 20.0f);
  EXPECT_EQ(p.o_scale, kOScale);
  EXPECT_EQ(p.nvfp4_global_scale, kNvfp4GlobalScale);
  const int64_t row_elems = static_cast<int64_t>(kHq) * kD;
  EXPECT_EQ(static_cast<const uint8_t*>(p.out) - static_cast<const uint8_t*>(d.out),
            2 * row_elems / 2);
  EXPECT_EQ(p.lse - d.lse, 2 * kHq);
  // The prefill query is fp8(q / q_scale) of its own rows; decode rows were not quantized.
  const uint8_t* q_fp8 = static_cast<const uint8_t*>(p.q);
  for (int64_t i = 0; i < 30 * row_elems; i += 97) {
    EXPECT_EQ(q_fp8[i],
              float_to_fp8_e4m3(bf16_bits_to_float(batch.q()[2 * row_elems + i]) / kQScale));
  }
  EXPECT_TRUE(std::all_of(o.q_fp8.begin(), o.q_fp8.begin() + 2 * row_elems,
                          [](uint8_t x) { return x == kPoison; }));
}

TEST(AttentionOp, BadSetupsFailWithClearErrors) {
  OpCase c;
  c.kv = DType::kFP8E4M3;
  const Batch batch(c, mixed_decodes(), mixed_prefills(), 3);
  AttentionKernelRegistry r;
  register_reference_attention_kernel(r);
  FakeKernelSpec device;
  device.name = "device_prefill";
  device.decode = false;
  device.priority = 5;
  device.memory_space = MemorySpace::kDevice;
  r.add(testing_support::make_fake_kernel(device));
  LogCapture quiet;
  const auto selection = AttentionBackendSelection::decide(batch.config(), {}, {}, r);
  EXPECT_THROW(AttentionOp(selection, batch.scales(), {0.125f, nullptr}), Error);  // host + device

  const auto host_only = AttentionBackendSelection::decide(
      batch.config(),
      AttentionKernelOverride{AttentionKernelOverride::Kind::kAvoid, "device_prefill"}, {}, r);
  EXPECT_THROW(AttentionOp(host_only, batch.scales(), {0.0f, nullptr}), Error);  // sm_scale
  // An infinite sm_scale would pass > 0 and turn every score into inf (NaN output).
  for (const float sm_scale : {INFINITY, NAN, -0.125f}) {
    EXPECT_QUENCH_ERROR(AttentionOp(host_only, batch.scales(), {sm_scale, nullptr}),
                        {"sm_scale", "allowed: finite and > 0"});
  }
  const float sinks[kHq] = {};
  EXPECT_THROW(AttentionOp(host_only, batch.scales(), {0.125f, sinks}), Error);  // unexpected sinks

  const AttentionOp op(host_only, batch.scales(), {0.125f, nullptr});
  AttentionOpArgs args;
  args.kv = batch.kv();
  args.kv.page_size = 32;
  try {
    op.run(args, nullptr);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not match the attention configuration"),
              std::string::npos)
        << e.what();
  }
}

// The o projection's e4m3 rows (AttentionOpArgs::out_fp8) from a batch of decode rows, out null:
// the codes and scales of the bf16 output (a run without them) quantized by the reference, per
// 128 columns (both scale orders) and per row. Refused with prefill rows, and by an op whose
// output is not bf16, naming what is allowed.
TEST(AttentionOp, DecodeBatchWritesTheOProjectionsFp8Rows) {
  OpCase c;
  c.kv = DType::kFP8E4M3;
  c.per_head_kv_scales = true;
  const std::vector<ScheduledSequence> decodes = {{{}, 20, 1}, {{}, 37, 2}, {{}, 5, 1}};
  const Batch batch(c, decodes, {}, 23);
  const AttentionKernelRegistry registry = registry_for(DType::kBF16);
  const OpOutputs plain = run_op(batch, batch.metadata(), registry);
  const int32_t rows = batch.metadata().num_tokens;
  const int32_t width = kHq * kD;
  std::vector<float> bf16_out(static_cast<size_t>(rows) * width);
  for (size_t i = 0; i < bf16_out.size(); ++i) {
    uint16_t bits;
    std::memcpy(&bits, plain.out.data() + 2 * i, 2);
    bf16_out[i] = bf16_bits_to_float(bits);
  }

  LogCapture quiet;
  const AttentionOp op(AttentionBackendSelection::decide(batch.config(), {}, {}, registry),
                       batch.scales(), {1.0f / std::sqrt(static_cast<float>(kD)), nullptr});
  ASSERT_TRUE(op.writes_fp8_rows());
  AttentionOpArgs args;
  std::vector<uint16_t> q = batch.q();
  args.q = q.data();
  args.k_cache = batch.k_cache().data();
  args.v_cache = batch.v_cache().data();
  args.kv = batch.kv();
  args.metadata = host_metadata_view(batch.metadata());
  for (const auto& [group, by_group] :
       {std::pair{128, false}, std::pair{128, true}, std::pair{width, false}}) {
    SCOPED_TRACE(str_cat("group ", group, by_group ? ", scales by group" : ""));
    const size_t scale_count = static_cast<size_t>(rows) * (width / group);
    std::vector<uint8_t> want_codes(static_cast<size_t>(rows) * width);
    std::vector<float> want_scales(scale_count);
    quantize_fp8_dynamic_rows_reference(bf16_out.data(), rows, width, group, want_codes.data(),
                                        want_scales.data(), by_group);
    std::vector<uint8_t> codes(want_codes.size(), kPoison);
    std::vector<float> scales(scale_count, -1.0f);
    args.out = nullptr;
    args.out_fp8 = Fp8RowsOut{codes.data(), scales.data(), group, {rows, by_group}};
    op.run(args, nullptr);
    EXPECT_EQ(codes, want_codes);
    EXPECT_EQ(scales, want_scales);
  }

  // Prefill rows: the prefill kernels write no FP8 rows.
  const Batch mixed(c, decodes, mixed_prefills(), 23);
  std::vector<uint16_t> mixed_q = mixed.q();
  std::vector<uint8_t> codes(static_cast<size_t>(mixed.metadata().num_tokens) * width);
  std::vector<float> scales(codes.size() / 128);
  AttentionOpArgs mixed_args = args;
  mixed_args.q = mixed_q.data();
  mixed_args.k_cache = mixed.k_cache().data();
  mixed_args.v_cache = mixed.v_cache().data();
  mixed_args.kv = mixed.kv();
  mixed_args.metadata = host_metadata_view(mixed.metadata());
  mixed_args.out_fp8 = Fp8RowsOut{codes.data(), scales.data(), 128, {}};
  EXPECT_QUENCH_ERROR(op.run(mixed_args, nullptr),
                      {"out_fp8 with 2 prefill sequences", "a batch of decode rows only"});

  // FP8 output: the rows quantize the bf16 output, which this op does not produce.
  OpCase fp8_out = c;
  fp8_out.out = DType::kFP8E4M3;
  const Batch fp8_batch(fp8_out, decodes, {}, 23);
  const AttentionOp fp8_op(AttentionBackendSelection::decide(fp8_batch.config(), {}, {}, registry),
                           fp8_batch.scales(), {1.0f / std::sqrt(static_cast<float>(kD)), nullptr});
  EXPECT_FALSE(fp8_op.writes_fp8_rows());
  args.out_fp8 = Fp8RowsOut{codes.data(), scales.data(), 128, {}};
  EXPECT_QUENCH_ERROR(fp8_op.run(args, nullptr),
                      {"out_fp8 is not written with fp8_e4m3 output", "allowed: bf16 output"});
}

}  // namespace
}  // namespace quench
