#include "harness/attention_problem.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "harness/random_inputs.h"
#include "quench/core/error.h"
#include "quench/core/parallel_for.h"
#include "quench/numerics/bf16.h"
#include "quench/numerics/fp8.h"
#include "quench/numerics/nvfp4.h"
#include "quench/ops/attention/attention_reference.h"

namespace quench::testing_support {
namespace {

constexpr size_t kMinBufferBytes = 16;
constexpr uint8_t kFp8NaN = 0x7f;  // NaN in both e4m3fn and e5m2

// Stores x (already divided by its scale) as element `index` of a bf16/f16/fp8 tensor and returns
// the stored value read back as float.
float store_element(DType dtype, std::vector<uint8_t>& bytes, int64_t index, float x) {
  switch (dtype) {
    case DType::kBF16: {
      const uint16_t bits = float_to_bf16_bits(x);
      std::memcpy(&bytes[index * 2], &bits, 2);
      return bf16_bits_to_float(bits);
    }
    case DType::kF16: {
      const uint16_t bits = float_to_f16_bits(x);
      std::memcpy(&bytes[index * 2], &bits, 2);
      return f16_bits_to_float(bits);
    }
    default: {
      const Fp8Format format = fp8_format_of(dtype);
      bytes[index] = float_to_fp8(x, format);
      return fp8_to_float(bytes[index], format);
    }
  }
}

// n elements of dtype, every one NaN (nvfp4 data has no NaN: all bits set, i.e. -6).
std::vector<uint8_t> nan_bytes(DType dtype, int64_t n) {
  const size_t bytes = std::max(kMinBufferBytes, dtype_bytes(dtype, static_cast<size_t>(n)));
  if (dtype == DType::kBF16 || dtype == DType::kF16) {
    std::vector<uint8_t> out(bytes);
    for (size_t i = 0; i + 1 < bytes; i += 2) {
      out[i] = 0xff;  // 0x7fff little-endian: NaN in bf16 and f16
      out[i + 1] = 0x7f;
    }
    return out;
  }
  return std::vector<uint8_t>(bytes, dtype == DType::kNVFP4 ? 0xff : kFp8NaN);
}

int32_t pages_for(int32_t kv_len, int32_t page_size) {
  return (kv_len + page_size - 1) / page_size;
}

}  // namespace

std::vector<SeqShape> random_decode_seqs(int32_t num_seqs, int32_t min_kv_len, int32_t max_kv_len,
                                         uint64_t seed) {
  RandomInputs random(seed);
  std::vector<SeqShape> seqs(static_cast<size_t>(num_seqs));
  for (auto& s : seqs)
    s = SeqShape{1, random.uniform_int(min_kv_len, max_kv_len)};
  return seqs;
}

std::vector<SeqShape> random_prefill_seqs(int32_t num_seqs, int32_t min_q_len, int32_t max_q_len,
                                          int32_t max_prefix_len, uint64_t seed) {
  RandomInputs random(seed);
  std::vector<SeqShape> seqs(static_cast<size_t>(num_seqs));
  for (auto& s : seqs) {
    const int32_t q_len = random.uniform_int(min_q_len, max_q_len);
    s = SeqShape{q_len, q_len + random.uniform_int(0, max_prefix_len)};
  }
  return seqs;
}

AttentionProblem::AttentionProblem(const AttentionProblemConfig& config) : config_(config) {
  QUENCH_REQUIRE(!config_.seqs.empty(), "AttentionProblemConfig.seqs is empty; allowed: >= 1");
  q_offsets_.push_back(0);
  for (size_t b = 0; b < config_.seqs.size(); ++b) {
    const SeqShape& s = config_.seqs[b];
    QUENCH_REQUIRE(s.q_len >= 0 && s.q_len <= s.kv_len, "AttentionProblemConfig.seqs[", b,
                   "] = {q_len ", s.q_len, ", kv_len ", s.kv_len,
                   "} is invalid; allowed: 0 <= q_len <= kv_len");
    q_offsets_.push_back(q_offsets_.back() + s.q_len);
    seq_lens_.push_back(s.kv_len);
    for (int32_t i = 0; i < s.q_len; ++i)
      token_seq_.push_back(static_cast<int32_t>(b));
  }
  QUENCH_REQUIRE(config_.num_kv_heads >= 1 && config_.num_q_heads >= 1 &&
                     config_.num_q_heads % config_.num_kv_heads == 0,
                 "AttentionProblemConfig num_q_heads ", config_.num_q_heads, " / num_kv_heads ",
                 config_.num_kv_heads, " is invalid; allowed: q heads a multiple of KV heads");
  kv_.page_size = config_.page_size;
  kv_.num_kv_heads = config_.num_kv_heads;
  kv_.head_dim = config_.head_dim;
  kv_.dtype = config_.kv_dtype;
  kv_.layout = config_.layout;
  build_scales_and_sinks();
  build_query();
  build_caches();
  build_outputs();
}

void AttentionProblem::build_scales_and_sinks() {
  RandomInputs random(config_.seed + 1);
  if (config_.per_head_kv_scales) {
    for (int32_t h = 0; h < config_.num_kv_heads; ++h) {
      k_head_scales_.push_back(config_.k_scale * random.uniform_float(0.5f, 2.0f));
      v_head_scales_.push_back(config_.v_scale * random.uniform_float(0.5f, 2.0f));
    }
  }
  if (config_.sinks) sinks_ = random.uniform(static_cast<size_t>(config_.num_q_heads), -1.0f, 2.0f);
}

void AttentionProblem::build_query() {
  RandomInputs random(config_.seed + 2);
  const int64_t n = static_cast<int64_t>(num_tokens()) * config_.num_q_heads * config_.head_dim;
  const std::vector<float> x = random.normal(static_cast<size_t>(n));
  const float scale = is_fp8(config_.q_dtype) ? config_.q_scale : 1.0f;
  q_bytes_ = nan_bytes(config_.q_dtype, n);
  q_values_.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    q_values_[i] =
        store_element(config_.q_dtype, q_bytes_, i, x[i] * config_.q_magnitude / scale) * scale;
  }
}

