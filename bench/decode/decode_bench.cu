// Benchmark "decode": quench decode attention on the issue-4 shapes (32 q heads / 8 KV heads,
// hd128, bf16 query, FP8 e4m3 or bf16 paged KV, pages 16 and 64, bf16 / FP8 / NVFP4 output),
// against the HBM read ceiling measured in the same run (16-byte loads over 4 GiB). Every case
// also reports the ceiling at its own size, measured just before it (the same kernel reading
// exactly its bytes, timed like it): what any kernel reaches at 64-256 MiB, and, for the large
// cases, the ceiling in the GPU's state at that point of the run; the sweep takes minutes of full
// HBM load, and a case measured alone ran up to 10% faster than at its place in the sweep
// (bench/LOG.md, fourteenth session, call 10). The %-of-ceiling column stays the 4 GiB one.
//
// Effective bandwidth = bytes of K and V the requests read / kernel time. Timing: a CUDA graph of
// kBurst back-to-back decode calls (as an engine's decode step runs them, without host launch
// overhead), CUDA events around each graph launch, median of kRuns after warm-up, divided by
// kBurst. The calls rotate over block tables whose pages are disjoint, so consecutive launches
// read at least kRotateBytes distinct bytes (> 60 MiB L2).
// bench/peers/decode_peer.py prints PyTorch cuDNN bf16 decode on the same case strings.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "harness/device_buffer.h"
#include "quench/core/error.h"
#include "quench/ops/attention/decode/decode_attention.h"
#include "support/bench_registry.h"
#include "support/gpu_clock_watch.h"

