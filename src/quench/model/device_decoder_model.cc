#include "quench/model/device_decoder_model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <utility>

#include "quench/attention/query_output_split.h"
#include "quench/core/cuda_device.h"
#include "quench/core/device_buffer.h"
#include "quench/core/env_switch.h"
#include "quench/core/log.h"
#include "quench/kv_cache/block_table.h"
#include "quench/model/decode_graph_plan.h"
#include "quench/model/device_row_picks.h"
#include "quench/model/device_step_memory.h"
#include "quench/model/step_profiler.h"
#include "quench/ops/attention/decode/decode_attention.h"
#include "quench/ops/bias_add/bias_add.h"
#include "quench/ops/embedding/embedding.h"
#include "quench/ops/linear/linear_cublas.h"
#include "quench/ops/linear/linear_fp8_weight.h"
#include "quench/ops/linear/linear_skinny_fused.h"
#include "quench/ops/rms_norm/rms_norm.h"
#include "quench/ops/rope/rope_reference.h"
#include "quench/ops/rope_quant_append/rope_quant_append.h"
#include "quench/ops/swiglu/swiglu.h"

namespace quench {
namespace {

// QUENCH_FP8_ACTIVATIONS=fused|separate (read once; default fused): whether the rms_norm and
// swiglu kernels (and the decode attention, for the o projection) in front of an FP8-weight GEMM
// write its e4m3 activations themselves, or leave them to the GEMM's own quantization pass (an
// A/B switch).
bool fp8_activations_fused() {
  static const bool fused =
      env_switch("QUENCH_FP8_ACTIVATIONS", {"fused", "separate"}) != "separate";
  return fused;
}

// Uploads the concatenation of bf16 weights (rows of the same width), one GEMM for several
// projections.
DeviceBuffer upload_rows(std::initializer_list<const Bf16Weight*> parts) {
  size_t total = 0;
  for (const Bf16Weight* w : parts)
    total += w->size();
  std::vector<uint16_t> host;
  host.reserve(total);
  for (const Bf16Weight* w : parts)
    host.insert(host.end(), w->data(), w->data() + w->size());
  return upload(host);
}

DeviceBuffer upload_weight(const Bf16Weight& w) {
  return upload(w.data(), w.size());
}

// One linear layer's weight on the device: bf16, or FP8 with one scale per output row (a
// checkpoint's per-tensor scale repeated; with them repeated per 128 columns for the FP8 GEMM's
// block-scaled kernels where the input is a multiple of 512) or per 128 x 128 block, and the
// descriptor the kernels take.
struct DeviceLinear {
  DeviceBuffer data, scales, group_scales;
  LinearWeight weight;
};

// The concatenation of `parts` (rows of the same width): FP8 where the checkpoint's weights were
// kept FP8 (ModelWeights::load's keep_fp8; block scales concatenate by whole 128-row blocks,
// which keeps_fp8_weights ensures), else bf16. Per-channel scales also go up repeated per 128
// columns where `channel_groups` (the block-scaled GEMM kernels for them: measured on sm_90
// only, so other GPUs keep the outer-vector kernels that per-channel weights always had).
DeviceLinear upload_linear(std::initializer_list<const Bf16Weight*> bf16,
                           std::initializer_list<const Fp8Weight*> fp8, bool channel_groups) {
  DeviceLinear l;
  const Fp8Weight& first = **fp8.begin();
  if (first.empty()) {
    l.data = upload_rows(bf16);
    l.weight = LinearWeight::bf16(l.data.as<uint16_t>());
    return l;
  }
  std::vector<uint8_t> bytes;
  std::vector<float> scales;
  for (const Fp8Weight* w : fp8) {
    bytes.insert(bytes.end(), w->bytes().begin(), w->bytes().end());
    scales.insert(scales.end(), w->scales().begin(), w->scales().end());
  }
  l.data = upload(bytes);
  l.scales = upload(scales);
  l.weight.dtype = DType::kFP8E4M3;
  l.weight.data = l.data.as<void>();
  l.weight.scales = l.scales.as<float>();
  l.weight.scaling = first.blocks() ? WeightScaling::kBlock : WeightScaling::kChannel;
  l.weight.block_out = first.block_out();
  l.weight.block_in = first.block_in();
  if (l.weight.scaling != WeightScaling::kChannel || !channel_groups) return l;
  const auto in = static_cast<int32_t>(first.bytes().size() / first.scales().size());
  if (in % kBlockGemmInputMultiple == 0) {
    l.group_scales = upload(channel_scales_by_group(scales, in));
    l.weight.group_scales = l.group_scales.as<float>();
  }
  return l;
}

struct LayerBuffers {
  DeviceBuffer input_norm, qkv_bias, q_norm, k_norm, post_norm;
  DeviceLinear qkv, o, gate_up, down;
};

// The device addresses and host values of one step.
struct StepBuffers {
  StepInputsLayout layout;
  int32_t t = 0;          // query rows
  int32_t rows = 0;       // logit rows
  int32_t pass_rows = 0;  // logit rows per lm_head pass (the logits buffer's rows)
  int32_t* ids = nullptr;
  int32_t* positions = nullptr;
  Fp8ActivationScratch fp8_scratch;  // FP8 linear weights only
  int32_t linear_out_rows = 0;       // rows the linear layers' outputs hold (>= t)
  int64_t* slots = nullptr;
  int32_t* gather = nullptr;  // the logit rows
  AttentionMetadataView view;
  // x: the residual stream; x_next: where a fused norm writes the next residual (out of place:
  // linear_skinny_fused.h), the two swapping roles at each fused norm.
  uint16_t *x = nullptr, *x_next = nullptr, *h = nullptr, *qkv = nullptr, *q_rot = nullptr,
           *attn = nullptr, *proj = nullptr, *gate_up = nullptr, *act = nullptr, *picked = nullptr;
  uint8_t* q_fp8 = nullptr;
  float* logits = nullptr;
};

std::vector<int32_t> iota_rows(int32_t n) {
  std::vector<int32_t> rows(static_cast<size_t>(n));
  for (int32_t r = 0; r < n; ++r)
    rows[static_cast<size_t>(r)] = r;
  return rows;
}

}  // namespace

bool cuda_device_available() {
  return current_cuda_device_properties().has_value();
}

struct DeviceDecoderModel::State {
  ModelConfig config;
  DecoderModelOptions options;
  KvCacheLayout kv;
  int32_t max_pages = 0;  // the block-table stride of max_model_len (graphs read this one)
  int32_t logit_rows_per_pass = 0;     // the logits buffer's rows (logit_rows_per_pass())
  std::vector<AttentionOp> attention;  // per layer (their scales differ)
  // Per layer, the k/v scales the append kernel divides by: values, or device arrays in
  // head_scales for per-KV-head checkpoint scales.
  std::vector<HeadScales> append_k_scales, append_v_scales;
  std::vector<DeviceBuffer> head_scales;
  cudaStream_t stream = nullptr;
  std::unique_ptr<CublasHandle> cublas;  // created once a device is known to be there
  std::unique_ptr<Fp8Gemm> fp8_gemm;     // where the checkpoint's linear weights stay FP8
  int32_t max_linear_in = 0;             // the widest input of a layer's linear weights

