// Benchmark "prefill": causal prefill attention over the paged cache, TFLOP/s with causal FLOPs
// counted as half (4 * S * S * Hq * D / 2 per sequence). Cases: FP8 (q, K, V e4m3), bf16, and
// bf16 q over an FP8 cache; 32 q / 8 KV heads; S = 1k..16k with B * S = 16k tokens; hd128 with
// pages 16 and 64, hd64 and hd256 at page 16. Each case runs the generic kernel, and again the
// Hopper kernel where it serves the case (sm_90 device; case string + " hopper"), for an FP8
// query once more with FP8 P·V (case string + " hopper_fp8pv"), and each of those again on the
// schedules the default does not pick by name ("_persistent": the persistent kernel, one CTA per
// SM; "_pertile": the non-persistent kernel). At hd256 the Hopper variants run the warp-specialized
// kernels unless QUENCH_PREFILL_HD256=sync selects the synchronous one (the A/B of that path). One
// more case per kind soft-caps the logits at 30 (Gemma-2-style models; "cap30", b2 x 8k hd128 page
// 16), and one more runs a chunked prefill's later chunk on the Hopper variants ("b8 q1024 s16384":
// 1024 queries per sequence over a 15k-key cached prefix; FLOPs are the unmasked products, the
// causal sweep's count). bench/peers/prefill_peer.py measures cuDNN bf16 SDPA on the same shapes
// under the same case strings.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "harness/device_buffer.h"
#include "quench/core/error.h"
#include "quench/numerics/bf16.h"
#include "quench/numerics/fp8.h"
#include "quench/ops/attention/prefill/generic/prefill_attention_generic.h"
#include "quench/ops/attention/prefill/hopper/prefill_attention_hopper.h"
#include "support/bench_registry.h"
#include "support/gpu_clock_watch.h"

namespace quench::bench {
namespace {

using testing_support::DeviceBuffer;

// Fills n elements of `dtype` with hashed pseudo-random values in [-2, 2) (never NaN).
__global__ void fill_random_kernel(uint8_t* data, int64_t n, DType dtype, uint32_t seed) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    const float x = static_cast<float>(h >> 8) * (4.0f / 16777216.0f) - 2.0f;
    if (dtype == DType::kBF16) {
      reinterpret_cast<uint16_t*>(data)[i] = float_to_bf16_bits(x);
    } else {
      data[i] = float_to_fp8_e4m3(x);
    }
  }
}

DeviceBuffer random_buffer(int64_t n, DType dtype, uint32_t seed) {
  DeviceBuffer buffer(dtype_bytes(dtype, static_cast<size_t>(n)));
  fill_random_kernel<<<1024, 256>>>(buffer.as<uint8_t>(), n, dtype, seed);
  QUENCH_CUDA_CHECK(cudaGetLastError());
  return buffer;
}

using PrefillKernel = void (*)(const AttentionParams&, cudaStream_t);

struct PrefillCase {
  const char* label;  // "fp8", "bf16", "bf16q_fp8kv"
  DType q_dtype;
  DType kv_dtype;
  int batch;
  int seq_len;
  int head_dim;
  int page_size;
  const char* kernel = "generic";  // "generic" or a kHopperVariants kernel
  float soft_cap = 0.0f;           // logit soft-cap (0: none)
  // Query tokens per sequence: 0 for the whole sequence, else the last q_len positions over a
  // cached prefix of seq_len - q_len (a chunked prefill's later chunk: every item of the launch
  // sees about as many keys, and few of its tiles are masked).
  int q_len = 0;
};

int query_tokens(const PrefillCase& c) {
  return c.q_len > 0 ? c.q_len : c.seq_len;
}

bool is_generic(const PrefillCase& c) {
  return std::string(c.kernel) == "generic";
}

// The Hopper kernel with each P·V precision and schedule: "hopper" (the default schedule: chosen
// by chunk length unless QUENCH_PREFILL_PERSISTENT says otherwise), "hopper_persistent" (one CTA
// per SM), "hopper_pertile" (the non-persistent kernel); "_fp8pv" variants for an FP8 query with
// FP8 P·V.
template <HopperPvPrecision kPrecision, HopperSchedule kSchedule>
void run_hopper(const AttentionParams& params, cudaStream_t stream) {
  prefill_attention_hopper(params, stream, kPrecision, kSchedule);
}

struct HopperVariant {
  const char* kernel;
  PrefillKernel run;
};

