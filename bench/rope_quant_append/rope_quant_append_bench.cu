// "rope_append": fused RoPE + FP8 quantize + paged KV append vs the unfused chain, against the
// HBM copy ceiling measured in the same run.
//
// Cases: Llama-3-8B (32 q / 8 kv heads x 128) and Qwen3-32B (64 / 8 x 128, with q/k RMSNorm),
// T = 1 .. 16384 tokens, neox RoPE from the fp32 cos/sin cache at distinct positions, FP8 e4m3
// NHD cache with 16-token pages, q split by rows (T <= 64: a decode batch, every row bf16;
// larger T: 32 bf16 decode rows, the rest FP8 prefill rows), per-tensor scales != 1.
// Each case also times the copy kernel at the same byte count ("same_size_copy_tbps" in the note),
// next to the 1 GiB copy ceiling that the %-of-ceiling column reads, and the fused kernel's A/B
// variants ("per_kind_*": the row schedule before the ring; "ring_prefetch_*": the ring
// with the split-token L2 prefetch; "ring_setup_first_*" / "ring_rows_first_*": the ring with
// the token's setup loads forced before / after its first row loads (the default picks by the
// grid's size); "sincos_*": the default kernel computing cos/sin instead of reading the cache, at
// the bytes without the cache rows; the recorded value is the environment's choice, see
// fused_rope_append_options_from_env).
// Bytes = what the op must move: q/k/v read (bf16), positions, slots, one cos/sin row per token,
// q written (bf16 or FP8), k/v written to the cache (FP8). TB/s = bytes / time for both paths.
// Timing: each measurement is a CUDA graph of R back-to-back launches cycling over enough input/
// output sets to exceed the 50 MB L2 (at most 16 sets), timed with events; the median over 21
// replays divided by R. This excludes host launch gaps, as decode runs under graphs. For small T
// all 16 sets fit in L2, as in a decode step whose qkv comes straight from the GEMM.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "harness/random_inputs.h"
#include "quench/core/error.h"
#include "quench/numerics/bf16.h"
#include "quench/ops/rope/rope_reference.h"
#include "quench/ops/rope_quant_append/rope_append_path.h"
#include "quench/ops/rope_quant_append/rope_quant_append.h"
#include "support/bench_registry.h"
#include "support/gpu_clock_watch.h"
#include "support/graph_timing.h"

namespace quench::bench {
namespace {

// Owns one device allocation.
class DeviceMemory {
 public:
  explicit DeviceMemory(size_t bytes) {
    if (bytes > 0) cuda_check(cudaMalloc(&ptr_, bytes), "cudaMalloc");
  }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  ~DeviceMemory() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
};

template <typename T>
void upload(const std::vector<T>& host, void* device) {
  cuda_check(cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
             "upload");
}

// Deterministic bf16 noise in [-2, 2) from an integer hash (filling hundreds of MB on the host
// would dominate the run).
__global__ void fill_bf16_kernel(uint16_t* out, int64_t n, uint32_t seed) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 0x9e3779b1u ^ seed;
    h ^= h >> 15;
    h *= 0x2c1b3c6du;
    h ^= h >> 12;
    out[i] = float_to_bf16_bits(static_cast<float>(h >> 8) * (4.0f / 16777216.0f) - 2.0f);
  }
}

// The copy ceiling: 16-byte loads, four in flight per thread, then four stores.
__global__ void copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
    dst[i] = a;
    dst[i + stride] = b;
    dst[i + 2 * stride] = c;
    dst[i + 3 * stride] = d;
  }
  for (; i < n; i += stride)
    dst[i] = src[i];
}

// Best of the copy kernel and cudaMemcpyAsync over 1 GiB, in TB/s of bytes read + written.
double measure_copy_ceiling(cudaStream_t stream, std::string* how) {
  const size_t bytes = size_t{1} << 30;
  DeviceMemory src(bytes), dst(bytes);
  cuda_check(cudaMemset(src.as<void>(), 1, bytes), "memset");
  const auto n = static_cast<int64_t>(bytes / 16);
  int sms = 0;
  cuda_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "attribute");
  const double kernel_s = time_graph(stream, 4, 11, [&](int32_t) {
    copy_kernel<<<sms * 8, 256, 0, stream>>>(src.as<uint4>(), dst.as<uint4>(), n);
  });
  const double memcpy_s = time_graph(stream, 4, 11, [&](int32_t) {
    cuda_check(
        cudaMemcpyAsync(dst.as<void>(), src.as<void>(), bytes, cudaMemcpyDeviceToDevice, stream),
        "memcpy");
  });
  const double kernel_tbps = 2.0 * bytes / kernel_s * 1e-12;
  const double memcpy_tbps = 2.0 * bytes / memcpy_s * 1e-12;
  *how = str_cat("copy ceiling: kernel ", kernel_tbps, " TB/s, cudaMemcpyAsync ", memcpy_tbps,
                 " TB/s (1 GiB, read+write)");
  return std::max(kernel_tbps, memcpy_tbps);
}