  DeviceBuffer embed, final_norm, lm_head_own;
  const uint16_t* lm_head = nullptr;
  std::vector<LayerBuffers> layers;
  DeviceBuffer cos_sin;
  std::vector<DeviceBuffer> k_caches, v_caches;

  int64_t generation = 0;  // bumped whenever a per-step buffer moves
  GrowingBuffer residual{&generation}, next_residual{&generation}, hidden{&generation},
      qkv{&generation}, q_rot{&generation}, q_fp8{&generation}, attn{&generation},
      proj{&generation}, gate_up{&generation}, act{&generation}, row_hidden{&generation},
      logits{&generation}, attention_workspace{&generation}, fp8_x{&generation},
      fp8_x_scales{&generation};
  // A step's host inputs (token ids, metadata arrays, logit rows) packed into one pinned buffer
  // and copied to `inputs` in one transfer; StepInputsLayout places them.
  GrowingBuffer inputs{&generation};
  PinnedBuffer staged_inputs;
  StepEvents step_events;  // a forward's span on the stream (StepLogits::device_ms)
  StepProfiler profiler;   // QUENCH_PROFILE_STEPS=1: eager steps timed op by op
  // The picks of each step's logit rows (argmax, draws, logprobs, kLogits rows to the host):
  // run after a graph's replay, never inside one, so their buffers' growth concerns no graph.
  DeviceRowPicks picks;

  // Decode graphs: the captured sizes, one executable each, and the generation they hold.
  std::vector<int32_t> graph_sizes;
  std::map<int32_t, GraphExec> graphs;
  int64_t graphs_generation = -1;
  int32_t graph_captures = 0;  // successful captures of the whole ladder
  // Layers enqueued with the o projection's input written by attention (attention_fp8_rows).
  int64_t attention_fp8_row_layers = 0;

  ~State() {
    // Graphs, then cuBLAS (which holds the stream), then the stream.
    graphs.clear();
    cublas.reset();
    fp8_gemm.reset();
    if (stream != nullptr) cudaStreamDestroy(stream);
  }

  // Sizes every per-step buffer for a step of t rows, `rows` logit rows, num_seqs sequences (of
  // which num_prefill_seqs prefill) and a block-table stride of max_pages, and returns their
  // addresses with the metadata's host values. Buffers only grow.
  StepBuffers step_buffers(const AttentionMetadata& host, int32_t num_logit_rows) {
    const ModelConfig& c = config;
    const auto T = static_cast<size_t>(host.num_tokens);
    const auto R = static_cast<size_t>(num_logit_rows);
    const auto d = static_cast<size_t>(c.hidden_size);
    const auto qd = static_cast<size_t>(c.num_q_heads()) * static_cast<size_t>(c.head_dim());
    const auto kvd = static_cast<size_t>(c.num_kv_heads()) * static_cast<size_t>(c.head_dim());
    const auto ff = static_cast<size_t>(c.intermediate_size);
    StepBuffers b;
    b.t = host.num_tokens;
    b.rows = num_logit_rows;
    b.pass_rows = std::min(num_logit_rows, logit_rows_per_pass);
    b.layout = StepInputsLayout(host, num_logit_rows);
    auto* base = inputs.get<uint8_t>(b.layout.bytes);
    b.ids = reinterpret_cast<int32_t*>(base + b.layout.ids);
    b.positions = reinterpret_cast<int32_t*>(base + b.layout.positions);
    b.slots = reinterpret_cast<int64_t*>(base + b.layout.slots);
    b.gather = reinterpret_cast<int32_t*>(base + b.layout.gather);
    b.view = host_metadata_view(host);
    b.view.q_offsets = reinterpret_cast<int32_t*>(base + b.layout.q_offsets);
    b.view.prefill_q_offsets = reinterpret_cast<int32_t*>(base + b.layout.prefill_q_offsets);
    b.view.seq_lens = reinterpret_cast<int32_t*>(base + b.layout.seq_lens);
    b.view.block_table = reinterpret_cast<int32_t*>(base + b.layout.block_table);
    b.x = residual.get<uint16_t>(T * d);
    b.x_next = next_residual.get<uint16_t>(T * d);
    b.h = hidden.get<uint16_t>(T * d);
    // FP8 GEMMs over block weights compute rows in multiples of 8 (linear_fp8_weight.h): the
    // linear layers' outputs have room for them.
    const size_t T_out = fp8_gemm ? (T + 7) / 8 * 8 : T;
    b.linear_out_rows = static_cast<int32_t>(T_out);
    b.qkv = qkv.get<uint16_t>(T_out * (qd + 2 * kvd));
    b.q_rot = q_rot.get<uint16_t>(T * qd);
    b.q_fp8 = q_fp8.get<uint8_t>(T * qd);
    b.attn = attn.get<uint16_t>(T * qd);
    b.proj = proj.get<uint16_t>(T_out * d);  // o, then down: the delta of the next residual add
    b.gate_up = gate_up.get<uint16_t>(T_out * 2 * ff);
    b.act = act.get<uint16_t>(T * ff);
    if (fp8_gemm) {  // the activations' e4m3 copy for the FP8 GEMMs and its scales (per token,
                     // or per 128 columns)
      b.fp8_scratch.xq_bytes = static_cast<int64_t>(T_out) * max_linear_in;
      b.fp8_scratch.scale_count = static_cast<int64_t>(T_out) * max_linear_in / 128 + T_out;
      b.fp8_scratch.xq = fp8_x.get<uint8_t>(static_cast<size_t>(b.fp8_scratch.xq_bytes));
      b.fp8_scratch.scales =
          fp8_x_scales.get<float>(static_cast<size_t>(b.fp8_scratch.scale_count));
    }
    b.picked = row_hidden.get<uint16_t>(std::max<size_t>(R, 1) * d);
    b.logits = logits.get<float>(std::max<size_t>(static_cast<size_t>(b.pass_rows), 1) *
                                 static_cast<size_t>(c.vocab_size));
    return b;
  }

