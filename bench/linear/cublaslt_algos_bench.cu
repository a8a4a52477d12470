// "cublaslt_algos": how far cuBLAS's default GEMM (cublasGemmEx, CUBLAS_GEMM_DEFAULT, what
// linear_cuda runs for 2-64-token layers) is from the fastest algorithm of cuBLASLt's own
// heuristic list on the same batched-decode shapes: whether choosing the algorithm per shape at
// start-up (autotuning, as TensorRT-LLM does) would pay before any kernel of our own.
//
// Cases: the Llama-3.2-1B and Llama-3-8B layers (qkv, o, gate_up, down, lm_head) at 4, 8, 16, 32
// and 64 tokens, bf16 in and out, fp32 accumulation. Metric: TB/s of the weight bytes for the
// fastest heuristic algorithm (up to 16 asked, each timed in a CUDA graph over weight copies
// that exceed L2, like the linear bench); peer: cublasGemmEx's default; the note names the
// algorithm count, the first heuristic's time and the best one's index.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "quench/core/device_buffer.h"
#include "quench/core/error.h"
#include "quench/ops/linear/linear_cublas.h"
#include "support/bench_registry.h"
#include "support/graph_timing.h"

namespace quench::bench {
namespace {

void lt_check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) fail(str_cat(what, ": ", cublasGetStatusString(status)));
}

void run_cublaslt_algos_bench(const BenchOptions& options, BenchReporter& reporter) {
  cudaStream_t stream = nullptr;
  cuda_check(cudaStreamCreate(&stream), "stream");
  cublasLtHandle_t lt = nullptr;
  lt_check(cublasLtCreate(&lt), "cublasLtCreate");
  const size_t workspace_bytes = size_t{32} << 20;
  DeviceBuffer workspace(workspace_bytes);
  const CublasHandle cublas;
  struct Shape {
    const char* model;
    const char* layer;
    int32_t in, out;
  };
  const std::vector<Shape> shapes = {
      {"Llama-3.2-1B", "qkv", 2048, 3072},       {"Llama-3.2-1B", "o", 2048, 2048},
      {"Llama-3.2-1B", "gate_up", 2048, 16384},  {"Llama-3.2-1B", "down", 8192, 2048},
      {"Llama-3.2-1B", "lm_head", 2048, 128256}, {"Llama-3-8B", "qkv", 4096, 6144},
      {"Llama-3-8B", "o", 4096, 4096},           {"Llama-3-8B", "gate_up", 4096, 28672},
      {"Llama-3-8B", "down", 14336, 4096},       {"Llama-3-8B", "lm_head", 4096, 128256}};
  for (const Shape& s : shapes) {
    const size_t weight_bytes = static_cast<size_t>(s.in) * s.out * 2;
    const size_t sets =
        std::min<size_t>(16, std::max<size_t>(1, (size_t{100} << 20) / weight_bytes + 1));
    std::vector<std::unique_ptr<DeviceBuffer>> weights;
    for (size_t i = 0; i < sets; ++i) {
      weights.push_back(std::make_unique<DeviceBuffer>(weight_bytes));
      cuda_check(cudaMemsetAsync(weights.back()->as<void>(), 0x3c, weight_bytes, stream), "memset");
    }
    const int32_t reps = std::max(static_cast<int32_t>(sets), 8);
    for (const int32_t tokens : {4, 8, 16, 32, 64}) {
      if (options.quick && tokens != 32) continue;
      const std::string name =
          str_cat(s.model, " ", s.layer, " ", s.in, "->", s.out, " T=", tokens);
      if (!options.wants_case(name)) continue;
      DeviceBuffer x(static_cast<size_t>(tokens) * s.in * 2),
          y(static_cast<size_t>(tokens) * s.out * 2);
      cuda_check(cudaMemsetAsync(x.as<void>(), 0x3c, x.bytes(), stream), "memset");
      const double default_s = time_graph(stream, reps, 11, [&](int32_t r) {
        cublas_gemm(cublas, tokens, s.in, s.out, x.as<uint16_t>(),
                    weights[static_cast<size_t>(r) % sets]->as<uint16_t>(), y.as<void>(),
                    DType::kBF16, stream);
      });
      // out^T [out, tokens] = W [in, out]^T x [in, tokens], column-major as cublasGemmEx has it.
      cublasLtMatmulDesc_t op = nullptr;
      lt_check(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc");
      const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
      lt_check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a,
                                              sizeof(trans_a)),
               "transa");
      lt_check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b,
                                              sizeof(trans_b)),
               "transb");
      cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
      lt_check(cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, s.in, s.out, s.in), "layout a");
      lt_check(cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, s.in, tokens, s.in), "layout b");
      lt_check(cublasLtMatrixLayoutCreate(&c, CUDA_R_16BF, s.out, tokens, s.out), "layout c");
      cublasLtMatmulPreference_t pref = nullptr;
      lt_check(cublasLtMatmulPreferenceCreate(&pref), "pref");
      lt_check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &workspace_bytes, sizeof(workspace_bytes)),
               "pref workspace");
      cublasLtMatmulHeuristicResult_t results[16];
      int returned = 0;
      lt_check(cublasLtMatmulAlgoGetHeuristic(lt, op, a, b, c, c, pref, 16, results, &returned),
               "heuristic");
      const float alpha = 1.0f, beta = 0.0f;
      double best_s = 0.0, first_s = 0.0;
      int best_index = -1;
      for (int i = 0; i < returned; ++i) {
        if (results[i].state != CUBLAS_STATUS_SUCCESS) continue;
        const double t = time_graph(stream, reps, 11, [&](int32_t r) {
          lt_check(
              cublasLtMatmul(lt, op, &alpha, weights[static_cast<size_t>(r) % sets]->as<void>(), a,
                             x.as<void>(), b, &beta, y.as<void>(), c, y.as<void>(), c,
                             &results[i].algo, workspace.as<void>(), workspace_bytes, stream),
              "cublasLtMatmul");
        });
        if (i == 0) first_s = t;
        if (best_index < 0 || t < best_s) {
          best_s = t;
          best_index = i;
        }
      }
      cublasLtMatmulPreferenceDestroy(pref);
      cublasLtMatrixLayoutDestroy(a);
      cublasLtMatrixLayoutDestroy(b);
      cublasLtMatrixLayoutDestroy(c);
      cublasLtMatmulDescDestroy(op);
      if (best_index < 0) continue;
      BenchRecord record;
      record.bench = "cublaslt_algos";
      record.case_name = name;
      record.metric = "TB/s";
      record.value = static_cast<double>(weight_bytes) / best_s / 1e12;
      record.peer = "cublasGemmEx default";
      record.peer_value = static_cast<double>(weight_bytes) / default_s / 1e12;
      record.note =
          str_cat("algos=", returned, " best_index=", best_index, " best_us=", best_s * 1e6,
                  " first_us=", first_s * 1e6, " default_us=", default_s * 1e6);
      reporter.record(record);
    }
  }
  cublasLtDestroy(lt);
  cudaStreamDestroy(stream);
}

}  // namespace

QUENCH_REGISTER_BENCH("cublaslt_algos", run_cublaslt_algos_bench);

}  // namespace quench::bench