void AttentionProblem::build_caches() {
  int32_t total_pages = 0;
  int32_t max_pages = 0;
  for (int32_t len : seq_lens_) {
    total_pages += pages_for(len, kv_.page_size);
    max_pages = std::max(max_pages, pages_for(len, kv_.page_size));
  }
  kv_.num_pages = std::max(2, 1 + total_pages + config_.spare_pages);
  kv_.validate();

  // Pages 1..num_pages-1 in random order; sequences take them in turn. The block table has one
  // spare column (null page) so that kernels must stop at seq_len, not at the stride.
  RandomInputs random(config_.seed + 3);
  std::vector<int32_t> page_ids(static_cast<size_t>(kv_.num_pages - 1));
  std::iota(page_ids.begin(), page_ids.end(), 1);
  std::shuffle(page_ids.begin(), page_ids.end(), random.engine());
  block_table_stride_ = max_pages + 1;
  block_table_.assign(static_cast<size_t>(num_seqs()) * block_table_stride_, 0);

  std::vector<std::vector<int32_t>> seq_pages(static_cast<size_t>(num_seqs()));
  size_t next_page = 0;
  for (int32_t b = 0; b < num_seqs(); ++b) {
    for (int32_t i = 0; i < pages_for(seq_lens_[b], kv_.page_size); ++i) {
      seq_pages[b].push_back(page_ids[next_page++]);
      block_table_[static_cast<size_t>(b) * block_table_stride_ + i] = seq_pages[b].back();
    }
  }
  // Each sequence draws from its own seed and owns its pages, so sequences fill in parallel and
  // a sequence's values do not depend on the others (nor on the page size or layout).
  k_cache_ = nan_bytes(kv_.dtype, kv_.tensor_elems());
  v_cache_ = nan_bytes(kv_.dtype, kv_.tensor_elems());
  k_values_.resize(static_cast<size_t>(num_seqs()));
  v_values_.resize(static_cast<size_t>(num_seqs()));
  parallel_for(num_seqs(),
               [&](int64_t b) { add_sequence_caches(static_cast<int32_t>(b), seq_pages[b]); });
  float v_amax = 0.0f;
  for (const auto& values : v_values_) {
    for (float v : values)
      v_amax = std::max(v_amax, std::fabs(v));
  }
  nvfp4_global_scale_ = config_.nvfp4_global_scale > 0.0f ? config_.nvfp4_global_scale
                        : v_amax > 0.0f                   ? kFp8E4M3Max * kE2M1Max / v_amax
                                                          : 1.0f;
}