namespace quench::bench {
namespace {

using testing_support::DeviceBuffer;

constexpr int kWarmup = 5;
constexpr int kRuns = 30;
constexpr int kBurst = 20;
constexpr int64_t kRotateBytes = 256ll << 20;
constexpr int32_t kNumQHeads = 32;
constexpr int32_t kNumKvHeads = 8;
constexpr int32_t kHeadDim = 128;

// Times `launch(run)` on `stream` with CUDA events; returns the median in microseconds.
template <typename Launch>
double median_us(cudaStream_t stream, Launch&& launch) {
  cudaEvent_t start, stop;
  QUENCH_CUDA_CHECK(cudaEventCreate(&start));
  QUENCH_CUDA_CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < kWarmup; ++i)
    launch(i);
  std::vector<double> times;
  for (int i = 0; i < kRuns; ++i) {
    QUENCH_CUDA_CHECK(cudaEventRecord(start, stream));
    launch(kWarmup + i);
    QUENCH_CUDA_CHECK(cudaEventRecord(stop, stream));
    QUENCH_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    QUENCH_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(static_cast<double>(ms) * 1e3);
  }
  QUENCH_CUDA_CHECK(cudaEventDestroy(start));
  QUENCH_CUDA_CHECK(cudaEventDestroy(stop));
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// Reads every 16 bytes of `data` once; the xor goes to `sink` only when it is impossible in
// practice, so the loads cannot be removed and nothing is written.
__global__ void read_ceiling_kernel(const uint4* data, int64_t n, uint32_t* sink) {
  uint32_t acc = 0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint4 v = __ldcs(data + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) *sink = acc;
}

// Microseconds per call of `enqueue(stream, call)` for call = 0..kBurst-1, captured as one CUDA
// graph (back to back, as an engine's decode step runs them, without host launch gaps) and
// replayed: the median replay time over kBurst.
template <typename Enqueue>
double graph_burst_us(Enqueue&& enqueue) {
  cudaStream_t stream;
  QUENCH_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  QUENCH_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int call = 0; call < kBurst; ++call)
    enqueue(stream, call);
  QUENCH_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  QUENCH_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  const double us =
      median_us(stream, [&](int) { QUENCH_CUDA_CHECK(cudaGraphLaunch(exec, stream)); }) / kBurst;
  QUENCH_CUDA_CHECK(cudaGraphExecDestroy(exec));
  QUENCH_CUDA_CHECK(cudaGraphDestroy(graph));
  QUENCH_CUDA_CHECK(cudaStreamDestroy(stream));
  QUENCH_CUDA_CHECK(cudaGetLastError());
  return us;
}

double measure_read_ceiling_tbs() {
  const int64_t bytes = 4ll << 30;
  DeviceBuffer data(static_cast<size_t>(bytes));
  DeviceBuffer sink(sizeof(uint32_t));
  QUENCH_CUDA_CHECK(cudaMemset(data.get(), 1, static_cast<size_t>(bytes)));
  int sms = 0;
  QUENCH_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const double us = median_us(nullptr, [&](int) {
    read_ceiling_kernel<<<sms * 8, 512>>>(data.as<uint4>(), bytes / 16, sink.as<uint32_t>());
  });
  return static_cast<double>(bytes) / (us * 1e-6) / 1e12;
}

// The read ceiling at `bytes` per call, timed as run_shape times decode: a CUDA graph of kBurst
// reads rotating over buffers of `bytes` whose union exceeds kRotateBytes (cold L2).
double measure_same_size_read_ceiling_tbs(int64_t bytes) {
  const int64_t copies = std::max<int64_t>(1, (kRotateBytes + bytes - 1) / bytes);
  DeviceBuffer data(static_cast<size_t>(copies * bytes));
  DeviceBuffer sink(sizeof(uint32_t));
  QUENCH_CUDA_CHECK(cudaMemset(data.get(), 1, data.bytes()));
  int sms = 0;
  QUENCH_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const double us = graph_burst_us([&](cudaStream_t stream, int call) {
    const uint4* chunk = data.as<uint4>() + (call % copies) * (bytes / 16);
    read_ceiling_kernel<<<sms * 8, 512, 0, stream>>>(chunk, bytes / 16, sink.as<uint32_t>());
  });
  return static_cast<double>(bytes) / (us * 1e-6) / 1e12;
}

// Fills bytes with a hash; FP8 NaN codes (0x7f/0xff) become 0x7e/0xfe, bf16 words become
// values in about [-2, 2) with random mantissas.
__global__ void fill_kernel(uint8_t* data, int64_t n, bool bf16, uint32_t seed) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 0x9e3779b1u ^ seed;
    h ^= h >> 15;
    h *= 0x2c1b3c6du;
    h ^= h >> 12;
    uint8_t b = static_cast<uint8_t>(h);
    if (bf16) {
      // Odd bytes are high bytes of a bf16: sign + exponent 0x3e..0x3f (|x| in [2^-3, 2)).
      if (i & 1) b = static_cast<uint8_t>((b & 0x80u) | 0x3eu | ((h >> 9) & 1u));
    } else if ((b & 0x7fu) == 0x7fu) {
      b = static_cast<uint8_t>(b - 1);
    }
    data[i] = b;
  }
}

void fill(DeviceBuffer& buffer, bool bf16, uint32_t seed) {
  fill_kernel<<<1024, 256>>>(buffer.as<uint8_t>(), static_cast<int64_t>(buffer.bytes()), bf16,
                             seed);
  QUENCH_CUDA_CHECK(cudaGetLastError());
}

struct DecodeShape {
  int32_t batch;
  int32_t seq_len;
};

// The query is bf16 unless the name says q=f16; the cache is NHD unless it says HND.
std::string case_name(const DecodeShape& s, DType kv, int32_t page, DType out, DType q,
                      KvLayout layout) {
  return str_cat("B", s.batch, "xL", s.seq_len, " kv=", dtype_name(kv), " page=", page,
                 " out=", dtype_name(out), " hq32/hkv8 hd128", q == DType::kF16 ? " q=f16" : "",
                 layout == KvLayout::kHND ? " HND" : "");
}