  // Copies a step's token ids, metadata arrays and logit rows to the addresses of `b`.
  void upload_step(const StepBuffers& b, std::span<const int32_t> token_ids,
                   const AttentionMetadata& m, std::span<const int32_t> logit_rows) {
    // The pinned buffer is free to rewrite: the step before ended with a stream synchronize.
    uint8_t* host = staged_inputs.get(b.layout.bytes);
    auto put = [&](size_t offset, const auto& values) {
      QUENCH_REQUIRE(values.size() * sizeof(values[0]) <= b.layout.capacity(offset),
                     "step inputs overflow their slot");
      if (!values.empty())
        std::memcpy(host + offset, values.data(), values.size() * sizeof(values[0]));
    };
    put(b.layout.ids, token_ids);
    put(b.layout.positions, m.positions);
    put(b.layout.slots, m.slot_mapping);
    put(b.layout.q_offsets, m.q_offsets);
    put(b.layout.prefill_q_offsets, m.prefill_q_offsets);
    put(b.layout.seq_lens, m.seq_lens);
    put(b.layout.block_table, m.block_table);
    put(b.layout.gather, logit_rows);
    check_cuda(cudaMemcpyAsync(b.ids, host, b.layout.bytes,  // ids sit at offset 0
                               cudaMemcpyHostToDevice, stream),
               "cudaMemcpyAsync step inputs to device");
  }

  AttentionOpArgs attention_args(const StepBuffers& b, int32_t layer) const {
    AttentionOpArgs args;
    args.q = b.q_rot;
    args.q_fp8 = b.q_fp8;
    args.k_cache = k_caches[static_cast<size_t>(layer)].as<void>();
    args.v_cache = v_caches[static_cast<size_t>(layer)].as<void>();
    args.kv = kv;
    args.metadata = b.view;
    args.out = b.attn;
    return args;
  }

  // Grows the attention workspace to what the step needs (every layer's op is the same kernel
  // pair, so layer 0 speaks for all), zeroed once when allocated: decode keeps split-merge
  // counters there that every run returns to zero. Never called while a graph is captured.
  void ensure_attention_workspace(const StepBuffers& b) {
    const size_t workspace = attention.front().workspace_bytes(attention_args(b, 0));
    if (attention_workspace.buffer().bytes() < workspace) {
      void* w = attention_workspace.get<uint8_t>(workspace);
      check_cuda(cudaMemsetAsync(w, 0, workspace, stream), "cudaMemsetAsync(attention workspace)");
    }
  }

  // Grows the attention workspace, once at start, to the most any decode step of the engine's
  // can need: 1 to max_num_seqs sequences of 1 to kMaxDecodeQueryTokens rows (drafts) within
  // max_num_batched_tokens, each max_model_len long (the split count grows with the length).
  // Otherwise an eager step (drafts, prefill beside decode rows) that takes more split partials
  // than the graphs' steps would move the workspace and force every graph to be captured again.
  // Prefill kernels take no workspace of this size; the largest step covers them. A host-only
  // loop: each shape costs the decode kernel's split plan, no launch.
  void presize_attention_workspace() {
    size_t most = 0;
    for (int32_t q_len = 1; q_len <= std::min(kMaxDecodeQueryTokens, options.max_model_len);
         ++q_len) {
      for (int32_t batch = 1; batch <= options.max_num_seqs; ++batch) {
        if (int64_t{batch} * q_len > options.max_num_batched_tokens) break;
        const AttentionMetadata m = decode_graph_capture_metadata(
            batch, kv.page_size, options.max_model_len, max_pages, q_len);
        most = std::max(
            most, attention.front().workspace_bytes(attention_args(step_buffers(m, batch), 0)));
      }
    }
    if (attention_workspace.buffer().bytes() < most) {
      void* w = attention_workspace.get<uint8_t>(most);
      check_cuda(cudaMemsetAsync(w, 0, most, stream), "cudaMemsetAsync(attention workspace)");
    }
  }

