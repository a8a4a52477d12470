// "sampling": a step's random draws on the GPU (ops/sampling/sample_rows.h) beside the host path
// they replace (the logits copied to pageable host memory, then sample_row_reference per row on
// one core) and beside the greedy pick (argmax_rows_cuda: one read of the same rows, the floor a
// draw can approach).
//
// Cases: 1 to 64 rows of a 128256-token vocabulary (Llama 3) and 32 of 151936 (Qwen), logits
// N(0, 3^2), under the samplers servers see most: temperature alone, top-k 50, top-p 0.95, top-k
// with top-p, min_p 0.05. Metric: us per step (all rows); GPU figures are medians of CUDA graph
// replays (8 calls each), the host path's the median of 5 wall-clock runs. Run it again under
// QUENCH_SAMPLING_CUTOFFS=block for the cutoffs in one CTA per row (the default spreads each
// row's).
#include <cuda_runtime.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "quench/core/device_buffer.h"
#include "quench/core/error.h"
#include "quench/ops/argmax/argmax.h"
#include "quench/ops/sampling/sample_rows.h"
#include "quench/ops/sampling/sample_rows_reference.h"
#include "support/bench_registry.h"
#include "support/graph_timing.h"
#include "support/host_path_timing.h"

namespace quench::bench {
namespace {

struct SamplerCase {
  const char* name;
  RowSampler sampler;
};

void run_sampling_bench(const BenchOptions& options, BenchReporter& reporter) {
  cudaStream_t stream = nullptr;
  cuda_check(cudaStreamCreate(&stream), "stream");
  const std::vector<SamplerCase> samplers = {
      {"T=0.8", {0.8f, 0, 1.0f, 0.0f}},
      {"T=0.8 top_k=50", {0.8f, 50, 1.0f, 0.0f}},
      {"T=0.8 top_p=0.95", {0.8f, 0, 0.95f, 0.0f}},
      {"T=0.8 top_k=50 top_p=0.95", {0.8f, 50, 0.95f, 0.0f}},
      {"T=1 min_p=0.05", {1.0f, 0, 1.0f, 0.05f}},
  };
  struct Shape {
    int32_t rows, vocab;
  };
  const std::vector<Shape> shapes = {
      {1, 128256}, {8, 128256}, {32, 128256}, {64, 128256}, {32, 151936}};
  std::mt19937_64 rng(29);
  for (const Shape& shape : shapes) {
    if (options.quick && shape.rows != 32) continue;
    std::vector<float> host(static_cast<size_t>(shape.rows) * shape.vocab);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    for (float& x : host)
      x = normal(rng);
    const DeviceBuffer logits = upload(host);
    std::vector<int32_t> row_ids(static_cast<size_t>(shape.rows));
    for (int32_t r = 0; r < shape.rows; ++r)
      row_ids[static_cast<size_t>(r)] = r;
    const DeviceBuffer rows = upload(row_ids);
    DeviceBuffer out(row_ids.size() * sizeof(int32_t));
    DeviceBuffer workspace(sample_rows_workspace_bytes(shape.rows));
    const double argmax_s = time_graph(stream, 8, 11, [&](int32_t) {
      argmax_rows_cuda(logits.as<float>(), shape.rows, shape.vocab, out.as<int32_t>(), stream);
    });
    for (const SamplerCase& c : samplers) {
      const std::string name = str_cat(shape.rows, " rows x ", shape.vocab, " ", c.name);
      if (!options.wants_case(name)) continue;
      std::vector<RowSampler> per_row(row_ids.size(), c.sampler);
      for (RowSampler& s : per_row)
        s.key = rng();
      const DeviceBuffer d_samplers = upload(per_row);
      const double draw_s = time_graph(stream, 8, 11, [&](int32_t) {
        sample_rows_cuda(logits.as<float>(), shape.vocab, rows.as<int32_t>(),
                         d_samplers.as<RowSampler>(), shape.rows, workspace.as<void>(),
                         out.as<int32_t>(), stream, sample_rows_cutoffs(per_row, shape.vocab));
      });
      const double host_us =
          host_path_us(logits, shape.rows, shape.vocab, 5, [&](int32_t r, auto row) {
            if (sample_row_reference(row, per_row[static_cast<size_t>(r)]) < 0)
              fail("the host path drew from a non-finite row");
          });
      BenchRecord record;
      record.bench = "sampling";
      record.case_name = name;
      record.metric = "us";
      record.value = draw_s * 1e6;
      record.ceiling = argmax_s * 1e6;
      record.peer = "host path (copy + sample_row_reference)";
      record.peer_value = host_us;
      record.note = str_cat("ceiling = argmax_rows_cuda over the same rows");
      reporter.record(record);
    }
  }
  cudaStreamDestroy(stream);
}

}  // namespace

QUENCH_REGISTER_BENCH("sampling", run_sampling_bench);

}  // namespace quench::bench