// The copy kernel's TB/s at one case's size: `bytes` counted like op_bytes (half read, half
// written), rotating over `sets` source/destination pairs as the op rotates over its buffer
// sets, timed the same way. Small cases show what a pure copy loses to the launch and the ramp
// of a single short wave; the acceptance figure stays the 1 GiB ceiling.
double measure_same_size_copy(cudaStream_t stream, double bytes, int32_t sets, int32_t reps,
                              int32_t replays) {
  const auto n = std::max<int64_t>(1, static_cast<int64_t>(bytes / 2 / 16));
  std::vector<std::unique_ptr<DeviceMemory>> src, dst;
  for (int32_t s = 0; s < sets; ++s) {
    src.push_back(std::make_unique<DeviceMemory>(static_cast<size_t>(n) * 16));
    dst.push_back(std::make_unique<DeviceMemory>(static_cast<size_t>(n) * 16));
    cuda_check(cudaMemset(src.back()->as<void>(), 1, static_cast<size_t>(n) * 16), "memset");
  }
  int sms = 0;
  cuda_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "attribute");
  const auto blocks = static_cast<unsigned>(std::min<int64_t>(sms * 8, (n + 255) / 256));
  const double seconds = time_graph(stream, reps, replays, [&](int32_t r) {
    const auto set = static_cast<size_t>(r % sets);
    copy_kernel<<<blocks, 256, 0, stream>>>(src[set]->as<uint4>(), dst[set]->as<uint4>(), n);
  });
  return 2.0 * static_cast<double>(n) * 16 / seconds * 1e-12;
}

struct Shape {
  const char* name;
  int32_t q_heads;
  int32_t kv_heads;
  bool qk_norm;
};

// One complete set of inputs and outputs; several sets rotate to defeat the L2.
struct OpSet {
  DeviceMemory qkv, positions, slots, q_bf16, q_fp8, k_cache, v_cache;
  RopeQuantAppendParams params;

  OpSet(const RopeQuantAppendParams& base, int32_t set_index, const std::vector<int32_t>& pos,
        const std::vector<int64_t>& slot)
      : qkv(qkv_elems(base) * 2),
        positions(pos.size() * 4),
        slots(slot.size() * 8),
        q_bf16(q_elems(base) * 2),
        q_fp8(q_elems(base)),
        k_cache(static_cast<size_t>(base.kv.tensor_bytes())),
        v_cache(static_cast<size_t>(base.kv.tensor_bytes())),
        params(base) {
    fill_bf16_kernel<<<1024, 256>>>(qkv.as<uint16_t>(), static_cast<int64_t>(qkv_elems(base)),
                                    0x1234u + static_cast<uint32_t>(set_index));
    cuda_check(cudaGetLastError(), "fill");
    upload(pos, positions.as<void>());
    upload(slot, slots.as<void>());
    const int64_t q_row = static_cast<int64_t>(base.num_q_heads) * base.head_dim;
    const int64_t kv_row = static_cast<int64_t>(base.num_kv_heads) * base.head_dim;
    params.q = qkv.as<uint16_t>();
    params.k = qkv.as<uint16_t>() + q_row;
    params.v = qkv.as<uint16_t>() + q_row + kv_row;
    params.q_row_stride = params.k_row_stride = params.v_row_stride = q_row + 2 * kv_row;
    params.positions = positions.as<int32_t>();
    params.slot_mapping = slots.as<int64_t>();
    params.q_out_bf16 = q_bf16.as<uint16_t>();
    params.q_out_fp8 = q_fp8.as<uint8_t>();
    params.k_cache = k_cache.as<void>();
    params.v_cache = v_cache.as<void>();
  }
  static size_t q_elems(const RopeQuantAppendParams& p) {
    return static_cast<size_t>(p.num_tokens) * p.num_q_heads * p.head_dim;
  }
  static size_t qkv_elems(const RopeQuantAppendParams& p) {
    return static_cast<size_t>(p.num_tokens) * (p.num_q_heads + 2 * p.num_kv_heads) * p.head_dim;
  }
};

// Bytes the op must read and write (see the file comment).
double op_bytes(const RopeQuantAppendParams& p) {
  const double t = p.num_tokens, d = p.head_dim;
  const double read =
      t * (p.num_q_heads + 2.0 * p.num_kv_heads) * d * 2 + t * (4 + 8) + t * p.rope.rotary_dim * 4;
  const double q_written = (p.q_bf16_rows * 2.0 + (t - p.q_bf16_rows)) * p.num_q_heads * d;
  return read + q_written + t * 2.0 * p.num_kv_heads * d;
}

