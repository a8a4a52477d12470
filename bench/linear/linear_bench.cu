// "linear": decode-size linear layers (1, 4 and 8 tokens) through the weight-streaming kernel
// (ops/linear/linear_skinny.h) beside cuBLAS's GEMM on the same shapes, against the HBM read
// ceiling measured in the same run; 16, 32 and 64 tokens (batched decode) through cuBLAS alone.
//
// FP8 weights (the FP8-checkpoint layers, per-channel scales) through the same streaming kernel at
// 1-8 tokens beside its bf16 form ("... fp8 ..." cases), and through the FP8 GEMM (activations
// quantized per token, cuBLASLt) at 4-2048 tokens beside cuBLAS's bf16 GEMM ("... fp8 gemm ...",
// and "... fp8 block gemm ..." over 128 x 128 block scales).
//
// Cases: the layers of Llama-3.2-1B (hidden 2048, 32/8 heads x 64, MLP 8192, vocab 128256) and
// Llama-3-8B (4096, 32/8 x 128, 14336, 128256): qkv, o, gate_up, down, lm_head (fp32 logits).
// Metric: TB/s of the weight bytes (the x and out bytes are ~0.1% of them), i.e. how close a
// decode step's GEMMs come to streaming the weights once. Ceiling: a read-only kernel over 1 GiB
// (16-byte loads, summed so that nothing is optimised away). Timing: a CUDA graph of back-to-back
// calls cycling over enough weight copies to exceed the 50 MB L2, timed with events; the median
// over 11 replays (after 3 to warm up) divided by the calls, as decode runs under graphs.
// Fused cases (one token, as a decode step of one sequence runs them): qkv with the residual add +
// RMSNorm in front, gate_up with the norm in front and SwiGLU behind (linear_skinny_fused.h),
// each beside the chain of separate kernels it replaces (rms_norm, the skinny linear, swiglu).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "quench/core/device_buffer.h"
#include "quench/core/error.h"
#include "quench/ops/linear/linear_cublas.h"
#include "quench/ops/linear/linear_fp8_cublaslt.h"
#include "quench/ops/linear/linear_fp8_weight.h"
#include "quench/ops/linear/linear_skinny.h"
#include "quench/ops/linear/linear_skinny_fused.h"
#include "quench/ops/rms_norm/rms_norm.h"
#include "quench/ops/swiglu/swiglu.h"
#include "support/bench_registry.h"
#include "support/graph_timing.h"

namespace quench::bench {
namespace {

// The read ceiling: 16-byte loads, four in flight per thread, xor-folded into one word per
// thread that is stored only when it equals a value it never takes (the loads must happen).
__global__ void read_kernel(const uint4* __restrict__ src, int64_t n, uint32_t* sink) {
  uint32_t fold = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += 4 * stride) {
    uint4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u)
      v[u] = i + u * stride < n ? __ldcs(src + i + u * stride) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < 4; ++u)
      fold ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (fold == 0x9e3779b9u) *sink = fold;
}

double measure_read_ceiling(cudaStream_t stream) {
  const int64_t bytes = int64_t{1} << 30;
  DeviceBuffer src(static_cast<size_t>(bytes)), sink(64);
  cuda_check(cudaMemsetAsync(src.as<void>(), 1, static_cast<size_t>(bytes), stream), "memset");
  int sms = 0;
  cuda_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "SM count");
  const double seconds = time_graph(stream, 4, 11, [&](int32_t) {
    read_kernel<<<sms * 8, 256, 0, stream>>>(src.as<uint4>(), bytes / 16, sink.as<uint32_t>());
  });
  return static_cast<double>(bytes) / seconds / 1e12;
}

struct LayerShape {
  const char* model;
  const char* layer;
  int32_t in, out;
  bool f32_out;
};

