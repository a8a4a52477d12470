#include "quench/layer/layer_demo.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "quench/attention/attention_decision_table.h"
#include "quench/attention/reference_attention_kernel.h"
#include "quench/core/log.h"
#include "quench/layer/layer_accuracy.h"
#include "quench/layer/layer_step.h"

namespace quench {
namespace {

// Where the run happens: the CPU backend (compute capability 0) or GPU 0.
struct LayerTarget {
  bool gpu = false;
  int32_t compute_capability = 0;
  std::string name;  // "cpu" or e.g. "NVIDIA H200 (sm_90)"
};

bool cuda_device_present() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

LayerTarget resolve_target(LayerDevice device) {
  LayerTarget target;
  target.name = "cpu";
  const bool want_gpu =
      device == LayerDevice::kGpu || (device == LayerDevice::kAuto && cuda_device_present());
  if (!want_gpu) return target;
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  QUENCH_REQUIRE(status == cudaSuccess && count > 0, "--device gpu: no CUDA device (",
                 status == cudaSuccess ? "0 devices" : cudaGetErrorString(status),
                 "); use --device cpu or auto");
  cudaDeviceProp props{};
  const cudaError_t props_status = cudaGetDeviceProperties(&props, 0);
  QUENCH_REQUIRE(props_status == cudaSuccess,
                 "cudaGetDeviceProperties failed: ", cudaGetErrorString(props_status));
  target.gpu = true;
  target.compute_capability = props.major * 10 + props.minor;
  target.name = str_cat(props.name, " (", gpu_arch_name(target.compute_capability), ")");
  return target;
}

AttentionConfig layer_attention_config(const LayerDemoOptions& o, int32_t compute_capability,
                                       DType kv_dtype) {
  AttentionConfig config;
  config.compute_capability = compute_capability;
  config.head_dim_qk = config.head_dim_vo = o.head_dim;
  config.num_q_heads = o.num_q_heads;
  config.num_kv_heads = o.num_kv_heads;
  config.kv_dtype = kv_dtype;
  config.page_size = o.page_size;
  config.layout = o.layout;
  // The bf16 baseline also keeps its query in bf16 (SPEC §1.1's last row).
  config.allow_fp8_query = kv_dtype != DType::kBF16;
  return config;
}

// Keeps the selection's info lines (the table repeats them) off the output; warnings go to err.
class QuietSelectionLog {
 public:
  explicit QuietSelectionLog(std::ostream& err)
      : previous_(set_log_sink([&err](LogLevel level, const std::string& message) {
          if (level >= LogLevel::kWarning) {
            err << log_level_name(level) << " quench: " << message << "\n";
          }
        })) {}
  QuietSelectionLog(const QuietSelectionLog&) = delete;
  QuietSelectionLog& operator=(const QuietSelectionLog&) = delete;
  ~QuietSelectionLog() { set_log_sink(previous_); }

