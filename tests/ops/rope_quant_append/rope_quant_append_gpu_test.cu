// The fused RoPE + quantize + paged KV append kernel and the unfused chain against the CPU
// reference (rope_quant_append_reference), over styles, partial rotary, Llama-3 scaling, cos/sin
// cache vs in-kernel sincos, q/k RMSNorm, q bf16/FP8/split, KV bf16/e4m3/e5m2, NHD/HND, pages
// 16/32/64, head dims 64/128/256, per-tensor and per-head non-unit scales, strided views into one
// fused qkv tensor and padding tokens. Every output buffer starts poisoned, identically for the
// GPU and the reference: bytes outside the rows/slots of real tokens must come back unchanged;
// written elements must be bit-exact where the arithmetic is the same (fused, cos/sin cache, no
// norm) and otherwise within kMaxUlps codes (kMaxFp8Codes for FP8) or within kHeadRowAbsTol times
// the largest magnitude of their head row (x1*c - x2*s cancels: a near-zero output carries the
// absolute error of its row's inputs, many ulps of itself). The LargeT grid runs every
// instantiation of the fused kernel (head dim x style x cos/sin source x norm) on thousands of
// tokens, so that each work split the host picks (one warp per token, or several) is exercised.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "harness/expect_error.h"
#include "harness/random_inputs.h"
#include "quench/core/error.h"
#include "quench/numerics/bf16.h"
#include "quench/numerics/fp8.h"
#include "quench/ops/rope/rope_reference.h"
#include "quench/ops/rope_quant_append/rope_append_path.h"
#include "quench/ops/rope_quant_append/rope_quant_append.h"
#include "quench/ops/rope_quant_append/rope_quant_append_reference.h"

namespace quench {
namespace {

constexpr uint8_t kPoison = 0xA5;
// bf16 outputs of the inexact paths may differ by 2 ulps (their fp32 arithmetic differs by a few
// fp32 ulps, then rounds once or, unfused, twice); FP8 ones by one code only: a code is 6-12% of
// the value, and an arithmetic difference of ~1e-6 moves a value across at most one boundary.
constexpr int32_t kMaxUlps = 2;
constexpr int32_t kMaxFp8Codes = 1;
constexpr double kHeadRowAbsTol = 1.0 / 1024.0;

void cuda_check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) fail(str_cat(what, ": ", cudaGetErrorString(status)));
}