// Enough copies of a weight of `bytes` to exceed the 50 MB L2 twice over (at most 16), filled with
// a small bf16 value: the calls cycle through them so that every call reads its weight from HBM.
std::vector<std::unique_ptr<DeviceBuffer>> weight_copies(size_t bytes, cudaStream_t stream) {
  const size_t sets = std::min<size_t>(16, std::max<size_t>(1, (size_t{100} << 20) / bytes + 1));
  std::vector<std::unique_ptr<DeviceBuffer>> weights;
  for (size_t i = 0; i < sets; ++i) {
    weights.push_back(std::make_unique<DeviceBuffer>(bytes));
    cuda_check(cudaMemsetAsync(weights.back()->as<void>(), 0x3c, bytes, stream), "memset");
  }
  return weights;
}

// A case's record: TB/s of weight bytes for it and its peer (peer_weight_bytes where they differ:
// the bf16 peer of an FP8 case), the times in the note.
BenchRecord weight_stream_record(const std::string& name, size_t weight_bytes, double seconds,
                                 double ceiling, const char* peer, double peer_seconds,
                                 const std::string& times, size_t peer_weight_bytes = 0) {
  BenchRecord record;
  record.bench = "linear";
  record.case_name = name;
  record.metric = "TB/s";
  record.value = static_cast<double>(weight_bytes) / seconds / 1e12;
  record.ceiling = ceiling;
  record.peer = peer;
  record.peer_value =
      static_cast<double>(peer_weight_bytes > 0 ? peer_weight_bytes : weight_bytes) / peer_seconds /
      1e12;
  record.note = str_cat(times, " weight_mb=", static_cast<double>(weight_bytes) / 1e6);
  return record;
}

// The fused layers of a one-token step beside the separate kernels they replace.
void run_fused_cases(const BenchOptions& options, BenchReporter& reporter, cudaStream_t stream,
                     double ceiling) {
  struct FusedShape {
    const char* model;
    int32_t hidden, qkv_out, ff;
  };
  const std::vector<FusedShape> shapes = {{"Llama-3.2-1B", 2048, 3072, 8192},
                                          {"Llama-3-8B", 4096, 6144, 14336}};
  for (const FusedShape& s : shapes) {
    for (bool swiglu : {false, true}) {
      const int32_t out = swiglu ? s.ff : s.qkv_out;
      const int32_t rows = swiglu ? 2 * s.ff : s.qkv_out;
      const std::string name = str_cat(s.model, swiglu ? " norm+gate_up+swiglu " : " norm+qkv ",
                                       s.hidden, "->", rows, " T=1");
      if (!options.wants_case(name)) continue;
      const size_t weight_bytes = static_cast<size_t>(s.hidden) * rows * 2;
      const std::vector<std::unique_ptr<DeviceBuffer>> weights =
          weight_copies(weight_bytes, stream);
      const auto sets = static_cast<int32_t>(weights.size());
      const size_t row_bytes = static_cast<size_t>(s.hidden) * 2;
      DeviceBuffer residual(row_bytes), residual2(row_bytes), delta(row_bytes), norm_w(row_bytes),
          h(row_bytes), gate_up(static_cast<size_t>(rows) * 2), y(static_cast<size_t>(out) * 2);
      for (DeviceBuffer* b : {&residual, &residual2, &delta, &norm_w})
        cuda_check(cudaMemsetAsync(b->as<void>(), 0x3c, b->bytes(), stream), "memset");
      const int32_t reps = std::max(sets, 8);
      // Each call reads one residual and writes the other, as the decoder's layers alternate.
      const double fused_s = time_graph(stream, reps, 11, [&](int32_t r) {
        SkinnyResidualNorm norm;
        norm.residual = (r % 2 ? residual2 : residual).as<uint16_t>();
        norm.residual_out = (r % 2 ? residual : residual2).as<uint16_t>();
        norm.delta = delta.as<uint16_t>();
        norm.weight = norm_w.as<uint16_t>();
        linear_skinny_norm_cuda(1, s.hidden, out, norm,
                                weights[static_cast<size_t>(r % sets)]->as<uint16_t>(), swiglu,
                                y.as<uint16_t>(), stream);
      });
      const double chain_s = time_graph(stream, reps, 11, [&](int32_t r) {
        rms_norm_cuda({1, s.hidden, residual.as<uint16_t>(), delta.as<uint16_t>(),
                       norm_w.as<uint16_t>(), 1e-5f, h.as<uint16_t>()},
                      stream);
        linear_skinny_cuda(1, s.hidden, rows, h.as<uint16_t>(),
                           weights[static_cast<size_t>(r % sets)]->as<uint16_t>(),
                           swiglu ? gate_up.as<void>() : y.as<void>(), DType::kBF16, stream);
        if (swiglu) swiglu_cuda(1, s.ff, gate_up.as<uint16_t>(), y.as<uint16_t>(), stream);
      });
      reporter.record(weight_stream_record(
          name, weight_bytes, fused_s, ceiling,
          swiglu ? "rms_norm+linear_skinny+swiglu" : "rms_norm+linear_skinny", chain_s,
          str_cat("fused_us=", fused_s * 1e6, " chain_us=", chain_s * 1e6)));
    }
  }
}

