// The GPU run of a `quench layer` step (layer_step.h): device copies of the workload, the fused
// (or unfused) RoPE + quantize + append kernels and the attention op on one stream.
#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <utility>

#include "quench/core/device_buffer.h"
#include "quench/layer/layer_step.h"
#include "quench/numerics/bf16.h"
#include "quench/ops/rope_quant_append/rope_append_path.h"

namespace quench {
namespace {

// Runs after the first (warm-up) run of each stage to average out launch noise.
constexpr int kTimedRuns = 10;

class Stream {
 public:
  Stream() { check_cuda(cudaStreamCreate(&stream_), "cudaStreamCreate"); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() { cudaStreamDestroy(stream_); }
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// Runs `stage` once (warm-up, and the result the caller keeps), then kTimedRuns more times
// between CUDA events; returns the mean milliseconds of one run. Every stage is idempotent
// (it rewrites the same cache slots and outputs), so repeating it changes nothing.
double time_stage(const std::function<void()>& stage, cudaStream_t stream) {
  stage();
  check_cuda(cudaGetLastError(), "kernel launch");
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  check_cuda(cudaEventCreate(&start), "cudaEventCreate");
  check_cuda(cudaEventCreate(&stop), "cudaEventCreate");
  check_cuda(cudaEventRecord(start, stream), "cudaEventRecord");
  for (int i = 0; i < kTimedRuns; ++i)
    stage();
  check_cuda(cudaEventRecord(stop, stream), "cudaEventRecord");
  const cudaError_t sync = cudaEventSynchronize(stop);
  float ms = 0.0f;
  const cudaError_t elapsed = cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  check_cuda(sync, "cudaEventSynchronize (a kernel failed)");
  check_cuda(elapsed, "cudaEventElapsedTime");
  return static_cast<double>(ms) / kTimedRuns;
}

}  // namespace

LayerStepResult run_layer_step_device(const LayerWorkload& w,
                                      const AttentionBackendSelection& selection,
                                      const AttentionScales& scales, RopeAppendPath fusion) {
  const KvCacheLayout kv = layer_kv_layout(w, selection);
  const auto q_elems = static_cast<size_t>(w.num_tokens()) * static_cast<size_t>(w.num_q_heads) *
                       static_cast<size_t>(w.head_dim);
  const AttentionMetadata& m = w.metadata;
  Stream stream;

  const DeviceBuffer q = upload(w.q);
  const DeviceBuffer k = upload(w.k);
  const DeviceBuffer v = upload(w.v);
  const DeviceBuffer positions = upload(m.positions);
  const DeviceBuffer slots = upload(m.slot_mapping);
  const DeviceBuffer prefix_k = upload(w.prefix_k);
  const DeviceBuffer prefix_v = upload(w.prefix_v);
  const DeviceBuffer prefix_positions = upload(w.prefix_positions);
  const DeviceBuffer prefix_slots = upload(w.prefix_slots);
  const DeviceBuffer cos_sin = upload(w.cos_sin_cache);
  const DeviceBuffer q_offsets = upload(m.q_offsets);
  const DeviceBuffer prefill_q_offsets = upload(m.prefill_q_offsets);
  const DeviceBuffer seq_lens = upload(m.seq_lens);
  const DeviceBuffer block_table = upload(m.block_table);
  const DeviceBuffer prefix_q_scratch(w.prefix_k.size() * sizeof(uint16_t));
  const DeviceBuffer k_cache(static_cast<size_t>(kv.tensor_bytes()));
  const DeviceBuffer v_cache(static_cast<size_t>(kv.tensor_bytes()));
  const DeviceBuffer q_bf16(q_elems * sizeof(uint16_t));
  const DeviceBuffer q_fp8(q_elems);
  const DeviceBuffer out(q_elems * sizeof(uint16_t));
  // Poison the output (0xFFFF is a bf16 NaN) so rows a kernel skips show up as errors.
  check_cuda(cudaMemset(out.as<void>(), 0xFF, out.bytes()), "cudaMemset");

  LayerStepBuffers b;
  b.q = q.as<uint16_t>();
  b.k = k.as<uint16_t>();
  b.v = v.as<uint16_t>();
  b.positions = positions.as<int32_t>();
  b.slots = slots.as<int64_t>();
  b.prefix_k = prefix_k.as<uint16_t>();
  b.prefix_v = prefix_v.as<uint16_t>();
  b.prefix_positions = prefix_positions.as<int32_t>();
  b.prefix_slots = prefix_slots.as<int64_t>();
  b.cos_sin_cache = cos_sin.as<float>();
  b.prefix_q_scratch = prefix_q_scratch.as<uint16_t>();
  b.k_cache = k_cache.as<void>();
  b.v_cache = v_cache.as<void>();
  b.q_bf16 = q_bf16.as<uint16_t>();
  b.q_fp8 = q_fp8.as<uint8_t>();
  b.out = out.as<uint16_t>();

  AttentionMetadataView view = host_metadata_view(m);
  view.q_offsets = q_offsets.as<int32_t>();
  view.prefill_q_offsets = prefill_q_offsets.as<int32_t>();
  view.seq_lens = seq_lens.as<int32_t>();
  view.block_table = block_table.as<int32_t>();

  const AttentionOp op(selection, scales, layer_attention_settings(w));
  AttentionOpArgs args = layer_attention_args(w, selection, b, view);
  const DeviceBuffer attention_workspace(op.workspace_bytes(args));
  if (attention_workspace.bytes() > 0) {  // zeroed once: decode's split counters live there
    check_cuda(cudaMemset(attention_workspace.as<void>(), 0, attention_workspace.bytes()),
               "cudaMemset(attention workspace)");
  }
  args.workspace = attention_workspace.as<void>();
  args.workspace_bytes = attention_workspace.bytes();

  const RopeQuantAppendParams prefix = prefix_fill_params(w, selection, scales, b);
  const RopeQuantAppendParams step = step_append_params(w, selection, scales, b);
  const DeviceBuffer append_workspace(fusion == RopeAppendPath::kUnfused
                                          ? std::max(rope_quant_append_workspace_bytes(prefix),
                                                     rope_quant_append_workspace_bytes(step))
                                          : 0);
  const RopeAppendWorkspace append_ws{append_workspace.as<void>(), append_workspace.bytes()};

  LayerStepResult result;
  result.kv_cache_bytes = 2 * kv.tensor_bytes();
  result.attention_workspace_bytes = attention_workspace.bytes();
  if (w.num_prefix_tokens() > 0) {
    result.timings.prefix_fill_ms = time_stage(
        [&] { run_rope_quant_append(prefix, fusion, stream.get(), append_ws); }, stream.get());
  }
  result.timings.rope_append_ms = time_stage(
      [&] { run_rope_quant_append(step, fusion, stream.get(), append_ws); }, stream.get());
  result.timings.attention_ms = time_stage([&] { op.run(args, stream.get()); }, stream.get());

  std::vector<uint16_t> host_out(q_elems);
  check_cuda(cudaMemcpyAsync(host_out.data(), out.as<void>(), out.bytes(), cudaMemcpyDeviceToHost,
                             stream.get()),
             "cudaMemcpyAsync device to host");
  check_cuda(cudaStreamSynchronize(stream.get()), "cudaStreamSynchronize");
  result.out.resize(q_elems);
  for (size_t i = 0; i < q_elems; ++i)
    result.out[i] = bf16_bits_to_float(host_out[i]);
  return result;
}

}  // namespace quench
