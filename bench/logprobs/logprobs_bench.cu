// "logprobs": a token's log-softmax and the top entries of each logit row on the GPU
// (ops/logprobs/row_logprobs.h) beside the host path they replace (the rows copied to pageable
// host memory, then row_logprobs_reference per row on one core) and beside argmax_rows_cuda over
// the same rows (one read of them: the floor a one-pass kernel can approach).
//
// Cases: 1, 8, 32, 128 and 512 rows (a decode step's logprobs, the most rows a launch splits
// over clusters, a batch's, the most rows read twice, one lm_head pass of a prompt's echo
// logprobs) of a 128256-token vocabulary (Llama 3) and 512 of 151936 (Qwen), logits N(0, 3^2),
// top 5 and 20. Metric: us per launch (all rows), the launcher's kernel; where that is the
// cluster kernel, the note gives one CTA per row's time on the same rows (the A/B in the same
// run). GPU figures are medians of CUDA graph replays (8 calls each), the host path's the median
// of 3 wall-clock runs.
#include <cuda_runtime.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "quench/core/cluster_launch.cuh"
#include "quench/core/device_buffer.h"
#include "quench/core/error.h"
#include "quench/ops/argmax/argmax.h"
#include "quench/ops/logprobs/row_logprobs.h"
#include "quench/ops/logprobs/row_logprobs_reference.h"
#include "support/bench_registry.h"
#include "support/graph_timing.h"
#include "support/host_path_timing.h"

namespace quench::bench {
namespace {

void run_logprobs_bench(const BenchOptions& options, BenchReporter& reporter) {
  cudaStream_t stream = nullptr;
  cuda_check(cudaStreamCreate(&stream), "stream");
  struct Shape {
    int32_t rows, vocab;
  };
  const std::vector<Shape> shapes = {{1, 128256},   {8, 128256},   {32, 128256},
                                     {128, 128256}, {512, 128256}, {512, 151936}};
  const bool clusters_here = runs_cluster_kernels(require_current_cuda_device_properties("bench"));
  std::mt19937_64 rng(31);
  for (const Shape& shape : shapes) {
    if (options.quick && shape.rows != 32) continue;
    std::vector<float> host(static_cast<size_t>(shape.rows) * shape.vocab);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    for (float& x : host)
      x = normal(rng);
    const DeviceBuffer logits = upload(host);
    std::vector<int32_t> row_ids(static_cast<size_t>(shape.rows)), tokens(row_ids.size());
    std::uniform_int_distribution<int32_t> token(0, shape.vocab - 1);
    for (int32_t r = 0; r < shape.rows; ++r) {
      row_ids[static_cast<size_t>(r)] = r;
      tokens[static_cast<size_t>(r)] = token(rng);
    }
    const DeviceBuffer d_rows = upload(row_ids), d_tokens = upload(tokens);
    DeviceBuffer argmax_out(row_ids.size() * sizeof(int32_t));
    DeviceBuffer logprob(row_ids.size() * sizeof(float));
    DeviceBuffer top_ids(row_ids.size() * kMaxTopLogprobs * sizeof(int32_t));
    DeviceBuffer top_logprobs(row_ids.size() * kMaxTopLogprobs * sizeof(float));
    const double argmax_s = time_graph(stream, 8, 11, [&](int32_t) {
      argmax_rows_cuda(logits.as<float>(), shape.rows, shape.vocab, argmax_out.as<int32_t>(),
                       stream);
    });
    for (const int32_t top : {5, 20}) {
      const std::string name = str_cat(shape.rows, " rows x ", shape.vocab, " top=", top);
      if (!options.wants_case(name)) continue;
      RowLogprobsArgs a;
      a.logits = logits.as<float>();
      a.vocab = shape.vocab;
      a.rows = d_rows.as<int32_t>();
      a.tokens = d_tokens.as<int32_t>();
      a.n = shape.rows;
      a.top = top;
      a.logprob = logprob.as<float>();
      a.top_ids = top_ids.as<int32_t>();
      a.top_logprobs = top_logprobs.as<float>();
      const double gpu_s =
          time_graph(stream, 8, 11, [&](int32_t) { row_logprobs_cuda(a, stream); });
      // Where the launcher takes the cluster kernel, one CTA per row on the same rows beside it.
      std::string one_cta_note;
      if (clusters_here && shape.rows <= kRowLogprobsClusterRows &&
          shape.vocab >= kRowLogprobsClusterMinColumns) {
        RowLogprobsArgs one_cta = a;
        one_cta.kernel = RowLogprobsKernel::kOneCtaPerRow;
        const double one_cta_s =
            time_graph(stream, 8, 11, [&](int32_t) { row_logprobs_cuda(one_cta, stream); });
        one_cta_note = str_cat("; one_cta_per_row_us=", one_cta_s * 1e6);
      }
      const double host_us =
          host_path_us(logits, shape.rows, shape.vocab, 3, [&](int32_t r, auto row) {
            if (!(row_logprobs_reference(row, tokens[static_cast<size_t>(r)], top).logprob <= 0.0f))
              fail("the host path's logprob is not <= 0");
          });
      BenchRecord record;
      record.bench = "logprobs";
      record.case_name = name;
      record.metric = "us";
      record.value = gpu_s * 1e6;
      record.ceiling = argmax_s * 1e6;
      record.peer = "host path (copy + row_logprobs_reference)";
      record.peer_value = host_us;
      record.note = str_cat("ceiling = argmax_rows_cuda over the same rows", one_cta_note);
      reporter.record(record);
    }
  }
  cudaStreamDestroy(stream);
}

}  // namespace

QUENCH_REGISTER_BENCH("logprobs", run_logprobs_bench);

}  // namespace quench::bench