// An FP8-weight case's record: weight_stream_record over its FP8 bytes, the peer (its bf16 form)
// over twice as many; both times and the speedup in the note (`extra` after them).
BenchRecord fp8_weight_record(const std::string& name, size_t fp8_bytes, double fp8_s,
                              double ceiling, const char* peer, double bf16_s,
                              const std::string& extra) {
  return weight_stream_record(name, fp8_bytes, fp8_s, ceiling, peer, bf16_s,
                              str_cat("fp8_us=", fp8_s * 1e6, " bf16_us=", bf16_s * 1e6,
                                      " speedup=", bf16_s / fp8_s, extra),
                              2 * fp8_bytes);
}

// One "fp8 gemm" case: linear_fp8_gemm_cuda (quantize + cuBLASLt's FP8 GEMM) over an FP8 weight
// with per-channel scales (with their group_scales, as the runner uploads them; the kernels
// QUENCH_FP8_CHANNEL_GEMM picks) or 128 x 128 blocks (the rows padded to 8) beside cuBLAS's bf16
// GEMM, both timed as a layer (the quantization kernel counts), at every token count: even where
// linear_fp8_weight_cuda would stream the weight instead. The note adds the GEMM alone.
void run_fp8_gemm_case(BenchReporter& reporter, cudaStream_t stream, double ceiling,
                       const CublasHandle& cublas, const Fp8Gemm& fp8_gemm, const LayerShape& s,
                       int32_t tokens, bool blocks, const std::string& name) {
  const size_t fp8_bytes = static_cast<size_t>(s.in) * s.out;
  const auto fp8_weights = weight_copies(fp8_bytes, stream);
  const auto bf16_weights = weight_copies(2 * fp8_bytes, stream);
  LinearWeight w;
  w.dtype = DType::kFP8E4M3;
  w.scaling = blocks ? WeightScaling::kBlock : WeightScaling::kChannel;
  w.block_out = w.block_in = blocks ? 128 : 0;
  w.data = fp8_weights[0]->as<void>();
  const auto scale_count = static_cast<size_t>(weight_scale_count(w, s.out, s.in));
  DeviceBuffer group_scales(
      blocks ? 4 : scale_count * static_cast<size_t>(s.in / kFp8GemmScaleGroup) * 4);
  cuda_check(cudaMemsetAsync(group_scales.as<void>(), 0x3c, group_scales.bytes(), stream),
             "memset");
  if (!blocks) w.group_scales = group_scales.as<float>();
  const int32_t rows = fp8_gemm_rows(tokens, s.in, s.out, w);
  const size_t x_scale_count =
      static_cast<size_t>(rows) *
      static_cast<size_t>(s.in / fp8_activation_group(w, tokens, s.in, s.out));
  DeviceBuffer scales(scale_count * 4), x(static_cast<size_t>(tokens) * s.in * 2),
      xq(static_cast<size_t>(rows) * s.in), sx(x_scale_count * 4),
      y(static_cast<size_t>(rows) * s.out * 2);
  cuda_check(cudaMemsetAsync(scales.as<void>(), 0x3c, scales.bytes(), stream), "memset");
  cuda_check(cudaMemsetAsync(x.as<void>(), 0x3c, x.bytes(), stream), "memset");
  w.scales = scales.as<float>();
  if (!fp8_gemm.supports(rows, s.in, s.out, w, DType::kBF16)) {
    std::printf("%s: cuBLASLt has no FP8 algorithm here; skipped\n", name.c_str());
    return;
  }
  const Fp8ActivationScratch scratch{xq.as<uint8_t>(), sx.as<float>(),
                                     static_cast<int64_t>(xq.bytes()),
                                     static_cast<int64_t>(x_scale_count)};
  const auto fp8_sets = static_cast<int32_t>(fp8_weights.size());
  const auto bf16_sets = static_cast<int32_t>(bf16_weights.size());
  const int32_t reps = std::max({fp8_sets, bf16_sets, 8});
  // One eager call first, as the runner's warm-up steps make: it quantizes x and lets the GEMM
  // tune its algorithm (Fp8Gemm), which it cannot do under the timing graph's capture.
  linear_fp8_gemm_cuda(fp8_gemm, tokens, s.in, s.out, x.as<uint16_t>(), w, scratch, y.as<void>(),
                       rows, DType::kBF16, stream);
  const double fp8_s = time_graph(stream, reps, 11, [&](int32_t r) {
    w.data = fp8_weights[static_cast<size_t>(r % fp8_sets)]->as<void>();
    linear_fp8_gemm_cuda(fp8_gemm, tokens, s.in, s.out, x.as<uint16_t>(), w, scratch, y.as<void>(),
                         rows, DType::kBF16, stream);
  });
  // The GEMM alone, its activations quantized once beforehand (above): what a layer costs where
  // the kernel in front writes them (rms_norm's and swiglu's FP8 outputs, fp8_rows_out.h).
  const double gemm_only_s = time_graph(stream, reps, 11, [&](int32_t r) {
    w.data = fp8_weights[static_cast<size_t>(r % fp8_sets)]->as<void>();
    linear_fp8_gemm_quantized_cuda(fp8_gemm, tokens, s.in, s.out, w, scratch, y.as<void>(), rows,
                                   DType::kBF16, stream);
  });
  const double bf16_s = time_graph(stream, reps, 11, [&](int32_t r) {
    cublas_gemm(cublas, tokens, s.in, s.out, x.as<uint16_t>(),
                bf16_weights[static_cast<size_t>(r % bf16_sets)]->as<uint16_t>(), y.as<void>(),
                DType::kBF16, stream);
  });
  const double flops = 2.0 * tokens * static_cast<double>(s.in) * s.out;
  reporter.record(fp8_weight_record(
      name, fp8_bytes, fp8_s, ceiling, "cublas_gemm_bf16", bf16_s,
      str_cat(" fp8_gemm_only_us=", gemm_only_s * 1e6, " fp8_tflops=", flops / fp8_s / 1e12,
              " bf16_tflops=", flops / bf16_s / 1e12)));
}