  // Enqueues the step on the stream, from the embedding to the logits: nothing here allocates,
  // copies from the host or synchronizes, so a graph can capture it.
  void enqueue_forward(const StepBuffers& b, int32_t num_decode_tokens) {
    const ModelConfig& c = config;
    const int32_t t = b.t;
    const int32_t d = c.hidden_size, hq = c.num_q_heads(), hkv = c.num_kv_heads(),
                  hd = c.head_dim();
    const int32_t qd = hq * hd, kvd = hkv * hd, qkv_width = qd + 2 * kvd, ff = c.intermediate_size;
    // Profiled eager steps (mark() does nothing otherwise, and never during a capture: the
    // profiler is only started for eager steps).
    const auto mark = [&](const char* op) { profiler.mark(stream, op); };
    embedding_lookup_cuda(t, d, b.ids, embed.as<uint16_t>(), b.x, stream);
    mark("embedding");
    const QueryOutputSplit split =
        query_output_split(attention.front().selection(), num_decode_tokens, t);
    const bool fp8_cache = is_fp8(kv.dtype);
    // One-token steps fold the norms into the next linear layer and SwiGLU into gate_up
    // (linear_skinny_fused.h): the residual then moves between x and x_next at each norm.
    const bool fused = linear_norm_fusion_applies(t, d);
    uint16_t* x = b.x;
    uint16_t* x_spare = b.x_next;
    const auto fused_norm = [&](const uint16_t* delta, const DeviceBuffer& norm_weight) {
      SkinnyResidualNorm n;
      n.residual = x;
      n.delta = delta;
      n.weight = norm_weight.as<uint16_t>();
      n.eps = c.rms_norm_eps;
      if (delta != nullptr) {
        n.residual_out = x_spare;
        std::swap(x, x_spare);
      }
      return n;
    };
    for (int32_t layer = 0; layer < c.num_layers; ++layer) {
      const LayerBuffers& l = layers[static_cast<size_t>(layer)];
      const AttentionOp& op = attention[static_cast<size_t>(layer)];
      // The MLP output of the layer before joins the residual here.
      const uint16_t* mlp_delta = layer == 0 ? nullptr : b.proj;
      if (fused) {
        linear_skinny_norm_cuda(t, d, qkv_width, fused_norm(mlp_delta, l.input_norm), l.qkv.weight,
                                /*swiglu=*/false, b.qkv, stream);
        mark("rms_norm (input) + linear qkv");
      } else {
        const Fp8RowsOut qkv_input = fused_fp8_input(b, t, d, qkv_width, l.qkv);
        rms_norm_cuda({t, d, x, mlp_delta, l.input_norm.as<uint16_t>(), c.rms_norm_eps,
                       qkv_input.requested() ? nullptr : b.h},
                      qkv_input, stream);
        mark("rms_norm (input)");
        enqueue_linear(b, t, d, qkv_width, b.h, l.qkv, b.qkv, qkv_input);
        mark("linear qkv");
      }
      if (c.qkv_bias) {  // Qwen2
        bias_add_cuda(t, qkv_width, l.qkv_bias.as<uint16_t>(), b.qkv, stream);
        mark("bias_add qkv");
      }

      AttentionOpArgs args = attention_args(b, layer);
      RopeQuantAppendParams p;
      p.num_tokens = t;
      p.num_q_heads = hq;
      p.num_kv_heads = hkv;
      p.head_dim = hd;
      p.q = b.qkv;
      p.k = b.qkv + qd;
      p.v = b.qkv + qd + kvd;
      p.q_row_stride = p.k_row_stride = p.v_row_stride = qkv_width;
      p.positions = b.positions;
      p.rope = c.rope;
      p.cos_sin_cache = cos_sin.as<float>();
      p.cos_sin_cache_positions = options.max_model_len;
      if (c.qk_norm) {
        p.q_norm_weight = l.q_norm.as<uint16_t>();
        p.k_norm_weight = l.k_norm.as<uint16_t>();
        p.norm_eps = c.rms_norm_eps;
      }
      p.q_bf16_rows = split.bf16_rows;
      p.q_out_bf16 = b.q_rot;
      p.q_out_fp8 = b.q_fp8;
      p.q_fp8_dtype = split.fp8_dtype;
      p.q_scale = op.scales().q_scale();
      p.k_cache = const_cast<void*>(args.k_cache);
      p.v_cache = const_cast<void*>(args.v_cache);
      p.kv = kv;
      if (fp8_cache) {  // a bf16 cache stores values unscaled
        p.k_scale = append_k_scales[static_cast<size_t>(layer)];
        p.v_scale = append_v_scales[static_cast<size_t>(layer)];
      }
      p.slot_mapping = b.slots;
      rope_quant_append_cuda(p, stream);
      mark("rope_quant_append");

      args.q_fp8_ready = split.fp8_rows_ready;
      args.workspace = attention_workspace.buffer().as<void>();
      args.workspace_bytes = attention_workspace.buffer().bytes();
      const Fp8RowsOut o_input = attention_fp8_rows(b, t, l.o, op);
      if (o_input.requested()) {
        args.out_fp8 = o_input;
        args.out = nullptr;  // only the o projection reads it
        ++attention_fp8_row_layers;
      }
      op.run(args, stream);
      mark("attention");

      enqueue_linear(b, t, qd, d, b.attn, l.o, b.proj, o_input);
      mark("linear o");
      if (fused) {
        linear_skinny_norm_cuda(t, d, ff, fused_norm(b.proj, l.post_norm), l.gate_up.weight,
                                /*swiglu=*/true, b.act, stream);
        mark("rms_norm (post) + linear gate_up + swiglu");
      } else {
        const Fp8RowsOut gate_up_input = fused_fp8_input(b, t, d, 2 * ff, l.gate_up);
        rms_norm_cuda({t, d, x, b.proj, l.post_norm.as<uint16_t>(), c.rms_norm_eps,
                       gate_up_input.requested() ? nullptr : b.h},
                      gate_up_input, stream);
        mark("rms_norm (post)");
        enqueue_linear(b, t, d, 2 * ff, b.h, l.gate_up, b.gate_up, gate_up_input);
        mark("linear gate_up");
      }
      // The fused one-token path wrote b.act itself; else swiglu writes it (as e4m3 rows only,
      // where the down projection's FP8 GEMM takes them).
      const Fp8RowsOut down_input = fused ? Fp8RowsOut{} : fused_fp8_input(b, t, ff, d, l.down);
      if (!fused) {
        swiglu_cuda(t, ff, b.gate_up, down_input.requested() ? nullptr : b.act, down_input, stream);
        mark("swiglu");
      }
      enqueue_linear(b, t, ff, d, b.act, l.down, b.proj, down_input);
      mark("linear down");
    }
    // The last MLP output joins the residual; the final norm of every row (the rows asked for are
    // then gathered: the norm is per row, so the result is the same).
    rms_norm_cuda({t, d, x, b.proj, final_norm.as<uint16_t>(), c.rms_norm_eps, b.h}, stream);
    mark("rms_norm (final)");
    embedding_lookup_cuda(b.rows, d, b.gather, b.h, b.picked, stream);
    mark("gather rows");
    enqueue_lm_head(b, 0);
    mark("lm_head");
  }