void AttentionProblem::add_sequence_caches(int32_t seq, const std::vector<int32_t>& pages) {
  RandomInputs random(config_.seed + 1000 + static_cast<uint64_t>(seq));
  const int32_t len = seq_lens_[seq];
  const int64_t n = static_cast<int64_t>(len) * kv_.num_kv_heads * kv_.head_dim;
  const std::vector<float> k = random.normal(static_cast<size_t>(n));
  const std::vector<float> v = random.normal(static_cast<size_t>(n));
  std::vector<float> k_values(static_cast<size_t>(n)), v_values(static_cast<size_t>(n));
  // Tokens before the first query row's window are seen by no row of this sequence.
  const int32_t first_row_pos = len - config_.seqs[static_cast<size_t>(seq)].q_len;
  const int32_t first_seen = config_.nan_before_window && config_.window_left >= 0
                                 ? first_row_pos - config_.window_left
                                 : 0;
  for (int32_t pos = 0; pos < len; ++pos) {
    for (int32_t h = 0; h < kv_.num_kv_heads; ++h) {
      const float ks = k_scale_of(h);
      const float vs = v_scale_of(h);
      for (int32_t d = 0; d < kv_.head_dim; ++d) {
        const int64_t logical =
            (static_cast<int64_t>(pos) * kv_.num_kv_heads + h) * kv_.head_dim + d;
        const int64_t stored = kv_.offset(pages[pos / kv_.page_size], pos % kv_.page_size, h, d);
        if (pos < first_seen) {  // the slot keeps its NaN; the value is never used
          k_values[logical] = k[logical];
          v_values[logical] = v[logical];
          continue;
        }
        k_values[logical] = store_element(kv_.dtype, k_cache_, stored, k[logical] / ks) * ks;
        v_values[logical] = store_element(kv_.dtype, v_cache_, stored, v[logical] / vs) * vs;
      }
    }
  }
  k_values_[seq] = std::move(k_values);
  v_values_[seq] = std::move(v_values);
}

void AttentionProblem::build_outputs() {
  const AttentionOutputFormat format = output_format();
  poisoned_out_ = nan_bytes(config_.out_dtype, num_tokens() * format.row_elems);
  if (config_.out_dtype == DType::kNVFP4) {
    const int64_t cols = format.row_elems / kNvfp4BlockSize;
    out_scale_rows_ = config_.out_scale_row_offset + num_tokens();
    poisoned_scales_.assign(
        static_cast<size_t>(nvfp4_scale_bytes(std::max<int64_t>(out_scale_rows_, 1), cols)), 0);
    for (int64_t t = 0; t < num_tokens(); ++t) {
      for (int64_t c = 0; c < cols; ++c) {
        poisoned_scales_[nvfp4_scale_offset(config_.out_scale_row_offset + t, c, cols)] = kFp8NaN;
      }
    }
  }
  if (config_.lse) {
    poisoned_lse_.assign(static_cast<size_t>(num_tokens()) * config_.num_q_heads, NAN);
  }
}