// One shape: a cache holding `copies` disjoint sets of the batch's pages (in random order), one
// block table per set, and every output dtype asked for.
void run_shape(const DecodeShape& shape, DType kv_dtype, int32_t page_size, DType q_dtype,
               const std::vector<DType>& outputs, double ceiling_tbs, const BenchOptions& options,
               BenchReporter& reporter, KvLayout layout = KvLayout::kNHD) {
  std::vector<DType> wanted;
  for (DType out_dtype : outputs) {
    if (options.wants_case(case_name(shape, kv_dtype, page_size, out_dtype, q_dtype, layout)))
      wanted.push_back(out_dtype);
  }
  if (wanted.empty()) return;
  const int64_t kv_bytes_per_token = int64_t{kNumKvHeads} * kHeadDim * dtype_bits(kv_dtype) / 8;
  const int64_t read_bytes = 2 * kv_bytes_per_token * shape.batch * shape.seq_len;  // K and V
  const int32_t copies =
      static_cast<int32_t>(std::max<int64_t>(1, (kRotateBytes + read_bytes - 1) / read_bytes));
  const int32_t pages_per_seq = (shape.seq_len + page_size - 1) / page_size;
  const int64_t used_pages = int64_t{copies} * shape.batch * pages_per_seq;

  KvCacheLayout kv;
  kv.num_pages = static_cast<int32_t>(used_pages + 1);  // + the null page
  kv.page_size = page_size;
  kv.num_kv_heads = kNumKvHeads;
  kv.head_dim = kHeadDim;
  kv.dtype = kv_dtype;
  kv.layout = layout;
  DeviceBuffer k_cache(static_cast<size_t>(kv.tensor_bytes()));
  DeviceBuffer v_cache(static_cast<size_t>(kv.tensor_bytes()));
  fill(k_cache, kv_dtype == DType::kBF16, 1);
  fill(v_cache, kv_dtype == DType::kBF16, 2);

  std::vector<int32_t> page_ids(static_cast<size_t>(used_pages));
  std::iota(page_ids.begin(), page_ids.end(), 1);
  std::shuffle(page_ids.begin(), page_ids.end(), std::mt19937(42));
  DeviceBuffer tables = DeviceBuffer::from_host(page_ids);  // [copies, batch, pages_per_seq]

  std::vector<int32_t> q_offsets(static_cast<size_t>(shape.batch) + 1);
  std::iota(q_offsets.begin(), q_offsets.end(), 0);
  const std::vector<int32_t> seq_lens(static_cast<size_t>(shape.batch), shape.seq_len);
  DeviceBuffer d_offsets = DeviceBuffer::from_host(q_offsets);
  DeviceBuffer d_seq_lens = DeviceBuffer::from_host(seq_lens);
  DeviceBuffer q(static_cast<size_t>(shape.batch) * kNumQHeads * kHeadDim * 2);
  fill(q, true, 3);  // read as f16, the same bits are finite too (|x| in [1, 2))
  DeviceBuffer out(static_cast<size_t>(shape.batch) * kNumQHeads * kHeadDim * 2);
  const int64_t scale_cols = int64_t{kNumQHeads} * kHeadDim / 16;
  DeviceBuffer block_scales(static_cast<size_t>((shape.batch + 127) / 128 * 128 * scale_cols));

  AttentionParams p;
  p.q = q.get();
  p.q_dtype = q_dtype;
  p.k_cache = k_cache.get();
  p.v_cache = v_cache.get();
  p.kv = kv;
  p.k_scale.per_tensor = 0.02f;
  p.v_scale.per_tensor = 0.03f;
  p.num_q_heads = kNumQHeads;
  p.num_seqs = shape.batch;
  p.num_tokens = shape.batch;
  p.q_offsets = d_offsets.as<int32_t>();
  p.seq_lens = d_seq_lens.as<int32_t>();
  p.block_table = tables.as<int32_t>();  // each captured call below points at its own copy
  p.block_table_stride = pages_per_seq;
  p.max_q_len = 1;
  p.max_seq_len = shape.seq_len;
  p.sm_scale = 0.08838834764831845f;
  p.out = out.get();
  p.o_scale = 0.01f;
  p.out_block_scales = block_scales.as<uint8_t>();
  p.out_scale_rows = (shape.batch + 127) / 128 * 128;
  p.nvfp4_global_scale = 448.0f * 6.0f / 4.0f;

  // The ceiling at this case's size, measured just before it.
  const double same_size = measure_same_size_read_ceiling_tbs(read_bytes);
  {
    char note[64];
    std::snprintf(note, sizeof(note), "time_us=%.2f pct_of_ceiling=%.1f",
                  static_cast<double>(read_bytes) / (same_size * 1e6),
                  100.0 * same_size / ceiling_tbs);
    reporter.record(
        {"decode",
         str_cat("HBM read ceiling, 16-byte loads over ", read_bytes >> 20, " MiB (",
                 case_name(shape, kv_dtype, page_size, outputs.front(), q_dtype, layout), ")"),
         "TB/s", same_size, ceiling_tbs, "", std::nullopt, note});
  }
  for (DType out_dtype : wanted) {
    p.out_dtype = out_dtype;
    const size_t workspace_bytes = decode_attention_workspace_bytes(p);
    DeviceBuffer workspace(workspace_bytes);
    // The split-merge counters at its start must be zero before the first call.
    if (workspace_bytes > 0) QUENCH_CUDA_CHECK(cudaMemset(workspace.get(), 0, workspace_bytes));
    const int splits = decode_attention_num_splits(p);
    GpuClockWatch clocks;
    const double us = graph_burst_us([&](cudaStream_t stream, int call) {
      AttentionParams rp = p;
      rp.block_table =
          tables.as<int32_t>() + static_cast<int64_t>(call % copies) * shape.batch * pages_per_seq;
      decode_attention(rp, workspace.get(), workspace_bytes, stream);
    });
    const std::string name = case_name(shape, kv_dtype, page_size, out_dtype, q_dtype, layout);
    const double tbs = static_cast<double>(read_bytes) / (us * 1e-6) / 1e12;
    const ClockReading clock_reading = clocks.stop();
    char note[128];
    std::snprintf(note, sizeof(note),
                  "time_us=%.2f splits=%d pct_of_ceiling=%.1f pct_of_same_size_ceiling=%.1f", us,
                  splits, 100.0 * tbs / ceiling_tbs, 100.0 * tbs / same_size);
    reporter.record({"decode", name, "TB/s", tbs, ceiling_tbs, "", std::nullopt,
                     note + clock_note(clock_reading)});
    reporter.record({"decode", name, "us", us, std::nullopt, "", std::nullopt, ""});
  }
}