  // Where the kernel in front of layer w (rms_norm, swiglu, attention) writes w's input quantized
  // for its FP8 GEMM this step: nothing (not requested) where w is bf16, streams its FP8 weight at
  // t tokens, or QUENCH_FP8_ACTIVATIONS=separate. Its x is b.h or b.act (aligned alike).
  Fp8RowsOut fused_fp8_input(const StepBuffers& b, int32_t t, int32_t in, int32_t out,
                             const DeviceLinear& w) const {
    if (!w.weight.fp8() || !fp8_activations_fused() ||
        !linear_fp8_takes_gemm(t, in, out, b.h, w.weight)) {
      return {};
    }
    return fp8_gemm_input(t, in, out, w.weight, b.fp8_scratch);
  }

  // Where the attention op writes the o projection's input quantized (AttentionOpArgs::out_fp8)
  // instead of leaving it to the GEMM's own pass: a step of decode rows only, whose o GEMM takes
  // one scale per 128 columns (a q head at head_dim 128) and no padding rows, with a decode
  // kernel that writes them; else nothing. Saves a launch and a read of the bf16 rows per layer.
  Fp8RowsOut attention_fp8_rows(const StepBuffers& b, int32_t t, const DeviceLinear& o,
                                const AttentionOp& op) const {
    if (b.view.num_prefill_seqs > 0 || b.view.num_decode_tokens != t || !op.writes_fp8_rows()) {
      return {};
    }
    const int32_t qd = config.num_q_heads() * config.head_dim();
    const Fp8RowsOut rows = fused_fp8_input(b, t, qd, config.hidden_size, o);
    if (!rows.requested() || rows.group != kFp8GemmScaleGroup || rows.padded_rows(t) != t) {
      return {};
    }
    return rows;
  }

  // One linear layer of the decoder, bf16 activations in and out: cuBLAS (or the streaming kernel)
  // over a bf16 weight, the FP8 kernels over an FP8 one (linear_fp8_weight.h); from
  // `quantized` where the kernel before wrote x there (fused_fp8_input; x unused then).
  void enqueue_linear(const StepBuffers& b, int32_t t, int32_t in, int32_t out, const uint16_t* x,
                      const DeviceLinear& w, uint16_t* y, const Fp8RowsOut& quantized = {}) {
    if (quantized.requested()) {
      linear_fp8_gemm_quantized_cuda(*fp8_gemm, t, in, out, w.weight, b.fp8_scratch, y,
                                     b.linear_out_rows, DType::kBF16, stream);
    } else if (w.weight.fp8()) {
      linear_fp8_weight_cuda(*fp8_gemm, t, in, out, x, w.weight, b.fp8_scratch, y,
                             b.linear_out_rows, DType::kBF16, stream);
    } else {
      linear_cuda(*cublas, t, in, out, x, static_cast<const uint16_t*>(w.weight.data), y,
                  DType::kBF16, stream);
    }
  }

  // The lm_head over the pass of logit rows that starts at `first` (b.pass_rows of them, fewer
  // in the last pass), into the logits buffer's first rows.
  void enqueue_lm_head(const StepBuffers& b, int32_t first) {
    const int32_t d = config.hidden_size;
    linear_cuda(*cublas, std::min(b.pass_rows, b.rows - first), d, config.vocab_size,
                b.picked + static_cast<size_t>(first) * static_cast<size_t>(d), lm_head, b.logits,
                DType::kF32, stream);
  }

  // Captures one graph per size of the ladder. Each size first runs once eagerly on a step that
  // touches nothing (seq_len 0, slot -1): kernels do their one-time set-up outside the capture,
  // and the buffers and workspace reach their final addresses. Throws when a capture fails.
  void capture_decode_graphs() {
    graphs.clear();
    // The largest step first, so that smaller ones move no per-row buffer (the attention
    // workspace may still grow: smaller batches take more KV splits). Each warm-up step ends
    // with a synchronize: the next one rewrites the pinned staging buffer its inputs came from.
    for (auto it = graph_sizes.rbegin(); it != graph_sizes.rend(); ++it) {
      const AttentionMetadata m =
          decode_graph_capture_metadata(*it, kv.page_size, options.max_model_len, max_pages);
      const StepBuffers b = step_buffers(m, *it);
      ensure_attention_workspace(b);
      upload_step(b, std::vector<int32_t>(static_cast<size_t>(*it), 0), m, iota_rows(*it));
      enqueue_forward(b, *it);
      check_cuda(cudaStreamSynchronize(stream), "a decode graph's warm-up step");
    }
    const int64_t warm_generation = generation;
    for (int32_t batch : graph_sizes) {
      const AttentionMetadata m =
          decode_graph_capture_metadata(batch, kv.page_size, options.max_model_len, max_pages);
      const StepBuffers b = step_buffers(m, batch);
      cudaGraph_t graph = nullptr;
      check_cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
                 "cudaStreamBeginCapture");
      std::string failure;
      try {
        enqueue_forward(b, batch);
      } catch (const std::exception& e) {  // the capture must end whatever was thrown
        failure = e.what();
      }
      const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
      if (failure.empty() && ended != cudaSuccess) failure = cudaGetErrorString(ended);
      cudaGetLastError();  // an invalidated capture leaves its error for the next call
      if (!failure.empty()) {
        if (graph != nullptr) cudaGraphDestroy(graph);
        graphs.clear();
        throw Error(str_cat("capturing the decode graph of batch ", batch, " failed: ", failure));
      }
      cudaGraphExec_t exec = nullptr;
      const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
      cudaGraphDestroy(graph);
      check_cuda(made, "cudaGraphInstantiate");
      graphs.emplace(batch, GraphExec(exec));
    }
    QUENCH_REQUIRE(generation == warm_generation,
                   "a buffer moved while the decode graphs were captured");
    graphs_generation = generation;
    ++graph_captures;
  }