constexpr HopperVariant kHopperVariants[] = {
    {"hopper", run_hopper<HopperPvPrecision::kBf16, HopperSchedule::kDefault>},
    {"hopper_fp8pv", run_hopper<HopperPvPrecision::kFp8, HopperSchedule::kDefault>},
    {"hopper_persistent", run_hopper<HopperPvPrecision::kBf16, HopperSchedule::kPersistent>},
    {"hopper_fp8pv_persistent", run_hopper<HopperPvPrecision::kFp8, HopperSchedule::kPersistent>},
    {"hopper_pertile", run_hopper<HopperPvPrecision::kBf16, HopperSchedule::kPerTile>},
    {"hopper_fp8pv_pertile", run_hopper<HopperPvPrecision::kFp8, HopperSchedule::kPerTile>},
};

// The entry of case kernel `kernel` ("generic" or a Hopper variant).
PrefillKernel kernel_of(const std::string& kernel) {
  for (const HopperVariant& variant : kHopperVariants) {
    if (kernel == variant.kernel) return variant.run;
  }
  return prefill_attention_generic;
}

bool is_fp8_pv(const PrefillCase& c) {
  return std::string(c.kernel).find("fp8pv") != std::string::npos;
}

std::string case_name(const PrefillCase& c) {
  return str_cat(c.label, " b", c.batch, c.q_len > 0 ? str_cat(" q", c.q_len) : "", " s", c.seq_len,
                 " h32/8 d", c.head_dim, " page", c.page_size, " causal",
                 c.soft_cap > 0.0f ? str_cat(" cap", c.soft_cap) : "", is_generic(c) ? "" : " ",
                 is_generic(c) ? "" : c.kernel);
}

// Milliseconds per launch, averaged after warm-up over enough launches to last ~200 ms.
float time_ms(PrefillKernel kernel, const AttentionParams& params) {
  for (int i = 0; i < 3; ++i)
    kernel(params, nullptr);
  cudaEvent_t start, stop;
  QUENCH_CUDA_CHECK(cudaEventCreate(&start));
  QUENCH_CUDA_CHECK(cudaEventCreate(&stop));
  QUENCH_CUDA_CHECK(cudaEventRecord(start));
  kernel(params, nullptr);
  QUENCH_CUDA_CHECK(cudaEventRecord(stop));
  QUENCH_CUDA_CHECK(cudaEventSynchronize(stop));
  float one = 0.0f;
  QUENCH_CUDA_CHECK(cudaEventElapsedTime(&one, start, stop));
  const int iterations =
      one > 0.0f ? std::max(3, std::min(200, static_cast<int>(200.0f / one))) : 10;
  QUENCH_CUDA_CHECK(cudaEventRecord(start));
  for (int i = 0; i < iterations; ++i)
    kernel(params, nullptr);
  QUENCH_CUDA_CHECK(cudaEventRecord(stop));
  QUENCH_CUDA_CHECK(cudaEventSynchronize(stop));
  float total = 0.0f;
  QUENCH_CUDA_CHECK(cudaEventElapsedTime(&total, start, stop));
  QUENCH_CUDA_CHECK(cudaEventDestroy(start));
  QUENCH_CUDA_CHECK(cudaEventDestroy(stop));
  return total / static_cast<float>(iterations);
}