// FP8 e4m3 weights (per-channel scales) through the weight-streaming kernel, 1 to 8 tokens, beside
// the same kernel over the bf16 weight of the shape: value = FP8 bytes / time against the read
// ceiling; the peer is the bf16 kernel's own TB/s; the note gives both times and the speedup.
void run_fp8_weight_cases(const BenchOptions& options, BenchReporter& reporter, cudaStream_t stream,
                          double ceiling) {
  const std::vector<LayerShape> shapes = {
      {"Llama-3.2-1B", "qkv", 2048, 3072, false},      {"Llama-3.2-1B", "o", 2048, 2048, false},
      {"Llama-3.2-1B", "gate_up", 2048, 16384, false}, {"Llama-3.2-1B", "down", 8192, 2048, false},
      {"Llama-3-8B", "qkv", 4096, 6144, false},        {"Llama-3-8B", "o", 4096, 4096, false},
      {"Llama-3-8B", "gate_up", 4096, 28672, false},   {"Llama-3-8B", "down", 14336, 4096, false},
  };
  const CublasHandle cublas;
  const Fp8Gemm fp8_gemm;
  for (const LayerShape& s : shapes) {
    // The FP8 GEMM (W8A8) beside cuBLAS's bf16 GEMM (run_fp8_gemm_case).
    for (const bool blocks : {false, true}) {
      for (int32_t tokens : {4, 8, 16, 32, 64, 128, 256, 512, 2048}) {
        if (options.quick) continue;
        const std::string name =
            str_cat(s.model, " ", s.layer, blocks ? " fp8 block gemm " : " fp8 gemm ", s.in, "->",
                    s.out, " T=", tokens);
        if (!options.wants_case(name)) continue;
        run_fp8_gemm_case(reporter, stream, ceiling, cublas, fp8_gemm, s, tokens, blocks, name);
      }
    }
    // 3 and 4 tokens: where linear_fp8_streams hands the larger layers to the GEMM.
    for (int32_t tokens : {1, 2, 3, 4, 8}) {
      if (options.quick && tokens != 1) continue;
      const std::string name =
          str_cat(s.model, " ", s.layer, " fp8 ", s.in, "->", s.out, " T=", tokens);
      if (!options.wants_case(name)) continue;
      const size_t fp8_bytes = static_cast<size_t>(s.in) * s.out;
      const auto fp8_weights = weight_copies(fp8_bytes, stream);
      const auto bf16_weights = weight_copies(2 * fp8_bytes, stream);
      DeviceBuffer scales(static_cast<size_t>(s.out) * 4),
          x(static_cast<size_t>(tokens) * s.in * 2), y(static_cast<size_t>(tokens) * s.out * 2);
      cuda_check(cudaMemsetAsync(scales.as<void>(), 0x3c, scales.bytes(), stream), "memset");
      cuda_check(cudaMemsetAsync(x.as<void>(), 0x3c, x.bytes(), stream), "memset");
      const auto fp8_sets = static_cast<int32_t>(fp8_weights.size());
      const auto bf16_sets = static_cast<int32_t>(bf16_weights.size());
      const int32_t reps = std::max({fp8_sets, bf16_sets, 8});
      const double fp8_s = time_graph(stream, reps, 11, [&](int32_t r) {
        LinearWeight w;
        w.dtype = DType::kFP8E4M3;
        w.data = fp8_weights[static_cast<size_t>(r % fp8_sets)]->as<void>();
        w.scales = scales.as<float>();
        w.scaling = WeightScaling::kChannel;
        linear_skinny_cuda(tokens, s.in, s.out, x.as<uint16_t>(), w, y.as<void>(), DType::kBF16,
                           stream);
      });
      const double bf16_s = time_graph(stream, reps, 11, [&](int32_t r) {
        linear_skinny_cuda(tokens, s.in, s.out, x.as<uint16_t>(),
                           bf16_weights[static_cast<size_t>(r % bf16_sets)]->as<uint16_t>(),
                           y.as<void>(), DType::kBF16, stream);
      });
      reporter.record(
          fp8_weight_record(name, fp8_bytes, fp8_s, ceiling, "linear_skinny_bf16", bf16_s, ""));
    }
  }
}