  // capture_decode_graphs(), and where it fails, decode without graphs from then on (with a
  // warning naming `when` and the reason) rather than failing steps. False when it failed.
  bool capture_or_go_eager(const char* when) {
    try {
      capture_decode_graphs();
      return true;
    } catch (const std::exception& e) {
      log_warning(str_cat("CUDA graphs are off (capture ", when,
                          " failed), decode steps run eagerly: ", e.what()));
      graphs.clear();
      graph_sizes.clear();
      return false;
    }
  }
};

DeviceDecoderModel::DeviceDecoderModel(const ModelConfig& config, const ModelWeights& weights,
                                       const DecoderModelOptions& options)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  const CudaDeviceProperties props = require_current_cuda_device_properties("the GPU model runner");
  s.config = config;
  s.options = options;
  ModelAttentionPlan plan =
      model_attention_plan(config, weights, options,
                           props.compute_capability_major * 10 + props.compute_capability_minor);
  QUENCH_REQUIRE(plan.selection.decode().kernel->memory_space() == MemorySpace::kDevice,
                 "the attention backend chose host kernels for the GPU runner");
  // Per-KV-head checkpoint scales live on the device for the kernels (the append divides by them,
  // attention multiplies); per-tensor ones travel as values.
  for (const AttentionScales& scales : plan.scales) {
    auto device_view = [&](const std::vector<float>& values, HeadScales host) {
      if (values.size() == 1) return host;
      s.head_scales.push_back(upload(values));
      return HeadScales{1.0f, s.head_scales.back().as<float>()};
    };
    const HeadScales k = device_view(scales.k_values(), scales.k_scale());
    const HeadScales v = device_view(scales.v_values(), scales.v_scale());
    AttentionLayerSettings settings = plan.settings;
    settings.device_k_scale_per_head = k.per_head;
    settings.device_v_scale_per_head = v.per_head;
    s.append_k_scales.push_back(k);
    s.append_v_scales.push_back(v);
    s.attention.emplace_back(plan.selection, scales, settings);
  }
  QUENCH_REQUIRE(options.max_model_len >= 1 && options.num_pages >= 2, "GPU runner: max_model_len ",
                 options.max_model_len, " and num_pages ", options.num_pages,
                 " must be >= 1 and >= 2");
  s.kv.num_pages = options.num_pages;
  s.logit_rows_per_pass = logit_rows_per_pass(options.max_num_seqs);
  s.kv.page_size = options.page_size;
  s.kv.num_kv_heads = config.num_kv_heads();
  s.kv.head_dim = config.head_dim();
  s.kv.dtype = options.kv_dtype;
  s.kv.layout = options.layout;
  s.kv.validate();
  check_cuda(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), "cudaStreamCreate");
  s.cublas = std::make_unique<CublasHandle>();
  if (weights.has_fp8_linears()) {
    QUENCH_REQUIRE(keeps_fp8_weights(config, props.compute_capability_major * 10 +
                                                 props.compute_capability_minor),
                   "the GPU runner cannot compute with this "
                   "checkpoint's FP8 weights as FP8 (",
                   config.quantization.block_out, " x ", config.quantization.block_in,
                   " blocks over hidden ", config.hidden_size, ", intermediate ",
                   config.intermediate_size,
                   "); load them dequantized (ModelWeights::load without keep_fp8)");
    s.fp8_gemm = std::make_unique<Fp8Gemm>();
    s.max_linear_in = std::max(
        {config.hidden_size, config.num_q_heads() * config.head_dim(), config.intermediate_size});
  }

  s.embed = upload_weight(weights.embed_tokens);
  s.final_norm = upload_weight(weights.final_norm);
  if (weights.lm_head.data() == weights.embed_tokens.data()) {
    s.lm_head = s.embed.as<uint16_t>();  // tied
  } else {
    s.lm_head_own = upload_weight(weights.lm_head);
    s.lm_head = s.lm_head_own.as<uint16_t>();
  }
  const bool channel_groups =
      props.compute_capability_major == 9 && props.compute_capability_minor == 0;
  for (const DecoderLayerWeights& w : weights.layers) {
    LayerBuffers l;
    l.input_norm = upload_weight(w.input_norm);
    l.qkv = upload_linear({&w.q_proj, &w.k_proj, &w.v_proj},
                          {&w.fp8.q_proj, &w.fp8.k_proj, &w.fp8.v_proj}, channel_groups);
    if (config.qkv_bias) l.qkv_bias = upload_rows({&w.q_bias, &w.k_bias, &w.v_bias});
    if (config.qk_norm) {
      l.q_norm = upload_weight(w.q_norm);
      l.k_norm = upload_weight(w.k_norm);
    }
    l.o = upload_linear({&w.o_proj}, {&w.fp8.o_proj}, channel_groups);
    l.post_norm = upload_weight(w.post_attention_norm);
    l.gate_up = upload_linear({&w.gate_proj, &w.up_proj}, {&w.fp8.gate_proj, &w.fp8.up_proj},
                              channel_groups);
    l.down = upload_linear({&w.down_proj}, {&w.fp8.down_proj}, channel_groups);
    s.layers.push_back(std::move(l));
  }
  s.cos_sin = upload(build_rope_cos_sin_cache(config.rope, options.max_model_len));
  for (int32_t i = 0; i < config.num_layers; ++i) {
    s.k_caches.emplace_back(static_cast<size_t>(s.kv.tensor_bytes()));
    s.v_caches.emplace_back(static_cast<size_t>(s.kv.tensor_bytes()));
    check_cuda(cudaMemset(s.k_caches.back().as<void>(), 0, s.k_caches.back().bytes()),
               "cudaMemset(K cache)");
    check_cuda(cudaMemset(s.v_caches.back().as<void>(), 0, s.v_caches.back().bytes()),
               "cudaMemset(V cache)");
  }
  s.max_pages = static_cast<int32_t>(pages_for_tokens(options.max_model_len, options.page_size));
  if (options.max_num_batched_tokens > 0 && options.max_num_seqs > 0) {
    // Every buffer at the engine's largest step now, so steps do not move them (and graphs stay
    // valid): max_num_batched_tokens rows, each a logit row at most (prompt logprobs), whose
    // logits take one pass of the buffer at a time.
    AttentionMetadata largest;
    largest.num_tokens = std::max(options.max_num_batched_tokens, options.max_num_seqs);
    largest.num_seqs = largest.num_prefill_seqs = options.max_num_seqs;
    largest.max_pages = s.max_pages;
    s.step_buffers(largest, largest.num_tokens);
    s.presize_attention_workspace();
  }
  if (options.max_num_seqs > 0 && !options.enforce_eager) {
    s.graph_sizes = decode_graph_batch_sizes(options.max_num_seqs);
    const auto start = std::chrono::steady_clock::now();
    if (s.capture_or_go_eager("at start")) {
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
      log_info(str_cat("CUDA graphs: captured ", s.graph_sizes.size(), " decode batch sizes (1 to ",
                       s.graph_sizes.back(), " sequences) in ", static_cast<int64_t>(ms), " ms"));
    }
  }
}