AttentionOutputFormat AttentionProblem::output_format() const {
  AttentionOutputFormat format;
  format.dtype = config_.out_dtype;
  format.row_elems = static_cast<int64_t>(config_.num_q_heads) * config_.head_dim;
  format.o_scale = config_.o_scale;
  format.scale_row_offset = config_.out_scale_row_offset;
  format.nvfp4_global_scale = nvfp4_global_scale_;
  return format;
}

AttentionParams AttentionProblem::params_with(const AttentionPointers& ptr) const {
  AttentionParams p;
  p.q = ptr.q;
  p.q_dtype = config_.q_dtype;
  p.q_scale = config_.q_scale;
  p.k_cache = ptr.k_cache;
  p.v_cache = ptr.v_cache;
  p.kv = kv_;
  p.k_scale.per_tensor = config_.k_scale;
  p.v_scale.per_tensor = config_.v_scale;
  if (config_.per_head_kv_scales) {
    QUENCH_REQUIRE(ptr.k_head_scales != nullptr && ptr.v_head_scales != nullptr,
                   "AttentionPointers k_head_scales/v_head_scales are null but the problem has "
                   "per-head KV scales");
    p.k_scale.per_head = ptr.k_head_scales;
    p.v_scale.per_head = ptr.v_head_scales;
  }
  p.num_q_heads = config_.num_q_heads;
  p.num_seqs = num_seqs();
  p.num_tokens = num_tokens();
  p.q_offsets = ptr.q_offsets;
  p.seq_lens = ptr.seq_lens;
  p.block_table = ptr.block_table;
  p.block_table_stride = block_table_stride_;
  for (const SeqShape& s : config_.seqs) {
    p.max_q_len = std::max(p.max_q_len, s.q_len);
    p.max_seq_len = std::max(p.max_seq_len, s.kv_len);
  }
  p.sm_scale = sm_scale();
  p.window_left = config_.window_left;
  p.logit_soft_cap = config_.logit_soft_cap;
  if (config_.sinks) {
    QUENCH_REQUIRE(ptr.sinks != nullptr,
                   "AttentionPointers sinks is null but the problem has sinks");
    p.sinks = ptr.sinks;
  }
  p.out = ptr.out;
  p.out_dtype = config_.out_dtype;
  p.o_scale = config_.o_scale;
  if (config_.out_dtype == DType::kNVFP4) {
    p.out_block_scales = ptr.out_block_scales;
    p.out_scale_rows = out_scale_rows_;
    p.out_scale_row_offset = config_.out_scale_row_offset;
    p.nvfp4_global_scale = nvfp4_global_scale_;
  }
  if (config_.lse) p.lse = ptr.lse;
  return p;
}

AttentionParams AttentionProblem::host_params(void* out, uint8_t* out_block_scales,
                                              float* lse) const {
  AttentionPointers ptr;
  ptr.q = q_bytes_.data();
  ptr.k_cache = k_cache_.data();
  ptr.v_cache = v_cache_.data();
  ptr.q_offsets = q_offsets_.data();
  ptr.seq_lens = seq_lens_.data();
  ptr.block_table = block_table_.data();
  ptr.k_head_scales = k_head_scales_.data();
  ptr.v_head_scales = v_head_scales_.data();
  ptr.sinks = sinks_.data();
  ptr.out = out;
  ptr.out_block_scales = out_block_scales;
  ptr.lse = lse;
  return params_with(ptr);
}

float AttentionProblem::q_value(int64_t token, int32_t head, int32_t dim) const {
  return q_values_[(token * config_.num_q_heads + head) * config_.head_dim + dim];
}

float AttentionProblem::k_value(int32_t seq, int32_t pos, int32_t kv_head, int32_t dim) const {
  return k_values_[seq]
                  [(static_cast<int64_t>(pos) * kv_.num_kv_heads + kv_head) * kv_.head_dim + dim];
}

