// A random paged-attention problem on the host: the inputs of AttentionParams (query, K/V caches
// in randomly permuted pages, block tables, offsets), poisoned outputs, and the CPU reference's
// result. GPU kernel tests upload the byte vectors (see attention_device_problem.h), run their
// kernel with params_with(device pointers), and compare the downloaded output with
// compare_output(). Benchmarks use the same problems without computing the reference.
//
// Inputs are drawn as "true" values x ~ N(0, 1) and stored as SPEC §1.2 says: FP8 query
// fp8(x / q_scale), bf16/f16 query x, K/V (any dtype) stored(x / k_scale or v_scale). The
// dequantized values the reference sees are kept per sequence, independently of the paging, so
// tests can recompute attention their own way. Every byte a correct kernel must not read (page 0,
// unused pages, unused tail slots of the last page) holds NaN; every output byte starts as NaN.
#pragma once

#include <cstdint>
#include <vector>

#include "harness/compare.h"
#include "quench/core/dtype.h"
#include "quench/kv_cache/kv_cache_layout.h"
#include "quench/ops/attention/attention_output.h"
#include "quench/ops/attention/attention_params.h"

namespace quench::testing_support {

// One sequence of the batch: q_len new query rows attending to kv_len cached tokens (the new
// ones included). {0, 0} is a graph-padding sequence; q_len 1 is a decode step.
struct SeqShape {
  int32_t q_len = 1;
  int32_t kv_len = 1;
};

// num_seqs decode steps with kv_len uniform in [min_kv_len, max_kv_len].
std::vector<SeqShape> random_decode_seqs(int32_t num_seqs, int32_t min_kv_len, int32_t max_kv_len,
                                         uint64_t seed);
// num_seqs prefill chunks with q_len uniform in [min_q_len, max_q_len] after a cached prefix
// uniform in [0, max_prefix_len].
std::vector<SeqShape> random_prefill_seqs(int32_t num_seqs, int32_t min_q_len, int32_t max_q_len,
                                          int32_t max_prefix_len, uint64_t seed);

struct AttentionProblemConfig {
  std::vector<SeqShape> seqs;  // at least one
  int32_t num_q_heads = 8;
  int32_t num_kv_heads = 2;
  int32_t head_dim = 64;
  int32_t page_size = 16;
  KvLayout layout = KvLayout::kNHD;
  DType q_dtype = DType::kBF16;
  DType kv_dtype = DType::kBF16;
  DType out_dtype = DType::kBF16;
  float q_scale = 1.0f;  // multiplies an FP8 query; ignored (and not applied) for bf16/f16
  // Multiplies the generated query values (normal(0, 1) otherwise): large magnitudes test the
  // kernels' range handling (bf16 q beyond f16's 65504 on f16 tensor-core paths).
  float q_magnitude = 1.0f;
  float k_scale = 1.0f;  // multiplies stored K (stored = dtype(x / k_scale))
  float v_scale = 1.0f;  // multiplies stored V
  float o_scale = 1.0f;  // FP8 output: stored = fp8(o / o_scale)
  // When true, KV head h gets its own k/v scale: k_scale (v_scale) times a random factor in
  // [0.5, 2).
  bool per_head_kv_scales = false;
  float sm_scale = 0.0f;  // 0: 1 / sqrt(head_dim)
  int32_t window_left = -1;
  float logit_soft_cap = 0.0f;
  bool sinks = false;                // random sink logits in [-1, 2) per q head
  float nvfp4_global_scale = 0.0f;   // 0: 448 * 6 / max|v dequantized| (|o| never exceeds it)
  int32_t out_scale_row_offset = 0;  // NVFP4: first scale row of this batch
  int32_t spare_pages = 3;           // pages no sequence uses (NaN-filled), besides page 0
  // With a window: the cache slots of a sequence's tokens that precede every one of its query
  // rows' windows hold NaN (an engine may recycle them), so a kernel that loads whole pages must
  // keep them out of its output. The reference never reads them.
  bool nan_before_window = false;
  bool lse = true;  // allocate and compare the log-sum-exp output
  uint64_t seed = 1;
};

// Where the buffers of a problem live for one run (host or device memory).
struct AttentionPointers {
  const void* q = nullptr;
  const void* k_cache = nullptr;
  const void* v_cache = nullptr;
  const int32_t* q_offsets = nullptr;
  const int32_t* seq_lens = nullptr;
  const int32_t* block_table = nullptr;
  const float* k_head_scales = nullptr;  // required when per_head_kv_scales
  const float* v_head_scales = nullptr;  // required when per_head_kv_scales
  const float* sinks = nullptr;          // required when sinks
  void* out = nullptr;
  uint8_t* out_block_scales = nullptr;  // required for nvfp4 output
  float* lse = nullptr;                 // optional
};

class AttentionProblem {
 public:
  // Builds the inputs and poisoned outputs; throws quench::Error on an inconsistent config.
  explicit AttentionProblem(const AttentionProblemConfig& config);