void run_case(const PrefillCase& c, const BenchOptions& options, BenchReporter& reporter) {
  if (!options.wants_case(case_name(c))) return;
  constexpr int kQHeads = 32;
  constexpr int kKvHeads = 8;
  const int q_len = query_tokens(c);
  const int tokens = c.batch * q_len;
  const int pages_per_seq = (c.seq_len + c.page_size - 1) / c.page_size;
  const int num_pages = c.batch * pages_per_seq + 1;  // page 0 is the null page

  AttentionParams p;
  p.q_dtype = c.q_dtype;
  p.q_scale = 0.5f;
  p.kv.num_pages = num_pages;
  p.kv.page_size = c.page_size;
  p.kv.num_kv_heads = kKvHeads;
  p.kv.head_dim = c.head_dim;
  p.kv.dtype = c.kv_dtype;
  p.kv.layout = KvLayout::kNHD;
  p.k_scale.per_tensor = 0.5f;
  p.v_scale.per_tensor = 0.5f;
  p.num_q_heads = kQHeads;
  p.num_seqs = c.batch;
  p.num_tokens = tokens;
  p.block_table_stride = pages_per_seq;
  p.max_q_len = q_len;
  p.max_seq_len = c.seq_len;
  p.sm_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  p.logit_soft_cap = c.soft_cap;
  p.out_dtype = DType::kBF16;
  if (!is_generic(c) && !prefill_attention_hopper_unsupported_reason(p).empty()) return;
  if (is_fp8_pv(c) && c.q_dtype != DType::kFP8E4M3) return;  // P·V precision only varies for FP8 q

  const int64_t kv_elems = p.kv.tensor_elems();
  DeviceBuffer q = random_buffer(static_cast<int64_t>(tokens) * kQHeads * c.head_dim, c.q_dtype, 1);
  DeviceBuffer k = random_buffer(kv_elems, c.kv_dtype, 2);
  DeviceBuffer v = random_buffer(kv_elems, c.kv_dtype, 3);
  std::vector<int32_t> offsets(static_cast<size_t>(c.batch) + 1),
      lens(static_cast<size_t>(c.batch), c.seq_len);
  std::vector<int32_t> table(static_cast<size_t>(c.batch) * pages_per_seq);
  for (int b = 0; b <= c.batch; ++b)
    offsets[static_cast<size_t>(b)] = b * q_len;
  for (size_t i = 0; i < table.size(); ++i)
    table[i] = static_cast<int32_t>(i) + 1;
  DeviceBuffer d_offsets = DeviceBuffer::from_host(offsets);
  DeviceBuffer d_lens = DeviceBuffer::from_host(lens);
  DeviceBuffer d_table = DeviceBuffer::from_host(table);
  DeviceBuffer out(static_cast<size_t>(tokens) * kQHeads * c.head_dim * 2);
  p.q = q.get();
  p.k_cache = k.get();
  p.v_cache = v.get();
  p.q_offsets = d_offsets.as<int32_t>();
  p.seq_lens = d_lens.as<int32_t>();
  p.block_table = d_table.as<int32_t>();
  p.out = out.get();

  GpuClockWatch clocks;
  const float ms = time_ms(kernel_of(c.kernel), p);
  const ClockReading clock_reading = clocks.stop();
  // Query i of a chunk sees prefix + i + 1 keys: q * prefix + q (q + 1) / 2 products per head,
  // which for a whole sequence (q = S) is S (S + 1) / 2, the S * S / 2 of the causal count.
  const double prefix = c.seq_len - q_len;
  const double key_pairs = q_len * prefix + static_cast<double>(q_len) * q_len / 2.0;
  const double flops = 4.0 * key_pairs * kQHeads * c.head_dim * c.batch;
  BenchRecord record;
  record.bench = "prefill";
  record.case_name = case_name(c);
  record.metric = "TFLOP/s";
  record.value = flops / (ms * 1e-3) / 1e12;
  record.peer = "cudnn_bf16";
  record.note = str_cat("kernel=", c.kernel, " time_us=", ms * 1e3, clock_note(clock_reading));
  reporter.record(record);
}

void run_prefill_bench(const BenchOptions& options, BenchReporter& reporter) {
  constexpr int kTotalTokens = 16384;
  const std::vector<int> seq_lens =
      options.quick ? std::vector<int>{4096} : std::vector<int>{1024, 2048, 4096, 8192, 16384};
  const PrefillCase kinds[] = {{"fp8", DType::kFP8E4M3, DType::kFP8E4M3, 0, 0, 0, 0},
                               {"bf16", DType::kBF16, DType::kBF16, 0, 0, 0, 0},
                               {"bf16q_fp8kv", DType::kBF16, DType::kFP8E4M3, 0, 0, 0, 0}};
  for (const PrefillCase& kind : kinds) {
    for (const int seq_len : seq_lens) {
      for (const int page : {16, 64}) {
        PrefillCase c = kind;
        c.batch = kTotalTokens / seq_len;
        c.seq_len = seq_len;
        c.head_dim = 128;
        c.page_size = page;
        c.kernel = "generic";
        run_case(c, options, reporter);
        for (const HopperVariant& variant : kHopperVariants) {
          c.kernel = variant.kernel;
          run_case(c, options, reporter);
        }
      }
    }
    for (const int head_dim : {64, 256, 128}) {
      PrefillCase c = kind;
      c.batch = 2;
      c.seq_len = 8192;
      c.head_dim = head_dim;
      c.page_size = 16;
      if (head_dim == 128) c.soft_cap = 30.0f;  // hd128 page 16 without it is in the sweep above
      c.kernel = "generic";
      run_case(c, options, reporter);
      for (const HopperVariant& variant : kHopperVariants) {
        c.kernel = variant.kernel;
        run_case(c, options, reporter);
      }
    }
    if (options.quick) continue;
    // A later chunk of a chunked prefill (8 x 1024 queries over 16k keys): every item sees about
    // as many keys and almost none is masked, so against b1 x 16k it separates the tile loop's
    // rate from the causal sweep's masking and tail. No peer (SDPA's causal mask is top-left).
    PrefillCase chunk = kind;
    chunk.batch = 8;
    chunk.seq_len = 16384;
    chunk.q_len = 1024;
    chunk.head_dim = 128;
    chunk.page_size = 16;
    for (const HopperVariant& variant : kHopperVariants) {
      chunk.kernel = variant.kernel;
      run_case(chunk, options, reporter);
    }
  }
}

QUENCH_REGISTER_BENCH("prefill", run_prefill_bench);

}  // namespace
}  // namespace quench::bench