void run_decode_bench(const BenchOptions& options, BenchReporter& reporter) {
  const double ceiling = measure_read_ceiling_tbs();
  reporter.record({"decode", "HBM read ceiling, 16-byte loads over 4 GiB", "TB/s", ceiling, ceiling,
                   "", std::nullopt, ""});
  std::vector<DecodeShape> shapes = {
      {64, 4096}, {128, 2048}, {256, 2048}, {16, 16384}, {1, 32768},  {2, 32768}, {4, 32768},
      {8, 32768}, {1, 131072}, {2, 131072}, {4, 131072}, {8, 131072}, {1, 1024}};
  if (options.quick) shapes = {{64, 4096}, {1, 32768}, {1, 1024}};
  const std::vector<DType> all_outputs = {DType::kBF16, DType::kFP8E4M3, DType::kNVFP4};
  for (const DecodeShape& shape : shapes) {
    for (DType kv : {DType::kFP8E4M3, DType::kBF16}) {
      for (int32_t page : {16, 64}) {
        // Output fusion costs are measured where they matter most: FP8 KV, page 16.
        const bool all = kv == DType::kFP8E4M3 && page == 16;
        run_shape(shape, kv, page, DType::kBF16,
                  all ? all_outputs : std::vector<DType>{DType::kBF16}, ceiling, options, reporter);
      }
      // HND keeps a head's page rows contiguous (16 x 128 bytes for FP8 page 16) where NHD
      // interleaves the heads every row: the pair shows what the access pattern costs.
      run_shape(shape, kv, 16, DType::kBF16, {DType::kBF16}, ceiling, options, reporter,
                KvLayout::kHND);
    }
  }
  // An f16 query over FP8 KV runs the f16 MMA path (one cvt per FP8 pair instead of the bf16
  // path's bit moves): the gap between the two says what the conversions cost.
  for (const DecodeShape& shape : {DecodeShape{64, 4096}, DecodeShape{1, 32768}}) {
    run_shape(shape, DType::kFP8E4M3, 16, DType::kF16, {DType::kBF16}, ceiling, options, reporter);
  }
}

QUENCH_REGISTER_BENCH("decode", run_decode_bench);

}  // namespace
}  // namespace quench::bench