 private:
  LogSink previous_;
};

LayerStepResult run_step(const LayerTarget& target, const LayerWorkload& w,
                         const AttentionBackendSelection& selection, const AttentionScales& scales,
                         RopeAppendPath fusion) {
  return target.gpu ? run_layer_step_device(w, selection, scales, fusion)
                    : run_layer_step_host(w, selection, scales);
}

std::string format_ms(double ms) {
  char text[32];
  std::snprintf(text, sizeof(text), "%10.3f", ms);
  return text;
}

std::string format_float(const char* format, double value) {
  char text[32];
  std::snprintf(text, sizeof(text), format, value);
  return text;
}

std::string describe_step(const LayerWorkload& w) {
  std::string s = str_cat(w.decode_steps.size(), " decode seqs");
  if (!w.decode_steps.empty()) {
    s += str_cat(" (cached ", w.decode_steps.front().num_cached_tokens, "..",
                 w.decode_steps.back().num_cached_tokens, " tokens, +1 each)");
  }
  s += str_cat(" + ", w.prefill_chunks.size(), " prefill chunks");
  if (!w.prefill_chunks.empty()) {
    s += str_cat(" (+", w.prefill_chunks.front().num_new_tokens, " tokens after");
    for (size_t j = 0; j < w.prefill_chunks.size(); ++j) {
      s += str_cat(j == 0 ? " " : "/", w.prefill_chunks[j].num_cached_tokens);
    }
    s += " cached)";
  }
  return s + str_cat(" = ", w.num_tokens(), " query rows");
}

double mib(int64_t bytes) {
  return static_cast<double>(bytes) / (1024.0 * 1024.0);
}

}  // namespace

void run_layer_demo(const LayerDemoOptions& o, std::ostream& out) {
  QUENCH_REQUIRE(o.fusion == RopeAppendPath::kFused || o.device != LayerDevice::kCpu,
                 "--fusion unfused is a GPU path; use --device gpu or auto");
  const LayerTarget target = resolve_target(o.device);
  const AttentionBackendSelection selection = AttentionBackendSelection::decide(
      layer_attention_config(o, target.compute_capability, o.kv_dtype), o.prefill_override,
      o.decode_override);
  const AttentionBackendSelection bf16_selection = AttentionBackendSelection::decide(
      layer_attention_config(o, target.compute_capability, DType::kBF16), {}, {});

  out << "quench layer: one decoder layer's attention path (RoPE + quantize + paged KV append, "
         "then attention) on "
      << target.name
      << (target.gpu ? str_cat(", RoPE/append ", rope_append_path_name(o.fusion)) : std::string())
      << "\n";
  out << format_attention_decision_table(selection);

  const LayerWorkload w = make_layer_workload(o);
  const AttentionScales scales =
      AttentionScales::from_checkpoint(w.scales, w.num_kv_heads, DType::kBF16, "layer 0");
  const LayerStepResult fp8 = run_step(target, w, selection, scales, o.fusion);
  const LayerStepResult bf16 = run_step(target, w, bf16_selection, scales, o.fusion);
  // The fp32 reference: the CPU reference kernel (by name: the CPU backend's default is the
  // faster `cpu` kernel) over the bf16 cache.
  const AttentionKernelOverride use_reference{AttentionKernelOverride::Kind::kUse,
                                              kReferenceKernelName};
  const LayerStepResult reference = run_layer_step_host(
      w,
      AttentionBackendSelection::decide(layer_attention_config(o, 0, DType::kBF16), use_reference,
                                        use_reference),
      scales);

  const KvCacheLayout kv = layer_kv_layout(w, selection);
  const bool fp8_query = is_fp8(selection.prefill().q_dtype) || is_fp8(selection.decode().q_dtype);
  out << "step       " << describe_step(w) << "; " << w.num_prefix_tokens()
      << " cached tokens written first\n";
  out << "KV cache   " << dtype_name(kv.dtype) << " " << kv_layout_name(kv.layout) << ", "
      << kv.num_pages << " pages of " << kv.page_size << " (page 0 null), K+V "
      << format_float("%.2f", mib(fp8.kv_cache_bytes)) << " MiB vs bf16 "
      << format_float("%.2f", mib(bf16.kv_cache_bytes)) << " MiB\n";
  out << "scales     k " << format_float("%.3e", scales.k_scale().per_tensor) << "  v "
      << format_float("%.3e", scales.v_scale().per_tensor) << "  q "
      << format_float("%.3e", scales.q_scale())
      << (fp8_query ? " (FP8 query rows)" : " (unused: every phase takes a bf16 query)")
      << "  (amax/fp8_max; divide when storing)\n";

  const OutputError vs_bf16 = compare_outputs(fp8.out, bf16.out);
  const OutputError vs_reference = compare_outputs(fp8.out, reference.out);
  const OutputError bf16_vs_reference = compare_outputs(bf16.out, reference.out);
  out << "accuracy   " << dtype_name(kv.dtype)
      << " path vs bf16 KV path:   " << describe_output_error(vs_bf16) << "\n";
  out << "           " << dtype_name(kv.dtype)
      << " path vs fp32 reference: " << describe_output_error(vs_reference) << "\n";
  out << "           bf16 KV path vs fp32 reference: " << describe_output_error(bf16_vs_reference)
      << "\n";

  out << "time (ms)  "
      << (target.gpu ? "CUDA events, mean of 10 runs after a warm-up" : "host wall time, one run")
      << "\n";
  char header[64];
  std::snprintf(header, sizeof(header), "  stage        %10s%10s\n", dtype_name(kv.dtype), "bf16");
  out << header;
  out << "  prefix fill  " << format_ms(fp8.timings.prefix_fill_ms)
      << format_ms(bf16.timings.prefix_fill_ms) << "\n";
  out << "  rope+append  " << format_ms(fp8.timings.rope_append_ms)
      << format_ms(bf16.timings.rope_append_ms) << "\n";
  out << "  attention    " << format_ms(fp8.timings.attention_ms)
      << format_ms(bf16.timings.attention_ms) << "   (workspace " << fp8.attention_workspace_bytes
      << " B)\n";

  out << "summary: device=" << (target.gpu ? gpu_arch_name(target.compute_capability) : "cpu")
      << " kv=" << dtype_name(kv.dtype) << " prefill=" << selection.prefill().kernel->name()
      << " decode=" << selection.decode().kernel->name() << " rows=" << w.num_tokens()
      << " rel_l2_vs_bf16=" << format_float("%.3e", vs_bf16.rel_l2)
      << " rel_l2_vs_ref=" << format_float("%.3e", vs_reference.rel_l2)
      << " step_ms=" << format_float("%.3f", fp8.timings.rope_append_ms + fp8.timings.attention_ms)
      << "\n";
  QUENCH_REQUIRE(vs_bf16.non_finite == 0 && bf16_vs_reference.non_finite == 0,
                 "the attention output has non-finite values (", vs_bf16.non_finite, " on the ",
                 dtype_name(kv.dtype), " path, ", bf16_vs_reference.non_finite,
                 " on the bf16 path): a kernel left rows unwritten or overflowed");
}

int run_layer_command(int argc, char** argv, std::ostream& out, std::ostream& err) {
  LayerDemoOptions options;
  try {
    options = parse_layer_demo_flags(argc, argv);
  } catch (const Error& e) {
    err << "error: " << e.what() << "\n";
    return 2;
  }
  if (options.help) {
    out << layer_demo_usage();
    return 0;
  }
  try {
    const QuietSelectionLog quiet(err);
    run_layer_demo(options, out);
  } catch (const Error& e) {
    out.flush();
    err << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace quench