DeviceDecoderModel::~DeviceDecoderModel() = default;

int64_t DeviceDecoderModel::kv_cache_bytes() const {
  return 2 * static_cast<int64_t>(state_->config.num_layers) * state_->kv.tensor_bytes();
}

bool DeviceDecoderModel::keeps_fp8_weights(const ModelConfig& c, int32_t sm) {
  const WeightQuantization& q = c.quantization;
  if (!q.fp8 || sm < 90) return false;
  if (q.block_out == 0) return true;  // per tensor or per channel
  // Blocks: 128 x 128 (the FP8 GEMM's), every linear layer's input a multiple of the GEMM's
  // (linear_fp8_cublaslt.h), and every fused projection whole blocks of rows.
  const int64_t qd = int64_t{c.num_q_heads()} * c.head_dim();
  const int64_t kvd = int64_t{c.num_kv_heads()} * c.head_dim();
  const auto whole = [](int64_t n, int64_t m) { return n % m == 0; };
  return q.block_out == 128 && q.block_in == 128 && whole(c.hidden_size, kBlockGemmInputMultiple) &&
         whole(qd, kBlockGemmInputMultiple) &&
         whole(c.intermediate_size, kBlockGemmInputMultiple) && whole(qd, 128) && whole(kvd, 128);
}

int64_t DeviceDecoderModel::weight_bytes(const ModelWeights& weights) {
  size_t elements = weights.embed_tokens.size() + weights.final_norm.size();
  if (weights.lm_head.data() != weights.embed_tokens.data()) elements += weights.lm_head.size();
  // FP8 linear weights: a byte each and their 4-byte scales; per-channel ones also their scales
  // per 128 columns (upload_linear uploads them where the input is a multiple of 512: counted for
  // every per-channel weight, a bound).
  size_t fp8_bytes = 0;
  for (const DecoderLayerWeights& w : weights.layers) {
    for (const Bf16Weight* part : {&w.input_norm, &w.q_proj, &w.k_proj, &w.v_proj, &w.o_proj,
                                   &w.q_norm, &w.k_norm, &w.q_bias, &w.k_bias, &w.v_bias,
                                   &w.post_attention_norm, &w.gate_proj, &w.up_proj, &w.down_proj})
      elements += part->size();
    for (const Fp8Weight* part : {&w.fp8.q_proj, &w.fp8.k_proj, &w.fp8.v_proj, &w.fp8.o_proj,
                                  &w.fp8.gate_proj, &w.fp8.up_proj, &w.fp8.down_proj}) {
      fp8_bytes += part->bytes().size() + 4 * part->scales().size();
      if (!part->empty() && !part->blocks())
        fp8_bytes += part->bytes().size() / kFp8GemmScaleGroup * 4;
    }
  }
  return static_cast<int64_t>(elements * sizeof(uint16_t) + fp8_bytes);
}

int32_t DeviceDecoderModel::logit_rows_per_pass(int32_t max_num_seqs) {
  // 512 rows: the lm_head GEMM of a pass is then large enough to run near cuBLAS's peak (for a
  // 2048-wide model, 512 x 2048 x vocab), and its fp32 logits stay at 256 MiB for a 128k vocab.
  constexpr int32_t kRowsPerPass = 512;
  return std::max(max_num_seqs, kRowsPerPass);
}