void run_rope_append_bench(const BenchOptions& options, BenchReporter& reporter) {
  cudaStream_t stream;
  cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  std::string copy_how;
  const double ceiling = measure_copy_ceiling(stream, &copy_how);
  std::printf("%s\n", copy_how.c_str());

  const std::vector<Shape> shapes = {{"llama3-8b", 32, 8, false}, {"qwen3-32b", 64, 8, true}};
  const std::vector<int32_t> token_counts =
      options.quick ? std::vector<int32_t>{1, 1024, 16384}
                    : std::vector<int32_t>{1, 16, 64, 256, 1024, 4096, 16384};
  constexpr int32_t kMaxPosition = 32768;
  RopeConfig rope;
  rope.rotary_dim = 128;
  rope.theta = 500000.0f;
  const std::vector<float> cos_sin_host = build_rope_cos_sin_cache(rope, kMaxPosition);
  DeviceMemory cos_sin(cos_sin_host.size() * 4);
  upload(cos_sin_host, cos_sin.as<void>());
  testing_support::RandomInputs rng(5);
  std::vector<uint16_t> norm_host;
  for (int32_t d = 0; d < 2 * 128; ++d)
    norm_host.push_back(float_to_bf16_bits(rng.uniform_float(0.5f, 1.5f)));
  DeviceMemory norm(norm_host.size() * 2);
  upload(norm_host, norm.as<void>());

  for (const Shape& shape : shapes) {
    for (int32_t T : token_counts) {
      const int32_t q_bf16_rows = T <= 64 ? T : 32;
      const std::string case_name = str_cat(shape.name, shape.qk_norm ? " qk-norm" : "", " T=", T,
                                            " e4m3 NHD p16, q bf16 rows=", q_bf16_rows);
      if (!options.wants_case(case_name)) continue;
      RopeQuantAppendParams base;
      base.num_tokens = T;
      base.num_q_heads = shape.q_heads;
      base.num_kv_heads = shape.kv_heads;
      base.head_dim = 128;
      base.rope = rope;
      base.cos_sin_cache = cos_sin.as<float>();
      base.cos_sin_cache_positions = kMaxPosition;
      if (shape.qk_norm) {
        base.q_norm_weight = norm.as<uint16_t>();
        base.k_norm_weight = norm.as<uint16_t>() + 128;
      }
      base.q_bf16_rows = q_bf16_rows;
      base.q_fp8_dtype = DType::kFP8E4M3;
      base.q_scale = 0.05f;
      base.kv.page_size = 16;
      base.kv.num_kv_heads = shape.kv_heads;
      base.kv.head_dim = 128;
      base.kv.dtype = DType::kFP8E4M3;
      base.kv.layout = KvLayout::kNHD;
      base.kv.num_pages = (T + 15) / 16 + 1;
      base.k_scale.per_tensor = 0.03f;
      base.v_scale.per_tensor = 0.02f;

      // Distinct positions (prefill chunk, or decode rows of different sequences) and slots
      // scattered over shuffled pages.
      std::vector<int32_t> positions(static_cast<size_t>(T));
      for (int32_t t = 0; t < T; ++t) {
        positions[static_cast<size_t>(t)] = T <= 64 ? (1000 + 397 * t) % kMaxPosition : t;
      }
      std::vector<int64_t> pages;
      for (int64_t p = 1; p < base.kv.num_pages; ++p)
        pages.push_back(p);
      std::shuffle(pages.begin(), pages.end(), rng.engine());
      std::vector<int64_t> slots(static_cast<size_t>(T));
      for (int32_t t = 0; t < T; ++t)
        slots[static_cast<size_t>(t)] = pages[static_cast<size_t>(t / 16)] * 16 + t % 16;

      const double bytes = op_bytes(base);
      const double set_bytes = bytes + OpSet::q_elems(base) * 2.0;
      const auto sets = static_cast<int32_t>(std::clamp(256e6 / set_bytes, 1.0, 16.0));
      std::vector<std::unique_ptr<OpSet>> op_sets;
      for (int32_t s = 0; s < sets; ++s)
        op_sets.push_back(std::make_unique<OpSet>(base, s, positions, slots));
      const size_t workspace_bytes = rope_quant_append_workspace_bytes(base);
      DeviceMemory workspace(workspace_bytes);
      const RopeAppendWorkspace ws{workspace.as<void>(), workspace_bytes};
      cuda_check(cudaDeviceSynchronize(), "setup");

      // Enough launches per graph for ~300 us of work, a whole number of set rotations.
      const double estimate_s = bytes / 3e12 + 3e-6;
      int32_t reps = static_cast<int32_t>(std::clamp(300e-6 / estimate_s, 1.0, 256.0));
      reps = std::max(sets, reps / sets * sets);
      const int32_t replays = options.quick ? 7 : 21;
      auto time_path = [&](RopeAppendPath path) {
        return time_graph(stream, reps, replays, [&](int32_t r) {
          run_rope_quant_append(op_sets[static_cast<size_t>(r % sets)]->params, path, stream, ws);
        });
      };
      // The fused kernel's A/B variants (T > 64; below that both run the row-item kernel).
      auto time_fused = [&](const FusedRopeAppendOptions& options) {
        return time_graph(stream, reps, replays, [&](int32_t r) {
          rope_quant_append_cuda(op_sets[static_cast<size_t>(r % sets)]->params, options, stream);
        });
      };
      GpuClockWatch fused_clocks;
      const double fused_s = time_path(RopeAppendPath::kFused);
      const ClockReading fused_clock_reading = fused_clocks.stop();
      const double unfused_s = time_path(RopeAppendPath::kUnfused);
      const double per_kind_s = time_fused({FusedRowSchedule::kPerKind, true});
      const double ring_prefetch_s = time_fused({FusedRowSchedule::kRing, true});
      const double ring_setup_first_s =
          time_fused({FusedRowSchedule::kRing, false, FusedSetupOrder::kSetupFirst});
      const double ring_rows_first_s =
          time_fused({FusedRowSchedule::kRing, false, FusedSetupOrder::kRowsFirst});
      // The default fused kernel with cos/sin computed in the kernel instead of read from the
      // cache: what the token's position -> cos/sin load chain costs (its bytes leave the count).
      const double sincos_s = time_graph(stream, reps, replays, [&](int32_t r) {
        RopeQuantAppendParams params = op_sets[static_cast<size_t>(r % sets)]->params;
        params.cos_sin_cache = nullptr;
        params.cos_sin_cache_positions = 0;
        run_rope_quant_append(params, RopeAppendPath::kFused, stream, ws);
      });
      const double sincos_bytes = bytes - static_cast<double>(T) * rope.rotary_dim * 4.0;
      const double copy_tbps = measure_same_size_copy(stream, bytes, sets, reps, replays);
      const double fused_tbps = bytes / fused_s * 1e-12;
      const double unfused_tbps = bytes / unfused_s * 1e-12;
      const FusedRopeAppendOptions fused_options = fused_rope_append_options_from_env();
      const std::string note = str_cat(
          "fused_us=", fused_s * 1e6, " (schedule ",
          fused_row_schedule_name(fused_options.schedule), ", prefetch ",
          fused_options.prefetch_split_tokens ? "on" : "off", ", setup ",
          fused_setup_order_name(fused_options.setup_order), ") per_kind_us=", per_kind_s * 1e6,
          " per_kind_tbps=", bytes / per_kind_s * 1e-12,
          " ring_prefetch_us=", ring_prefetch_s * 1e6,
          " ring_prefetch_tbps=", bytes / ring_prefetch_s * 1e-12,
          " ring_setup_first_us=", ring_setup_first_s * 1e6,
          " ring_setup_first_tbps=", bytes / ring_setup_first_s * 1e-12,
          " ring_rows_first_us=", ring_rows_first_s * 1e6,
          " ring_rows_first_tbps=", bytes / ring_rows_first_s * 1e-12,
          " sincos_us=", sincos_s * 1e6, " sincos_tbps=", sincos_bytes / sincos_s * 1e-12,
          " unfused_us=", unfused_s * 1e6, " speedup=", unfused_s / fused_s,
          "x fused_pct_of_copy=", 100.0 * fused_tbps / ceiling, "% same_size_copy_tbps=", copy_tbps,
          " fused_pct_of_same_size_copy=", 100.0 * fused_tbps / copy_tbps, "% bytes=", bytes,
          "; timing: CUDA graph of ", reps, " launches over ", sets,
          " buffer sets, events, median of ", replays, " replays / ", reps, "; ", copy_how,
          "; fused clocks:", clock_note(fused_clock_reading));
      BenchRecord tbps;
      tbps.bench = "rope_append";
      tbps.case_name = case_name;
      tbps.metric = "TB/s";
      tbps.value = fused_tbps;
      tbps.ceiling = ceiling;
      tbps.peer = "quench unfused chain (rope, quantize_rows per q/k/v part, kv_append)";
      tbps.peer_value = unfused_tbps;
      tbps.note = note;
      reporter.record(tbps);
      BenchRecord us = tbps;
      us.metric = "us";
      us.value = fused_s * 1e6;
      // No ceiling: a time has none that the %-of-ceiling column could read (the copy ceiling
      // is the TB/s record's); the peer is the unfused chain's time.
      us.ceiling.reset();
      us.peer_value = unfused_s * 1e6;
      reporter.record(us);
    }
  }
  cudaStreamDestroy(stream);
}

}  // namespace

QUENCH_REGISTER_BENCH("rope_append", run_rope_append_bench);

}  // namespace quench::bench