float AttentionProblem::v_value(int32_t seq, int32_t pos, int32_t kv_head, int32_t dim) const {
  return v_values_[seq]
                  [(static_cast<int64_t>(pos) * kv_.num_kv_heads + kv_head) * kv_.head_dim + dim];
}

float AttentionProblem::k_scale_of(int32_t kv_head) const {
  return k_head_scales_.empty() ? config_.k_scale : k_head_scales_[kv_head];
}

float AttentionProblem::v_scale_of(int32_t kv_head) const {
  return v_head_scales_.empty() ? config_.v_scale : v_head_scales_[kv_head];
}

float AttentionProblem::sm_scale() const {
  return config_.sm_scale > 0.0f ? config_.sm_scale
                                 : 1.0f / std::sqrt(static_cast<float>(config_.head_dim));
}

int32_t AttentionProblem::seq_of_token(int64_t token) const {
  return token_seq_[token];
}

int32_t AttentionProblem::pos_of_token(int64_t token) const {
  const int32_t b = token_seq_[token];
  const int32_t q_len = q_offsets_[b + 1] - q_offsets_[b];
  return seq_lens_[b] - q_len + static_cast<int32_t>(token - q_offsets_[b]);
}

void AttentionProblem::compute_reference() {
  expected_out_ = poisoned_out_;
  expected_scales_ = poisoned_scales_;
  expected_lse_ = poisoned_lse_;
  attention_reference(
      host_params(expected_out_.data(), expected_scales_.data(), expected_lse_.data()));
  if (is_fp8(config_.out_dtype) || config_.out_dtype == DType::kNVFP4) {
    // The same reference with bf16 output: the values before the FP8 / NVFP4 output's rounding.
    std::vector<uint8_t> bf16_out(static_cast<size_t>(num_tokens() * output_format().row_elems) *
                                  sizeof(uint16_t));
    AttentionParams p = host_params(bf16_out.data(), nullptr, nullptr);
    p.out_dtype = DType::kBF16;
    p.lse = nullptr;
    attention_reference(p);
    AttentionOutputFormat bf16_format = output_format();
    bf16_format.dtype = DType::kBF16;
    unrounded_values_ = decode_outputs(bf16_format, num_tokens(), bf16_out.data(), nullptr);
  }
  has_reference_ = true;
}

const std::vector<uint8_t>& AttentionProblem::expected_out() const {
  QUENCH_REQUIRE(has_reference_, "AttentionProblem: call compute_reference() first");
  return expected_out_;
}

const std::vector<uint8_t>& AttentionProblem::expected_block_scales() const {
  QUENCH_REQUIRE(has_reference_, "AttentionProblem: call compute_reference() first");
  return expected_scales_;
}

const std::vector<float>& AttentionProblem::expected_lse() const {
  QUENCH_REQUIRE(has_reference_, "AttentionProblem: call compute_reference() first");
  return expected_lse_;
}

std::vector<float> AttentionProblem::expected_values() const {
  return decode_outputs(output_format(), num_tokens(), expected_out().data(),
                        expected_scales_.empty() ? nullptr : expected_scales_.data());
}

CompareResult AttentionProblem::compare_output(const void* actual_out,
                                               const uint8_t* actual_block_scales,
                                               Tolerance tolerance) const {
  return compare_outputs(output_format(), num_tokens(), config_.num_q_heads, actual_out,
                         actual_block_scales, expected_out().data(),
                         expected_scales_.empty() ? nullptr : expected_scales_.data(), tolerance,
                         unrounded_values_.empty() ? nullptr : unrounded_values_.data());
}

CompareResult AttentionProblem::compare_lse(const float* actual_lse, Tolerance tolerance) const {
  QUENCH_REQUIRE(config_.lse, "AttentionProblem: lse was not requested (config.lse is false)");
  return compare_values(actual_lse, expected_lse().data(), num_tokens(), config_.num_q_heads, 1,
                        tolerance);
}

}  // namespace quench::testing_support