void run_linear_bench(const BenchOptions& options, BenchReporter& reporter) {
  cudaStream_t stream = nullptr;
  cuda_check(cudaStreamCreate(&stream), "stream");
  const double ceiling = measure_read_ceiling(stream);
  const std::vector<LayerShape> shapes = {
      {"Llama-3.2-1B", "qkv", 2048, 3072, false},
      {"Llama-3.2-1B", "o", 2048, 2048, false},
      {"Llama-3.2-1B", "gate_up", 2048, 16384, false},
      {"Llama-3.2-1B", "down", 8192, 2048, false},
      {"Llama-3.2-1B", "lm_head", 2048, 128256, true},
      {"Llama-3-8B", "qkv", 4096, 6144, false},
      {"Llama-3-8B", "o", 4096, 4096, false},
      {"Llama-3-8B", "gate_up", 4096, 28672, false},
      {"Llama-3-8B", "down", 14336, 4096, false},
      {"Llama-3-8B", "lm_head", 4096, 128256, true},
  };
  const CublasHandle cublas;
  for (const LayerShape& s : shapes) {
    // 16-64 tokens (a batched decode step) have no streaming kernel yet: cuBLAS alone, against
    // the ceiling, for what such a kernel could win.
    for (int32_t tokens : {1, 4, 8, 16, 32, 64}) {
      if (options.quick && tokens != 1) continue;
      const std::string name =
          str_cat(s.model, " ", s.layer, " ", s.in, "->", s.out, " T=", tokens);
      if (!options.wants_case(name)) continue;
      const size_t weight_bytes = static_cast<size_t>(s.in) * s.out * 2;
      const std::vector<std::unique_ptr<DeviceBuffer>> weights =
          weight_copies(weight_bytes, stream);
      const auto sets = static_cast<int32_t>(weights.size());
      DeviceBuffer x(static_cast<size_t>(tokens) * s.in * 2);
      DeviceBuffer y(static_cast<size_t>(tokens) * s.out * 4);
      cuda_check(cudaMemsetAsync(x.as<void>(), 0x3c, x.bytes(), stream), "memset");
      const DType out = s.f32_out ? DType::kF32 : DType::kBF16;
      const int32_t reps = std::max(sets, 8);
      // cuBLAS directly (linear_cuda would take the skinny kernel at these sizes).
      const double cublas_s = time_graph(stream, reps, 11, [&](int32_t r) {
        cublas_gemm(cublas, tokens, s.in, s.out, x.as<uint16_t>(),
                    weights[static_cast<size_t>(r % sets)]->as<uint16_t>(), y.as<void>(), out,
                    stream);
      });
      if (tokens > kSkinnyLinearMaxTokens) {
        BenchRecord record = weight_stream_record(name, weight_bytes, cublas_s, ceiling, "", 1.0,
                                                  str_cat("cublas_us=", cublas_s * 1e6));
        record.note = str_cat("value = cublas_gemm (no streaming kernel past ",
                              kSkinnyLinearMaxTokens, " tokens) ", record.note);
        record.peer_value.reset();
        reporter.record(record);
        continue;
      }
      const double skinny_s = time_graph(stream, reps, 11, [&](int32_t r) {
        linear_skinny_cuda(tokens, s.in, s.out, x.as<uint16_t>(),
                           weights[static_cast<size_t>(r % sets)]->as<uint16_t>(), y.as<void>(),
                           out, stream);
      });
      reporter.record(weight_stream_record(
          name, weight_bytes, skinny_s, ceiling, "cublas_gemm", cublas_s,
          str_cat("skinny_us=", skinny_s * 1e6, " cublas_us=", cublas_s * 1e6)));
    }
  }
  run_fused_cases(options, reporter, stream, ceiling);
  run_fp8_weight_cases(options, reporter, stream, ceiling);
  cudaStreamDestroy(stream);
}

}  // namespace

QUENCH_REGISTER_BENCH("linear", run_linear_bench);

}  // namespace quench::bench