  const AttentionProblemConfig& config() const { return config_; }
  int32_t num_seqs() const { return static_cast<int32_t>(config_.seqs.size()); }
  int32_t num_tokens() const { return q_offsets_.back(); }
  const KvCacheLayout& kv_layout() const { return kv_; }
  AttentionOutputFormat output_format() const;

  // Inputs, exactly as AttentionParams points at them.
  const std::vector<uint8_t>& q_bytes() const { return q_bytes_; }  // [T, Hq, D] q_dtype
  const std::vector<uint8_t>& k_cache_bytes() const { return k_cache_; }
  const std::vector<uint8_t>& v_cache_bytes() const { return v_cache_; }
  const std::vector<int32_t>& q_offsets() const { return q_offsets_; }      // [B + 1]
  const std::vector<int32_t>& seq_lens() const { return seq_lens_; }        // [B]
  const std::vector<int32_t>& block_table() const { return block_table_; }  // [B, stride]
  int32_t block_table_stride() const { return block_table_stride_; }
  const std::vector<float>& k_head_scales() const { return k_head_scales_; }  // [Hkv] or empty
  const std::vector<float>& v_head_scales() const { return v_head_scales_; }  // [Hkv] or empty
  const std::vector<float>& sinks() const { return sinks_; }                  // [Hq] or empty

  // Poisoned output buffers, the initial contents for every implementation: NaN bytes (nvfp4
  // data 0xff, and NaN e4m3 block scales in this batch's rows, zeros elsewhere). q and out hold
  // at least 16 bytes so that an all-padding batch still has non-null buffers.
  const std::vector<uint8_t>& poisoned_out() const { return poisoned_out_; }
  const std::vector<uint8_t>& poisoned_block_scales() const { return poisoned_scales_; }  // nvfp4
  const std::vector<float>& poisoned_lse() const { return poisoned_lse_; }  // [T, Hq] or empty

  // Params over the given buffers; every scalar field comes from the config.
  AttentionParams params_with(const AttentionPointers& pointers) const;
  // Params over this problem's host inputs, writing to the caller's host outputs (block scales
  // only for nvfp4, lse may be null).
  AttentionParams host_params(void* out, uint8_t* out_block_scales, float* lse) const;

  // Dequantized inputs as the reference sees them: q [T, Hq, D]; k, v of sequence b
  // [kv_len_b, Hkv, D] by absolute position.
  float q_value(int64_t token, int32_t head, int32_t dim) const;
  float k_value(int32_t seq, int32_t pos, int32_t kv_head, int32_t dim) const;
  float v_value(int32_t seq, int32_t pos, int32_t kv_head, int32_t dim) const;
  float k_scale_of(int32_t kv_head) const;
  float v_scale_of(int32_t kv_head) const;
  float sm_scale() const;
  float nvfp4_global_scale() const { return nvfp4_global_scale_; }
  // The sequence of query row `token` and its absolute position in that sequence.
  int32_t seq_of_token(int64_t token) const;
  int32_t pos_of_token(int64_t token) const;

  // Runs the CPU reference into the expected_* buffers (copies of the poisoned ones); for an FP8
  // output also once with bf16 output, the values before the output's rounding.
  void compute_reference();
  bool has_reference() const { return has_reference_; }
  const std::vector<uint8_t>& expected_out() const;
  const std::vector<uint8_t>& expected_block_scales() const;
  const std::vector<float>& expected_lse() const;
  std::vector<float> expected_values() const;  // decoded expected_out [T, Hq * D]

  // Compares an implementation's stored output (and its block scales for nvfp4) with the
  // reference's, decoded to floats; FP8 outputs with the RoundingSlack of compare.h.
  CompareResult compare_output(const void* actual_out, const uint8_t* actual_block_scales,
                               Tolerance tolerance) const;
  // Compares an implementation's lse [T, Hq] with the reference's.
  CompareResult compare_lse(const float* actual_lse, Tolerance tolerance) const;

 private:
  void build_scales_and_sinks();
  void build_query();
  void build_caches();
  void build_outputs();
  void add_sequence_caches(int32_t seq, const std::vector<int32_t>& pages);

  AttentionProblemConfig config_;
  KvCacheLayout kv_;
  std::vector<int32_t> q_offsets_, seq_lens_, block_table_;
  std::vector<int32_t> token_seq_;  // [T]
  int32_t block_table_stride_ = 0;
  std::vector<float> k_head_scales_, v_head_scales_, sinks_;
  std::vector<uint8_t> q_bytes_, k_cache_, v_cache_;
  std::vector<float> q_values_;                          // [T, Hq, D]
  std::vector<std::vector<float>> k_values_, v_values_;  // per seq [kv_len, Hkv, D]
  float nvfp4_global_scale_ = 1.0f;
  std::vector<uint8_t> poisoned_out_, poisoned_scales_;
  std::vector<float> poisoned_lse_;
  int32_t out_scale_rows_ = 0;
  bool has_reference_ = false;
  std::vector<uint8_t> expected_out_, expected_scales_;
  std::vector<float> expected_lse_;
  std::vector<float> unrounded_values_;  // FP8 outputs: the reference with bf16 output
};

}  // namespace quench::testing_support