// Owns one device allocation.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes > 0) cuda_check(cudaMalloc(&ptr_, bytes), "cudaMalloc");
  }
  template <typename T>
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size() * sizeof(T)) {
    if (bytes_ > 0)
      cuda_check(cudaMemcpy(ptr_, host.data(), bytes_, cudaMemcpyHostToDevice), "upload");
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    std::swap(ptr_, other.ptr_);
    std::swap(bytes_, other.bytes_);
    return *this;
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  template <typename T>
  std::vector<T> download() const {
    std::vector<T> host(bytes_ / sizeof(T));
    if (bytes_ > 0)
      cuda_check(cudaMemcpy(host.data(), ptr_, bytes_, cudaMemcpyDeviceToHost), "download");
    return host;
  }
  // Bytes [first, first + bytes) of the allocation.
  std::vector<uint8_t> download_range(size_t first, size_t bytes) const {
    if (first + bytes > bytes_)
      fail(str_cat("download_range past the buffer's ", bytes_, " bytes"));
    std::vector<uint8_t> host(bytes);
    if (bytes > 0) {
      cuda_check(cudaMemcpy(host.data(), static_cast<const uint8_t*>(ptr_) + first, bytes,
                            cudaMemcpyDeviceToHost),
                 "download");
    }
    return host;
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

enum class QRows { kAllBf16, kAllFp8, kSplit };

struct CaseSpec {
  std::string name;
  int32_t tokens = 37;
  int32_t q_heads = 8;
  int32_t kv_heads = 2;
  int32_t head_dim = 128;
  RopeStyle style = RopeStyle::kNeox;
  int32_t rotary_dim = 128;
  bool llama3 = false;
  bool use_cache = true;
  bool use_norm = false;
  QRows q_rows = QRows::kSplit;
  DType q_fp8 = DType::kFP8E4M3;
  DType kv_dtype = DType::kFP8E4M3;
  KvLayout layout = KvLayout::kNHD;
  int32_t page_size = 16;
  bool per_head_scales = false;
  bool fused_qkv = false;   // q/k/v as strided views into one [T, (Hq + 2 Hkv) * D + 8] tensor
  int32_t padding = 4;      // tokens with slot -1
  int32_t padding_run = 0;  // consecutive tokens with slot -1 from the middle of the batch
  int32_t max_position = 4096;
  // > 0: the caches' pages start at page first_page of a larger pool (slots shifted to match),
  // so that the kernels write past 4 GiB; the pool's pages below hold poison.
  int32_t first_page = 0;
};

// Element codes as ordered integers, so that |a - b| counts representable values between them.
int32_t ordered_code(uint32_t code, int32_t bits) {
  const uint32_t sign = 1u << (bits - 1);
  const auto magnitude = static_cast<int32_t>(code & (sign - 1));
  return (code & sign) ? -magnitude : magnitude;
}

float decode(uint32_t code, DType dtype) {
  if (dtype == DType::kBF16) return bf16_bits_to_float(static_cast<uint16_t>(code));
  return fp8_to_float(static_cast<uint8_t>(code), fp8_format_of(dtype));
}

uint32_t element_code(const std::vector<uint8_t>& bytes, size_t i, size_t elem_bytes) {
  uint32_t code = bytes[i * elem_bytes];
  if (elem_bytes == 2) code |= static_cast<uint32_t>(bytes[i * elem_bytes + 1]) << 8;
  return code;
}

// Compares one output buffer element by element. written[i] says whether element i belongs to a
// real token (reference wrote it); other elements must keep their poison bytes exactly. Rows of
// row_elems are reported; head rows of head_dim elements set the absolute tolerance.
::testing::AssertionResult compare_buffer(const std::string& what, DType dtype,
                                          const std::vector<uint8_t>& got,
                                          const std::vector<uint8_t>& want,
                                          const std::vector<bool>& written, int32_t row_elems,
                                          int32_t head_dim, bool exact) {
  const size_t elem_bytes = dtype == DType::kBF16 ? 2 : 1;
  const int32_t bits = static_cast<int32_t>(elem_bytes * 8);
  int64_t bad = 0, touched_poison = 0, inexact = 0;
  double max_abs = 0.0, max_rel = 0.0;
  std::string first;
  const auto head = static_cast<size_t>(head_dim);
  double head_row_max = 0.0;  // largest finite |want| of the current head row
  for (size_t i = 0; i < written.size(); ++i) {
    if (i % head == 0) {
      head_row_max = 0.0;
      for (size_t j = i; j < i + head && j < written.size(); ++j) {
        const double v = std::fabs(double{decode(element_code(want, j, elem_bytes), dtype)});
        if (written[j] && std::isfinite(v)) head_row_max = std::max(head_row_max, v);
      }
    }
    const uint32_t g = element_code(got, i, elem_bytes), w = element_code(want, i, elem_bytes);
    if (g == w) continue;
    const int32_t ulps = std::abs(ordered_code(g, bits) - ordered_code(w, bits));
    const float gv = decode(g, dtype), wv = decode(w, dtype);
    const bool close = ulps <= (elem_bytes == 1 ? kMaxFp8Codes : kMaxUlps) ||
                       std::fabs(double{gv} - double{wv}) <= kHeadRowAbsTol * head_row_max;
    const bool ok = written[i] && !exact && close;
    if (written[i]) {
      ++inexact;
      max_abs = std::max(max_abs, static_cast<double>(std::fabs(gv - wv)));
      max_rel = std::max(max_rel, std::fabs(gv - wv) / std::max(1e-6, std::fabs(double{wv})));
    } else {
      ++touched_poison;
    }
    if (ok) continue;
    if (++bad <= 5) {
      first += str_cat("\n    [row ", i / static_cast<size_t>(row_elems), " elem ",
                       i % static_cast<size_t>(row_elems), "] got ", gv, " (0x", std::hex, g,
                       ") want ", wv, " (0x", w, std::dec, ")",
                       written[i] ? "" : " POISON OVERWRITTEN", " ulps=", ulps);
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << ": " << bad << " bad of " << written.size() << " (" << touched_poison
         << " outside real tokens, " << inexact << " inexact written; max_abs " << max_abs
         << " max_rel " << max_rel << ", " << (exact ? "bit-exact" : "tolerance") << " mode)"
         << first;
}

// Host inputs, the reference outputs, and the device copies of one case.
class RopeAppendCase {
 public:
  explicit RopeAppendCase(const CaseSpec& spec) : spec_(spec) {
    testing_support::RandomInputs rng(1234u + spec.name.size() * 7919u);
    const int32_t T = spec.tokens, D = spec.head_dim;
    q_row_ = static_cast<int64_t>(spec.q_heads) * D;
    kv_row_ = static_cast<int64_t>(spec.kv_heads) * D;

    p_.num_tokens = T;
    p_.num_q_heads = spec.q_heads;
    p_.num_kv_heads = spec.kv_heads;
    p_.head_dim = D;
    p_.rope.style = spec.style;
    p_.rope.rotary_dim = spec.rotary_dim;
    p_.rope.theta = spec.llama3 ? 500000.0f : 10000.0f;
    if (spec.llama3) {
      p_.rope.llama3_factor = 8.0f;
      p_.rope.llama3_original_max_position = 1024;  // positions reach all three regimes
    }
    p_.kv.page_size = spec.page_size;
    p_.kv.num_kv_heads = spec.kv_heads;
    p_.kv.head_dim = D;
    p_.kv.dtype = spec.kv_dtype;
    p_.kv.layout = spec.layout;
    p_.kv.num_pages = (T + spec.page_size - 1) / spec.page_size + 3;  // page 0 null, spare pages

    // Inputs: N(0, 2) with a few outliers that saturate FP8; one fused tensor or three.
    const int64_t fused_row = q_row_ + 2 * kv_row_ + 8;
    const int64_t q_stride = spec.fused_qkv ? fused_row : q_row_;
    const int64_t kv_stride = spec.fused_qkv ? fused_row : kv_row_;
    auto make_bf16 = [&](size_t n) {
      std::vector<uint16_t> out;
      for (float x : rng.normal(n, 0.0f, 2.0f))
        out.push_back(float_to_bf16_bits(x));
      for (size_t i = 0; i < n; i += 997)
        out[i] = float_to_bf16_bits(i % 2 ? 300.0f : -250.0f);
      return out;
    };
    if (spec.fused_qkv) {
      qkv_ = make_bf16(static_cast<size_t>(T * fused_row));
    } else {
      q_ = make_bf16(static_cast<size_t>(T * q_row_));
      k_ = make_bf16(static_cast<size_t>(T * kv_row_));
      v_ = make_bf16(static_cast<size_t>(T * kv_row_));
    }
    // Infinite v elements (never rotated): FP8 must saturate them like fp8(inf / scale).
    uint16_t* v_rows = spec.fused_qkv ? qkv_.data() + q_row_ + kv_row_ : v_.data();
    v_rows[5] = 0x7f80;                                  // token 0: +inf
    v_rows[(T - 1) * kv_stride + kv_row_ - 3] = 0xff80;  // last token: -inf
    p_.q_row_stride = q_stride;
    p_.k_row_stride = kv_stride;
    p_.v_row_stride = kv_stride;

    // Positions: a few sequences at random offsets; slots: distinct, outside the null page,
    // shuffled, with `padding` tokens at -1.
    int32_t start = rng.uniform_int(0, spec.max_position - T);
    for (int32_t t = 0; t < T; ++t) {
      if (t % 11 == 0) start = rng.uniform_int(0, spec.max_position - T);
      positions_.push_back(start + t % 11);
    }
    std::vector<int64_t> free_slots;
    for (int64_t s = spec.page_size; s < int64_t{p_.kv.num_pages} * spec.page_size; ++s) {
      free_slots.push_back(s);
    }
    std::shuffle(free_slots.begin(), free_slots.end(), rng.engine());
    slots_.assign(free_slots.begin(), free_slots.begin() + T);
    for (int32_t i = 0; i < spec.padding && i < T; ++i)
      slots_[static_cast<size_t>((i * 7 + 1) % T)] = -1;
    for (int32_t i = T / 2; i < T / 2 + spec.padding_run && i < T; ++i)
      slots_[static_cast<size_t>(i)] = -1;

    if (spec.use_cache) {
      cos_sin_ = build_rope_cos_sin_cache(p_.rope, spec.max_position);
      p_.cos_sin_cache_positions = spec.max_position;
    }
    if (spec.use_norm) {
      for (int32_t d = 0; d < D; ++d) {
        q_norm_.push_back(float_to_bf16_bits(rng.uniform_float(0.5f, 1.5f)));
        k_norm_.push_back(float_to_bf16_bits(rng.uniform_float(0.5f, 1.5f)));
      }
      p_.norm_eps = 1e-6f;
    }
    p_.q_bf16_rows = spec.q_rows == QRows::kAllBf16 ? T : spec.q_rows == QRows::kAllFp8 ? 0 : T / 3;
    p_.q_fp8_dtype = spec.q_fp8;
    p_.q_scale = 0.043f;
    if (is_fp8(spec.kv_dtype)) {
      p_.k_scale.per_tensor = 0.021f;
      p_.v_scale.per_tensor = 0.0137f;
      if (spec.per_head_scales) {
        for (int32_t h = 0; h < spec.kv_heads; ++h) {
          k_head_scales_.push_back(rng.uniform_float(0.01f, 0.05f));
          v_head_scales_.push_back(rng.uniform_float(0.005f, 0.03f));
        }
      }
    }
  }

  // Runs the reference on host copies of the poisoned outputs; fills want_*.
  void run_reference() {
    RopeQuantAppendParams h = p_;
    bind_inputs(h, qkv_.data(), q_.data(), k_.data(), v_.data());
    h.positions = positions_.data();
    h.slot_mapping = slots_.data();
    h.cos_sin_cache = cos_sin_.empty() ? nullptr : cos_sin_.data();
    h.q_norm_weight = q_norm_.empty() ? nullptr : q_norm_.data();
    h.k_norm_weight = k_norm_.empty() ? nullptr : k_norm_.data();
    h.k_scale.per_head = k_head_scales_.empty() ? nullptr : k_head_scales_.data();
    h.v_scale.per_head = v_head_scales_.empty() ? nullptr : v_head_scales_.data();
    want_q_bf16_ = poisoned(q_bf16_bytes());
    want_q_fp8_ = poisoned(q_fp8_bytes());
    want_k_cache_ = poisoned(static_cast<size_t>(p_.kv.tensor_bytes()));
    want_v_cache_ = poisoned(static_cast<size_t>(p_.kv.tensor_bytes()));
    h.q_out_bf16 = reinterpret_cast<uint16_t*>(want_q_bf16_.data());
    h.q_out_fp8 = want_q_fp8_.data();
    h.k_cache = want_k_cache_.data();
    h.v_cache = want_v_cache_.data();
    rope_quant_append_reference(h);
  }

  // Runs one GPU path on fresh poisoned outputs and compares every buffer with the reference;
  // the fused path with `fused_options` when given (else the environment's), and with
  // `in_graph` captured into a CUDA graph (global capture mode) that is then replayed. Returns
  // the four output buffers (q bf16, q fp8, k cache, v cache) as bytes.
  std::vector<std::vector<uint8_t>> run_and_compare(
      RopeAppendPath path, const FusedRopeAppendOptions* fused_options = nullptr,
      bool in_graph = false) {
    DeviceBuffer qkv(qkv_), q(q_), k(k_), v(v_), positions(positions_);
    DeviceBuffer cos_sin(cos_sin_), q_norm(q_norm_), k_norm(k_norm_);
    DeviceBuffer k_head_scales(k_head_scales_), v_head_scales(v_head_scales_);
    DeviceBuffer q_bf16(poisoned(q_bf16_bytes())), q_fp8(poisoned(q_fp8_bytes()));
    // The caches: the case's pages at the pool's page spec_.first_page (0: the pool is the cache).
    const size_t first_byte = static_cast<size_t>(spec_.first_page) *
                              static_cast<size_t>(p_.kv.tensor_bytes() / p_.kv.num_pages);
    const size_t cache_bytes = static_cast<size_t>(p_.kv.tensor_bytes());
    DeviceBuffer k_cache(first_byte + cache_bytes), v_cache(first_byte + cache_bytes);
    cuda_check(cudaMemset(k_cache.as<void>(), kPoison, first_byte + cache_bytes), "poison k");
    cuda_check(cudaMemset(v_cache.as<void>(), kPoison, first_byte + cache_bytes), "poison v");
    std::vector<int64_t> pool_slots = slots_;
    for (int64_t& slot : pool_slots) {
      if (slot >= 0) slot += int64_t{spec_.first_page} * spec_.page_size;
    }
    DeviceBuffer slots(pool_slots);
    RopeQuantAppendParams d = p_;
    d.kv.num_pages += spec_.first_page;
    bind_inputs(d, qkv.as<uint16_t>(), q.as<uint16_t>(), k.as<uint16_t>(), v.as<uint16_t>());
    d.positions = positions.as<int32_t>();
    d.slot_mapping = slots.as<int64_t>();
    d.cos_sin_cache = cos_sin_.empty() ? nullptr : cos_sin.as<float>();
    d.q_norm_weight = q_norm_.empty() ? nullptr : q_norm.as<uint16_t>();
    d.k_norm_weight = k_norm_.empty() ? nullptr : k_norm.as<uint16_t>();
    d.k_scale.per_head = k_head_scales_.empty() ? nullptr : k_head_scales.as<float>();
    d.v_scale.per_head = v_head_scales_.empty() ? nullptr : v_head_scales.as<float>();
    d.q_out_bf16 = q_bf16.as<uint16_t>();
    d.q_out_fp8 = q_fp8.as<uint8_t>();
    d.k_cache = k_cache.as<void>();
    d.v_cache = v_cache.as<void>();
    DeviceBuffer workspace(rope_quant_append_workspace_bytes(d));
    if (in_graph) {
      cudaStream_t stream;
      cuda_check(cudaStreamCreate(&stream), "stream");
      cudaGraph_t graph;
      cudaGraphExec_t exec;
      cuda_check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "begin capture");
      rope_quant_append_cuda(d, *fused_options, stream);
      cuda_check(cudaStreamEndCapture(stream, &graph), "end capture");
      cuda_check(cudaGraphInstantiate(&exec, graph, 0), "graph instantiate");
      cuda_check(cudaGraphLaunch(exec, stream), "graph launch");
      cuda_check(cudaStreamSynchronize(stream), "graph replay");
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
      cudaStreamDestroy(stream);
    } else if (path == RopeAppendPath::kFused && fused_options != nullptr) {
      rope_quant_append_cuda(d, *fused_options, nullptr);
    } else {
      run_rope_quant_append(
          d, path, nullptr,
          RopeAppendWorkspace{workspace.as<void>(), rope_quant_append_workspace_bytes(d)});
    }
    cuda_check(cudaDeviceSynchronize(), "rope_quant_append");

    // Same arithmetic as the reference only on the fused path with the cos/sin cache and no norm;
    // the unfused chain rounds its bf16 intermediate, so only its FP8 outputs may differ.
    const bool fused_exact = path == RopeAppendPath::kFused && spec_.use_cache && !spec_.use_norm;
    const bool bf16_exact = spec_.use_cache && !spec_.use_norm;
    const std::string options_tag =
        fused_options == nullptr
            ? ""
            : str_cat(" ", fused_row_schedule_name(fused_options->schedule),
                      fused_options->prefetch_split_tokens ? " prefetch" : "", " setup ",
                      fused_setup_order_name(fused_options->setup_order), in_graph ? " graph" : "");
    const std::string tag =
        str_cat(spec_.name, " [", rope_append_path_name(path), options_tag, "] ");
    std::vector<std::vector<uint8_t>> outputs = {q_bf16.download<uint8_t>(),
                                                 q_fp8.download<uint8_t>(),
                                                 k_cache.download_range(first_byte, cache_bytes),
                                                 v_cache.download_range(first_byte, cache_bytes)};
    EXPECT_TRUE(compare_buffer(tag + "q_out_bf16", DType::kBF16, outputs[0], want_q_bf16_,
                               q_written(true), static_cast<int32_t>(q_row_), p_.head_dim,
                               fused_exact || bf16_exact));
    EXPECT_TRUE(compare_buffer(tag + "q_out_fp8", p_.q_fp8_dtype, outputs[1], want_q_fp8_,
                               q_written(false), static_cast<int32_t>(q_row_), p_.head_dim,
                               fused_exact));
    const bool kv_exact = fused_exact || (bf16_exact && p_.kv.dtype == DType::kBF16);
    EXPECT_TRUE(compare_buffer(tag + "k_cache", p_.kv.dtype, outputs[2], want_k_cache_,
                               cache_written(), p_.head_dim, p_.head_dim, kv_exact));
    // v is never rotated: every path is bit-exact.
    EXPECT_TRUE(compare_buffer(tag + "v_cache", p_.kv.dtype, outputs[3], want_v_cache_,
                               cache_written(), p_.head_dim, p_.head_dim, true));
    return outputs;
  }

 private:
  void bind_inputs(RopeQuantAppendParams& p, uint16_t* qkv, uint16_t* q, uint16_t* k,
                   uint16_t* v) const {
    if (spec_.fused_qkv) {
      p.q = qkv;
      p.k = qkv + q_row_;
      p.v = qkv + q_row_ + kv_row_;
    } else {
      p.q = q;
      p.k = k;
      p.v = v;
    }
  }
  size_t q_bf16_bytes() const { return static_cast<size_t>(spec_.tokens * q_row_ * 2); }
  size_t q_fp8_bytes() const { return static_cast<size_t>(spec_.tokens * q_row_); }
  static std::vector<uint8_t> poisoned(size_t bytes) {
    return std::vector<uint8_t>(bytes, kPoison);
  }

  // Elements of q_out_bf16 (bf16 = true) or q_out_fp8 that a real token writes.
  std::vector<bool> q_written(bool bf16) const {
    std::vector<bool> w(static_cast<size_t>(spec_.tokens * q_row_), false);
    for (int32_t t = 0; t < spec_.tokens; ++t) {
      if (slots_[static_cast<size_t>(t)] < 0 || (t < p_.q_bf16_rows) != bf16) continue;
      std::fill_n(w.begin() + t * q_row_, q_row_, true);
    }
    return w;
  }
  std::vector<bool> cache_written() const {
    std::vector<bool> w(static_cast<size_t>(p_.kv.tensor_elems()), false);
    for (int64_t slot : slots_) {
      if (slot < 0) continue;
      for (int32_t h = 0; h < spec_.kv_heads; ++h) {
        const int64_t at = p_.kv.offset(slot / spec_.page_size, slot % spec_.page_size, h, 0);
        std::fill_n(w.begin() + at, p_.head_dim, true);
      }
    }
    return w;
  }

  CaseSpec spec_;
  RopeQuantAppendParams p_;
  int64_t q_row_ = 0, kv_row_ = 0;
  std::vector<uint16_t> qkv_, q_, k_, v_, q_norm_, k_norm_;
  std::vector<int32_t> positions_;
  std::vector<int64_t> slots_;
  std::vector<float> cos_sin_, k_head_scales_, v_head_scales_;
  std::vector<uint8_t> want_q_bf16_, want_q_fp8_, want_k_cache_, want_v_cache_;
};

std::vector<CaseSpec> grid() {
  std::vector<CaseSpec> cases;
  auto add = [&](const std::string& name, auto&& edit) {
    CaseSpec c;
    c.name = name;
    edit(c);
    cases.push_back(c);
  };
  add("neox_cache_split_e4m3_nhd16", [](CaseSpec&) {});
  add("gptj_cache", [](CaseSpec& c) { c.style = RopeStyle::kGptj; });
  add("neox_partial64", [](CaseSpec& c) { c.rotary_dim = 64; });
  add("neox_partial48_hnd32", [](CaseSpec& c) {
    c.rotary_dim = 48;  // 3 lanes per half: the partner is not a power-of-two lane away
    c.layout = KvLayout::kHND;
    c.page_size = 32;
  });
  add("gptj_partial32_e5m2", [](CaseSpec& c) {
    c.style = RopeStyle::kGptj;
    c.rotary_dim = 32;
    c.kv_dtype = DType::kFP8E5M2;
  });
  add("neox_llama3_cache", [](CaseSpec& c) { c.llama3 = true; });
  add("neox_llama3_sincos", [](CaseSpec& c) {
    c.llama3 = true;
    c.use_cache = false;
  });
  add("neox_sincos_far_positions", [](CaseSpec& c) {
    c.use_cache = false;
    c.max_position = 200000;  // exercises sincos range reduction
  });
  add("gptj_sincos_hnd64", [](CaseSpec& c) {
    c.style = RopeStyle::kGptj;
    c.use_cache = false;
    c.layout = KvLayout::kHND;
    c.page_size = 64;
  });
  add("qwen3_norm_cache", [](CaseSpec& c) {
    c.use_norm = true;
    c.q_heads = 16;
    c.kv_heads = 2;
  });
  add("qwen3_norm_sincos_perhead", [](CaseSpec& c) {
    c.use_norm = true;
    c.use_cache = false;
    c.per_head_scales = true;
  });
  add("q_all_bf16_kv_bf16", [](CaseSpec& c) {
    c.q_rows = QRows::kAllBf16;
    c.kv_dtype = DType::kBF16;
  });
  add("q_all_fp8_e5m2_kv_bf16_hnd", [](CaseSpec& c) {
    c.q_rows = QRows::kAllFp8;
    c.q_fp8 = DType::kFP8E5M2;
    c.kv_dtype = DType::kBF16;
    c.layout = KvLayout::kHND;
  });
  add("per_head_scales_hnd16", [](CaseSpec& c) {
    c.per_head_scales = true;
    c.layout = KvLayout::kHND;
  });
  add("per_head_scales_e5m2_nhd64", [](CaseSpec& c) {
    c.per_head_scales = true;
    c.kv_dtype = DType::kFP8E5M2;
    c.page_size = 64;
  });
  add("fused_qkv_views", [](CaseSpec& c) { c.fused_qkv = true; });
  add("fused_qkv_norm_gptj_page32", [](CaseSpec& c) {
    c.fused_qkv = true;
    c.use_norm = true;
    c.style = RopeStyle::kGptj;
    c.page_size = 32;
  });
  add("head_dim64_odd_kv_heads", [](CaseSpec& c) {
    c.head_dim = 64;
    c.rotary_dim = 64;
    c.q_heads = 6;
    c.kv_heads = 3;  // one warp holds a k row and a v row
  });
  add("head_dim256_norm", [](CaseSpec& c) {
    c.head_dim = 256;
    c.rotary_dim = 256;
    c.q_heads = 4;
    c.kv_heads = 1;
    c.use_norm = true;
  });
  add("head_dim256_partial_gptj", [](CaseSpec& c) {
    c.head_dim = 256;
    c.rotary_dim = 64;
    c.style = RopeStyle::kGptj;
    c.q_heads = 4;
    c.kv_heads = 2;
  });
  add("single_token", [](CaseSpec& c) {
    c.tokens = 1;
    c.padding = 0;
  });
  add("all_padding", [](CaseSpec& c) {
    c.tokens = 8;
    c.padding = 8;
  });
  add("llama3_8b_shape_many_tokens", [](CaseSpec& c) {
    c.tokens = 300;
    c.q_heads = 32;
    c.kv_heads = 8;
    c.llama3 = true;
    c.padding = 17;
  });
  return cases;
}

class RopeQuantAppendGpu : public ::testing::TestWithParam<CaseSpec> {};

TEST_P(RopeQuantAppendGpu, MatchesReferenceFusedAndUnfused) {
  RopeAppendCase c(GetParam());
  c.run_reference();
  c.run_and_compare(RopeAppendPath::kFused);
  c.run_and_compare(RopeAppendPath::kUnfused);
  // Both row schedules, with and without the split-token prefetch: each against the reference,
  // and the schedules against each other byte for byte (same arithmetic per row, norm included).
  const FusedRopeAppendOptions ring{FusedRowSchedule::kRing, false};
  const FusedRopeAppendOptions ring_prefetch{FusedRowSchedule::kRing, true};
  const FusedRopeAppendOptions per_kind{FusedRowSchedule::kPerKind, true};
  // The ring with its setup loads forced before / after its row loads (the default picks by the
  // grid's size), with and without the prefetch.
  const FusedRopeAppendOptions ring_setup_first{FusedRowSchedule::kRing, false,
                                                FusedSetupOrder::kSetupFirst};
  const FusedRopeAppendOptions ring_rows_first{FusedRowSchedule::kRing, false,
                                               FusedSetupOrder::kRowsFirst};
  const FusedRopeAppendOptions ring_rows_first_prefetch{FusedRowSchedule::kRing, true,
                                                        FusedSetupOrder::kRowsFirst};
  const auto ring_out = c.run_and_compare(RopeAppendPath::kFused, &ring);
  c.run_and_compare(RopeAppendPath::kFused, &ring_prefetch);
  const auto per_kind_out = c.run_and_compare(RopeAppendPath::kFused, &per_kind);
  const auto setup_first_out = c.run_and_compare(RopeAppendPath::kFused, &ring_setup_first);
  const auto rows_first_out = c.run_and_compare(RopeAppendPath::kFused, &ring_rows_first);
  c.run_and_compare(RopeAppendPath::kFused, &ring_rows_first_prefetch);
  const char* names[] = {"q_out_bf16", "q_out_fp8", "k_cache", "v_cache"};
  const auto expect_same = [&](const std::vector<std::vector<uint8_t>>& other,
                               const char* other_name) {
    for (size_t b = 0; b < ring_out.size(); ++b) {
      const auto [ring_it, other_it] =
          std::mismatch(ring_out[b].begin(), ring_out[b].end(), other[b].begin());
      EXPECT_TRUE(ring_it == ring_out[b].end())
          << GetParam().name << " " << names[b] << ": ring and " << other_name
          << " differ first at byte " << (ring_it - ring_out[b].begin()) << " (ring 0x" << std::hex
          << int{*ring_it} << ", " << other_name << " 0x" << int{*other_it} << std::dec << ")";
    }
  };
  expect_same(per_kind_out, "per_kind");
  expect_same(setup_first_out, "ring setup-first");
  expect_same(rows_first_out, "ring rows-first");
}

INSTANTIATE_TEST_SUITE_P(Grid, RopeQuantAppendGpu, ::testing::ValuesIn(grid()),
                         [](const ::testing::TestParamInfo<CaseSpec>& info) {
                           return info.param.name;
                         });

// Every instantiation of the fused kernel (head dim x style x cos/sin source x norm) on thousands
// of tokens: odd token counts, a run of padding tokens, heads that do not fill the lane groups of
// a warp evenly (6/3 at head dim 64: 4 rows per warp; 12/3 at 128: 2 rows per warp), and both
// work splits (T = 4229 > 132 SMs x 32 warps: one warp per token; T = 2053: several).
std::vector<CaseSpec> large_t_grid() {
  std::vector<CaseSpec> cases;
  int32_t index = 0;
  for (int32_t head_dim : {64, 128, 256}) {
    for (RopeStyle style : {RopeStyle::kNeox, RopeStyle::kGptj}) {
      for (bool use_cache : {true, false}) {
        for (bool use_norm : {false, true}) {
          CaseSpec c;
          c.head_dim = head_dim;
          c.rotary_dim = index % 3 == 2 ? head_dim / 2 : head_dim;
          c.style = style;
          c.use_cache = use_cache;
          c.use_norm = use_norm;
          c.llama3 = index % 4 == 1;
          c.q_heads = head_dim == 64 ? 6 : head_dim == 128 ? 12 : 4;
          c.kv_heads = head_dim == 256 ? 1 : 3;
          c.tokens = index % 2 == 0 ? 4229 : 2053;
          c.padding = 23;
          c.padding_run = 37;
          c.max_position = 8192;
          c.layout = index % 5 == 3 ? KvLayout::kHND : KvLayout::kNHD;
          c.page_size = index % 3 == 0 ? 16 : index % 3 == 1 ? 32 : 64;
          c.kv_dtype = index % 6 == 4 ? DType::kFP8E5M2 : DType::kFP8E4M3;
          c.per_head_scales = index % 4 == 2;
          c.fused_qkv = index % 4 == 3;
          c.name = str_cat("hd", head_dim, style == RopeStyle::kNeox ? "_neox" : "_gptj",
                           use_cache ? "_cache" : "_sincos", use_norm ? "_norm" : "", "_T",
                           c.tokens, c.rotary_dim < head_dim ? "_partial" : "");
          cases.push_back(c);
          ++index;
        }
      }
    }
  }
  CaseSpec llama;
  llama.name = "llama3_8b_T4133_bf16_cache";
  llama.tokens = 4133;
  llama.q_heads = 32;
  llama.kv_heads = 8;
  llama.llama3 = true;
  llama.max_position = 8192;
  llama.kv_dtype = DType::kBF16;
  llama.padding_run = 64;
  cases.push_back(llama);
  CaseSpec qwen = llama;
  qwen.name = "qwen3_32b_T4133_norm_sincos_e5m2";
  qwen.q_heads = 64;
  qwen.llama3 = false;
  qwen.use_norm = true;
  qwen.use_cache = false;
  qwen.q_fp8 = DType::kFP8E5M2;
  qwen.kv_dtype = DType::kFP8E4M3;
  qwen.q_rows = QRows::kAllFp8;
  cases.push_back(qwen);
  return cases;
}

INSTANTIATE_TEST_SUITE_P(LargeT, RopeQuantAppendGpu, ::testing::ValuesIn(large_t_grid()),
                         [](const ::testing::TestParamInfo<CaseSpec>& info) {
                           return info.param.name;
                         });

// The fused kernel around its work-split thresholds on the H200 (132 SMs x 32 resident warps =
// 4224 warps): T = 65 (first batch past the row-item kernel: many warps per token, most lane
// groups without a k/v row), T = 515 and 1024 (6 and 4 warps per token: the single wave that
// prefetches all its rows), T = 2112 / 2113 (2 warps per token, prefetching only k/v rows / 1
// warp, no prefetch), with padding slots, strided
// qkv and the norm path's variants (q bf16 / FP8 e4m3 / e5m2, KV bf16 / e4m3 / e5m2, per-head
// scales, partial rotary).
std::vector<CaseSpec> split_token_grid() {
  std::vector<CaseSpec> cases;
  auto add = [&](const std::string& name, auto&& edit) {
    CaseSpec c;
    c.name = name;
    c.max_position = 8192;
    edit(c);
    cases.push_back(c);
  };
  add("qwen3_32b_T1024_norm_cache_split_perhead_fused_qkv", [](CaseSpec& c) {
    c.tokens = 1024;
    c.q_heads = 64;
    c.kv_heads = 8;
    c.use_norm = true;
    c.per_head_scales = true;
    c.fused_qkv = true;
    c.padding = 9;
    c.padding_run = 40;
  });
  add("qwen3_32b_T1024_norm_sincos_q_bf16_kv_bf16_hnd32", [](CaseSpec& c) {
    c.tokens = 1024;
    c.q_heads = 64;
    c.kv_heads = 8;
    c.use_norm = true;
    c.use_cache = false;
    c.q_rows = QRows::kAllBf16;
    c.kv_dtype = DType::kBF16;
    c.layout = KvLayout::kHND;
    c.page_size = 32;
  });
  add("norm_T1024_half_padding", [](CaseSpec& c) {
    c.tokens = 1024;
    c.q_heads = 16;
    c.kv_heads = 4;
    c.use_norm = true;
    c.padding_run = 512;
  });
  add("norm_T65_gptj_hd64_q_e5m2_kv_e5m2_perhead_fused_qkv", [](CaseSpec& c) {
    c.tokens = 65;
    c.head_dim = 64;
    c.rotary_dim = 64;
    c.style = RopeStyle::kGptj;
    c.q_heads = 6;
    c.kv_heads = 3;
    c.use_norm = true;
    c.q_rows = QRows::kAllFp8;
    c.q_fp8 = DType::kFP8E5M2;
    c.kv_dtype = DType::kFP8E5M2;
    c.per_head_scales = true;
    c.fused_qkv = true;
    c.padding = 5;
  });
  add("T65_neox_hd128_plain", [](CaseSpec& c) {
    c.tokens = 65;
    c.q_heads = 32;
    c.kv_heads = 8;
    c.padding = 3;
  });
  add("norm_T515_neox_partial48_hnd64", [](CaseSpec& c) {
    c.tokens = 515;
    c.rotary_dim = 48;
    c.q_heads = 12;
    c.kv_heads = 2;
    c.use_norm = true;
    c.layout = KvLayout::kHND;
    c.page_size = 64;
  });
  add("norm_T515_gptj_partial32_sincos", [](CaseSpec& c) {
    c.tokens = 515;
    c.rotary_dim = 32;
    c.style = RopeStyle::kGptj;
    c.use_cache = false;
    c.q_heads = 12;
    c.kv_heads = 2;
    c.use_norm = true;
  });
  add("llama3_8b_T2112_cache_padding_run", [](CaseSpec& c) {
    c.tokens = 2112;
    c.q_heads = 32;
    c.kv_heads = 8;
    c.llama3 = true;
    c.padding_run = 64;
  });
  add("llama3_8b_T2113_fused_qkv_perhead", [](CaseSpec& c) {
    c.tokens = 2113;
    c.q_heads = 32;
    c.kv_heads = 8;
    c.fused_qkv = true;
    c.per_head_scales = true;
  });
  add("norm_T2112_hd256_kv_e5m2", [](CaseSpec& c) {
    c.tokens = 2112;
    c.head_dim = 256;
    c.rotary_dim = 256;
    c.q_heads = 8;
    c.kv_heads = 2;
    c.use_norm = true;
    c.kv_dtype = DType::kFP8E5M2;
  });
  return cases;
}

INSTANTIATE_TEST_SUITE_P(SplitT, RopeQuantAppendGpu, ::testing::ValuesIn(split_token_grid()),
                         [](const ::testing::TestParamInfo<CaseSpec>& info) {
                           return info.param.name;
                         });

// Writes past 4 GiB: every other case's cache is a few MiB, while one layer's K or V cache of a
// serving engine is often several GiB, so a slot offset computed in 32 bits would pass them all.
// Each case places its pages after a 4 GiB poisoned prefix of the pool: the row-item kernel
// (T <= 64), the ring and per-kind schedules and the unfused chain, NHD and HND, FP8 and bf16.
std::vector<CaseSpec> far_pages_grid() {
  const auto past_4gib = [](CaseSpec c) {
    const int64_t page_bytes =
        int64_t{c.page_size} * c.kv_heads * c.head_dim * (c.kv_dtype == DType::kBF16 ? 2 : 1);
    c.first_page = static_cast<int32_t>((int64_t{1} << 32) / page_bytes + 1);
    return c;
  };
  CaseSpec decode_step{"T37_fp8_nhd"};
  CaseSpec prefill{"T2053_bf16_hnd_page64"};
  prefill.tokens = 2053;
  prefill.kv_dtype = DType::kBF16;
  prefill.layout = KvLayout::kHND;
  prefill.page_size = 64;
  CaseSpec llama{"llama3_8b_T4229_e5m2_nhd_perhead"};
  llama.tokens = 4229;
  llama.max_position = 16384;  // positions are drawn below max_position - tokens
  llama.q_heads = 32;
  llama.kv_heads = 8;
  llama.llama3 = true;
  llama.kv_dtype = DType::kFP8E5M2;
  llama.per_head_scales = true;
  return {past_4gib(decode_step), past_4gib(prefill), past_4gib(llama)};
}

INSTANTIATE_TEST_SUITE_P(FarPages, RopeQuantAppendGpu, ::testing::ValuesIn(far_pages_grid()),
                         [](const ::testing::TestParamInfo<CaseSpec>& info) {
                           return info.param.name;
                         });

// The ring schedule reserves its dynamic shared memory on a kernel's first launch: here that
// first launch (hd 128, gptj, in-kernel sincos, norm: no other suite of this binary runs before
// it with that kernel, the plain TEST suites run before the parameterized ones) happens inside a
// stream capture, whose graph must then give the reference's outputs.
TEST(RopeQuantAppendGpuGraph, RingFirstLaunchInsideCapture) {
  CaseSpec spec;
  spec.name = "ring_graph_gptj_sincos_norm_T300";
  spec.tokens = 300;
  spec.q_heads = 16;
  spec.kv_heads = 4;
  spec.style = RopeStyle::kGptj;
  spec.use_cache = false;
  spec.use_norm = true;
  spec.padding = 7;
  RopeAppendCase c(spec);
  c.run_reference();
  const FusedRopeAppendOptions ring{FusedRowSchedule::kRing, true};
  c.run_and_compare(RopeAppendPath::kFused, &ring, true);
}

// Hand-checked: position 0 (cos 1, sin 0) makes RoPE the identity, so the FP8 k row is exactly
// fp8(x / k_scale) and the bf16 q row is the input.
TEST(RopeQuantAppendGpuHand, PositionZeroIsPlainQuantization) {
  RopeQuantAppendParams p;
  p.num_tokens = 1;
  p.num_q_heads = 1;
  p.num_kv_heads = 1;
  p.head_dim = 64;
  p.rope.rotary_dim = 64;
  p.kv.num_pages = 2;
  p.kv.page_size = 16;
  p.kv.num_kv_heads = 1;
  p.kv.head_dim = 64;
  p.kv.dtype = DType::kFP8E4M3;
  p.q_row_stride = p.k_row_stride = p.v_row_stride = 64;
  p.q_bf16_rows = 1;
  p.k_scale.per_tensor = 0.5f;
  p.v_scale.per_tensor = 0.25f;
  std::vector<uint16_t> x(64);
  for (int32_t d = 0; d < 64; ++d)
    x[static_cast<size_t>(d)] = float_to_bf16_bits(0.25f * static_cast<float>(d - 20));
  DeviceBuffer q(x), k(x), v(x), pos(std::vector<int32_t>{0}), slot(std::vector<int64_t>{17});
  DeviceBuffer q_out(std::vector<uint16_t>(64, 0xffff));
  DeviceBuffer k_cache(std::vector<uint8_t>(static_cast<size_t>(p.kv.tensor_bytes()), kPoison));
  DeviceBuffer v_cache(std::vector<uint8_t>(static_cast<size_t>(p.kv.tensor_bytes()), kPoison));
  p.q = q.as<uint16_t>();
  p.k = k.as<uint16_t>();
  p.v = v.as<uint16_t>();
  p.positions = pos.as<int32_t>();
  p.slot_mapping = slot.as<int64_t>();
  p.q_out_bf16 = q_out.as<uint16_t>();
  p.k_cache = k_cache.as<void>();
  p.v_cache = v_cache.as<void>();
  rope_quant_append_cuda(p, nullptr);
  cuda_check(cudaDeviceSynchronize(), "rope_quant_append");
  const auto q_got = q_out.download<uint16_t>();
  const auto k_got = k_cache.download<uint8_t>();
  const auto v_got = v_cache.download<uint8_t>();
  for (int32_t d = 0; d < 64; ++d) {
    const float xd = 0.25f * static_cast<float>(d - 20);
    EXPECT_EQ(q_got[static_cast<size_t>(d)], float_to_bf16_bits(xd)) << "d=" << d;
    // slot 17 = page 1, offset 1 (NHD, 1 head): element 64 * 16 + 64 + d.
    EXPECT_EQ(k_got[static_cast<size_t>(64 * 17 + d)], float_to_fp8_e4m3(xd / 0.5f)) << "d=" << d;
    EXPECT_EQ(v_got[static_cast<size_t>(64 * 17 + d)], float_to_fp8_e4m3(xd / 0.25f)) << "d=" << d;
  }
  EXPECT_EQ(k_got[64 * 16], kPoison);
  EXPECT_EQ(k_got[64 * 18], kPoison);
}

TEST(RopeQuantAppendGpuHand, RejectsWhatTheKernelsCannotDo) {
  RopeQuantAppendParams p;
  p.num_q_heads = 2;
  p.num_kv_heads = 1;
  p.head_dim = 128;
  p.kv.num_pages = 2;
  p.kv.num_kv_heads = 1;
  p.kv.head_dim = 128;
  p.q_row_stride = 256;
  p.k_row_stride = p.v_row_stride = 128;
  p.rope.rotary_dim = 40;
  EXPECT_FALSE(rope_quant_append_fused_unsupported_reason(p).empty());
  EXPECT_QUENCH_ERROR(rope_quant_append_cuda(p, nullptr), {"rotary_dim 40", "multiple of 16"});
  p.rope.rotary_dim = 128;
  EXPECT_TRUE(rope_quant_append_fused_unsupported_reason(p).empty());
  p.num_tokens = 1;
  std::vector<uint16_t> host(512);
  DeviceBuffer buffer(host), pos(std::vector<int32_t>{0}), slot(std::vector<int64_t>{16});
  p.q = p.k = p.v = buffer.as<uint16_t>();
  p.positions = pos.as<int32_t>();
  p.slot_mapping = slot.as<int64_t>();
  p.k_cache = p.v_cache = buffer.as<void>();
  p.q_out_fp8 = buffer.as<uint8_t>();
  p.k_row_stride = 132;
  EXPECT_QUENCH_ERROR(rope_quant_append_cuda(p, nullptr), {"k_row_stride 132", "multiple of 8"});
  p.k_row_stride = 128;
  p.q = buffer.as<uint16_t>() + 4;
  EXPECT_QUENCH_ERROR(rope_quant_append_cuda(p, nullptr), {"q (", "16-byte aligned"});
  EXPECT_QUENCH_ERROR(parse_rope_append_path("fast"), {"'fast'", "fused, unfused"});
}

}  // namespace
}  // namespace quench