int64_t DeviceDecoderModel::step_bytes(const ModelConfig& c, int32_t max_tokens,
                                       int32_t max_num_seqs) {
  // Mirrors forward()'s GrowingBuffers, per token row: ids, positions, slots and offsets (at most
  // 32 bytes); residual, hidden and proj (3 x d bf16); qkv; q after RoPE as bf16 and FP8; the
  // attention output; gate/up and the SwiGLU output.
  const int64_t d = c.hidden_size, qd = int64_t{c.num_q_heads()} * c.head_dim(),
                kvd = int64_t{c.num_kv_heads()} * c.head_dim(), ff = c.intermediate_size;
  int64_t per_token = 32 + 2 * (3 * d + (qd + 2 * kvd) + qd + qd + 2 * ff + ff) + qd;
  // FP8 checkpoints: the activations' e4m3 copy for the FP8 GEMMs and its scales (one per token,
  // or one per 128 columns); the block GEMMs' 8 rows of output padding fit in kReserve.
  if (c.quantization.fp8) {
    const int64_t max_in = std::max({d, qd, ff});
    per_token += max_in + max_in / 32 + 4;
  }
  // Every row may be a logit row (prompt logprobs): its index and gathered hidden state; the
  // logits buffer holds one lm_head pass.
  const int64_t per_logit_row = 4 + 2 * d;
  const int64_t logits_bytes =
      4 * int64_t{c.vocab_size} * std::min(max_tokens, logit_rows_per_pass(max_num_seqs));
  // The attention workspace (decode's split-KV partials: bounded by the CTAs of one wave),
  // cuBLAS's workspace, the rope cos/sin cache's neighbours and allocator rounding.
  constexpr int64_t kReserve = int64_t{512} << 20;
  return (per_token + per_logit_row) * max_tokens + logits_bytes + kReserve;
}

const AttentionBackendSelection& DeviceDecoderModel::attention_selection() const {
  return state_->attention.front().selection();
}

std::vector<float> DeviceDecoderModel::forward(std::span<const int32_t> token_ids,
                                               const AttentionMetadata& m,
                                               std::span<const int32_t> logit_rows) {
  const std::vector<RowPick> full(logit_rows.size());
  return forward_for_sampling(token_ids, m, logit_rows, full).logits;
}

StepLogits DeviceDecoderModel::forward_for_sampling(std::span<const int32_t> token_ids,
                                                    const AttentionMetadata& m,
                                                    std::span<const int32_t> logit_rows,
                                                    std::span<const RowPick> picks,
                                                    const std::function<void()>& fill_edits) {
  State& s = *state_;
  const ModelConfig& c = s.config;
  check_forward_inputs(c.vocab_size, s.options.max_model_len, s.kv.page_size, token_ids, m,
                       logit_rows);
  check_row_picks(picks, logit_rows.size(), c.vocab_size);
  const auto rows = static_cast<int32_t>(logit_rows.size());
  if (m.num_tokens == 0 || rows == 0) {
    QUENCH_REQUIRE(rows == 0, "forward: logit rows without query rows");
    if (m.num_tokens == 0) return {};
  }
  // Row i's logits on the device: the logits buffer's row device_rows[i] - first, where first is
  // the first row of i's lm_head pass (the graph's rows are one pass, from 0).
  std::vector<int32_t> device_rows;
  StepBuffers b;
  int32_t batch = s.graph_sizes.empty() || rows == 0
                      ? 0
                      : decode_graph_batch_for(m, s.graph_sizes, s.max_pages);
  if (batch > 0 && s.graphs_generation != s.generation) {
    // A larger eager step moved a buffer since the capture: capture again at the new addresses.
    log_info("CUDA graphs: per-step buffers grew; capturing the decode graphs again");
    if (!s.capture_or_go_eager("after buffers grew")) batch = 0;
  }
  s.step_events.start(s.stream);
  if (batch > 0) {
    // The graph reads the padded step at the addresses it was captured with and computes the
    // logits of all its rows; the rows asked for are picked out of those.
    const AttentionMetadata padded = decode_graph_step_metadata(m, batch, s.max_pages);
    std::vector<int32_t> ids(token_ids.begin(), token_ids.end());
    ids.resize(static_cast<size_t>(batch), 0);
    b = s.step_buffers(padded, batch);
    QUENCH_REQUIRE(s.generation == s.graphs_generation, "decode graph buffers moved");
    QUENCH_REQUIRE(b.pass_rows == batch, "a decode graph's ", batch,
                   " rows exceed one lm_head pass of ", b.pass_rows);
    s.upload_step(b, ids, padded, iota_rows(batch));
    check_cuda(cudaGraphLaunch(s.graphs.at(batch).get(), s.stream), "cudaGraphLaunch");
    device_rows.assign(logit_rows.begin(), logit_rows.end());
  } else {
    b = s.step_buffers(m, rows);
    s.ensure_attention_workspace(b);
    s.upload_step(b, token_ids, m, logit_rows);
    // Only decode-only steps are profiled (what TPOT is made of).
    if (m.num_prefill_seqs == 0) s.profiler.begin(s.stream);
    s.enqueue_forward(b, m.num_decode_tokens);
    device_rows = iota_rows(rows);  // gathered in order
  }
  // The host's part of the picks while the device runs the forward just enqueued.
  try {
    if (fill_edits) fill_edits();
    check_row_edits(picks, c.vocab_size);
  } catch (...) {
    // The step stops here: its forward finishes on the stream before the next step's work.
    cudaStreamSynchronize(s.stream);
    s.profiler.end();
    throw;
  }

  // The picks, pass by pass: the first pass's lm_head ran with the forward; each later one runs
  // after the picks of the pass before it (one stream), into the same buffer.
  s.picks.begin_step(picks, device_rows, b.pass_rows, c.vocab_size);
  for (int32_t pass = 0; pass < s.picks.passes(); ++pass) {
    if (pass > 0) s.enqueue_lm_head(b, pass * b.pass_rows);
    s.picks.enqueue_pass(pass, b.logits, s.stream);
  }
  s.step_events.stop(s.stream);
  check_cuda(cudaStreamSynchronize(s.stream), "the model step");
  StepLogits out = s.picks.finish();
  out.device_ms = s.step_events.elapsed_ms();
  s.profiler.end();
  return out;
}

int32_t DeviceDecoderModel::vocab_size() const {
  return state_->config.vocab_size;
}

bool DeviceDecoderModel::cuda_graphs_captured() const {
  return !state_->graphs.empty();
}

int32_t DeviceDecoderModel::cuda_graph_captures() const {
  return state_->graph_captures;
}

int64_t DeviceDecoderModel::attention_fp8_row_layers() const {
  return state_->attention_fp8_row_layers;
}

}  // namespace quench
