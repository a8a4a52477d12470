#include "quench/model/device_decoder_model.h"

#include <cmath>

#include "quench/attention/query_output_split.h"
#include "quench/core/cuda_device.h"
#include "quench/core/device_buffer.h"
#include "quench/ops/embedding/embedding.h"
#include "quench/ops/linear/linear_cublas.h"
#include "quench/ops/rms_norm/rms_norm.h"
#include "quench/ops/rope/rope_reference.h"
#include "quench/ops/rope_quant_append/rope_quant_append.h"
#include "quench/ops/swiglu/swiglu.h"

namespace quench {
namespace {

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

struct LayerBuffers {
  DeviceBuffer input_norm, qkv, q_norm, k_norm, o, post_norm, gate_up, down;
};

// A device buffer that grows to the largest request (contents are not kept across growth).
class GrowingBuffer {
 public:
  template <typename T>
  T* get(size_t count) {
    if (buffer_.bytes() < count * sizeof(T)) buffer_ = DeviceBuffer(count * sizeof(T));
    return buffer_.as<T>();
  }
  DeviceBuffer& buffer() { return buffer_; }

 private:
  DeviceBuffer buffer_;
};

}  // namespace

bool cuda_device_available() {
  return current_cuda_device_properties().has_value();
}

struct DeviceDecoderModel::State {
  ModelConfig config;
  DecoderModelOptions options;
  KvCacheLayout kv;
  std::vector<AttentionOp> attention;  // per layer (their scales differ)
  cudaStream_t stream = nullptr;
  std::unique_ptr<CublasHandle> cublas;  // created once a device is known to be there

  DeviceBuffer embed, final_norm, lm_head_own;
  const uint16_t* lm_head = nullptr;
  std::vector<LayerBuffers> layers;
  DeviceBuffer cos_sin;
  std::vector<DeviceBuffer> k_caches, v_caches;

  GrowingBuffer ids, residual, hidden, qkv, q_rot, q_fp8, attn, proj, gate_up, act, rows,
      row_hidden, logits;
  GrowingBuffer positions, slots, q_offsets, prefill_q_offsets, seq_lens, block_table,
      attention_workspace;

  ~State() {
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
};

DeviceDecoderModel::DeviceDecoderModel(const ModelConfig& config, const ModelWeights& weights,
                                       const DecoderModelOptions& options)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  const CudaDeviceProperties props = require_current_cuda_device_properties("the GPU model runner");
  s.config = config;
  s.options = options;
  s.attention =
      model_attention_ops(config, weights, options,
                          props.compute_capability_major * 10 + props.compute_capability_minor);
  QUENCH_REQUIRE(s.attention.front().memory_space() == MemorySpace::kDevice,
                 "the attention backend chose host kernels for the GPU runner");
  for (const AttentionOp& op : s.attention) {
    QUENCH_REQUIRE(
        op.scales().k_values().size() == 1 && op.scales().v_values().size() == 1,
        "the GPU runner takes per-tensor k/v scales; this checkpoint has per-head ones (not yet "
        "uploaded to the device)");
  }
  QUENCH_REQUIRE(options.max_model_len >= 1 && options.num_pages >= 2, "GPU runner: max_model_len ",
                 options.max_model_len, " and num_pages ", options.num_pages,
                 " must be >= 1 and >= 2");
  s.kv.num_pages = options.num_pages;
  s.kv.page_size = options.page_size;
  s.kv.num_kv_heads = config.num_kv_heads();
  s.kv.head_dim = config.head_dim();
  s.kv.dtype = options.kv_dtype;
  s.kv.layout = options.layout;
  s.kv.validate();
  check_cuda(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), "cudaStreamCreate");
  s.cublas = std::make_unique<CublasHandle>();

  s.embed = upload_weight(weights.embed_tokens);
  s.final_norm = upload_weight(weights.final_norm);
  if (weights.lm_head.data() == weights.embed_tokens.data()) {
    s.lm_head = s.embed.as<uint16_t>();  // tied
  } else {
    s.lm_head_own = upload_weight(weights.lm_head);
    s.lm_head = s.lm_head_own.as<uint16_t>();
  }
  for (const DecoderLayerWeights& w : weights.layers) {
    LayerBuffers l;
    l.input_norm = upload_weight(w.input_norm);
    l.qkv = upload_rows({&w.q_proj, &w.k_proj, &w.v_proj});
    if (config.qk_norm) {
      l.q_norm = upload_weight(w.q_norm);
      l.k_norm = upload_weight(w.k_norm);
    }
    l.o = upload_weight(w.o_proj);
    l.post_norm = upload_weight(w.post_attention_norm);
    l.gate_up = upload_rows({&w.gate_proj, &w.up_proj});
    l.down = upload_weight(w.down_proj);
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
}

DeviceDecoderModel::~DeviceDecoderModel() = default;

int64_t DeviceDecoderModel::kv_cache_bytes() const {
  return 2 * static_cast<int64_t>(state_->config.num_layers) * state_->kv.tensor_bytes();
}

int64_t DeviceDecoderModel::weight_bytes(const ModelWeights& weights) {
  size_t elements = weights.embed_tokens.size() + weights.final_norm.size();
  if (weights.lm_head.data() != weights.embed_tokens.data()) elements += weights.lm_head.size();
  for (const DecoderLayerWeights& w : weights.layers) {
    for (const Bf16Weight* part :
         {&w.input_norm, &w.q_proj, &w.k_proj, &w.v_proj, &w.o_proj, &w.q_norm, &w.k_norm,
          &w.post_attention_norm, &w.gate_proj, &w.up_proj, &w.down_proj})
      elements += part->size();
  }
  return static_cast<int64_t>(elements * sizeof(uint16_t));
}

int64_t DeviceDecoderModel::step_bytes(const ModelConfig& c, int32_t max_tokens,
                                       int32_t max_logit_rows) {
  // Mirrors forward()'s GrowingBuffers, per token row: ids, positions, slots and offsets (at most
  // 32 bytes); residual, hidden and proj (3 x d bf16); qkv; q after RoPE as bf16 and FP8; the
  // attention output; gate/up and the SwiGLU output.
  const int64_t d = c.hidden_size, qd = int64_t{c.num_q_heads()} * c.head_dim(),
                kvd = int64_t{c.num_kv_heads()} * c.head_dim(), ff = c.intermediate_size;
  const int64_t per_token = 32 + 2 * (3 * d + (qd + 2 * kvd) + qd + qd + 2 * ff + ff) + qd;
  const int64_t per_logit_row = 4 + 2 * d + 4 * int64_t{c.vocab_size};
  // The attention workspace (decode's split-KV partials: bounded by the CTAs of one wave),
  // cuBLAS's workspace, the rope cos/sin cache's neighbours and allocator rounding.
  constexpr int64_t kReserve = int64_t{512} << 20;
  return per_token * max_tokens + per_logit_row * max_logit_rows + kReserve;
}

const AttentionBackendSelection& DeviceDecoderModel::attention_selection() const {
  return state_->attention.front().selection();
}

std::vector<float> DeviceDecoderModel::forward(std::span<const int32_t> token_ids,
                                               const AttentionMetadata& m,
                                               std::span<const int32_t> logit_rows) {
  State& s = *state_;
  const ModelConfig& c = s.config;
  check_forward_inputs(c.vocab_size, s.options.max_model_len, s.kv.page_size, token_ids, m,
                       logit_rows);
  const int32_t t = m.num_tokens;
  const auto rows = static_cast<int32_t>(logit_rows.size());
  if (t == 0 || rows == 0) {
    QUENCH_REQUIRE(rows == 0, "forward: logit rows without query rows");
    if (t == 0) return {};
  }
  const int32_t d = c.hidden_size, hq = c.num_q_heads(), hkv = c.num_kv_heads(), hd = c.head_dim();
  const int32_t qd = hq * hd, kvd = hkv * hd, qkv_width = qd + 2 * kvd, ff = c.intermediate_size;
  const auto T = static_cast<size_t>(t);
  cudaStream_t stream = s.stream;

  auto copy_in = [&](GrowingBuffer& b, const auto& host) {
    using T_ = std::remove_cv_t<std::remove_reference_t<decltype(*host.data())>>;
    T_* dst = b.template get<T_>(std::max<size_t>(host.size(), 1));
    if (!host.empty()) {
      check_cuda(cudaMemcpyAsync(dst, host.data(), host.size() * sizeof(T_), cudaMemcpyHostToDevice,
                                 stream),
                 "cudaMemcpyAsync to device");
    }
    return dst;
  };
  const int32_t* ids = copy_in(s.ids, std::vector<int32_t>(token_ids.begin(), token_ids.end()));
  const int32_t* positions = copy_in(s.positions, m.positions);
  const int64_t* slots = copy_in(s.slots, m.slot_mapping);
  AttentionMetadataView view = host_metadata_view(m);
  view.q_offsets = copy_in(s.q_offsets, m.q_offsets);
  view.prefill_q_offsets = copy_in(s.prefill_q_offsets, m.prefill_q_offsets);
  view.seq_lens = copy_in(s.seq_lens, m.seq_lens);
  view.block_table = copy_in(s.block_table, m.block_table);
  const int32_t* gather =
      copy_in(s.rows, std::vector<int32_t>(logit_rows.begin(), logit_rows.end()));

  uint16_t* x = s.residual.get<uint16_t>(T * d);
  uint16_t* h = s.hidden.get<uint16_t>(T * d);
  uint16_t* qkv = s.qkv.get<uint16_t>(T * qkv_width);
  uint16_t* q_rot = s.q_rot.get<uint16_t>(T * qd);
  uint8_t* q_fp8 = s.q_fp8.get<uint8_t>(T * qd);
  uint16_t* attn = s.attn.get<uint16_t>(T * qd);
  uint16_t* proj = s.proj.get<uint16_t>(T * d);  // o, then down: the delta of the next residual add
  uint16_t* gate_up = s.gate_up.get<uint16_t>(T * 2 * ff);
  uint16_t* act = s.act.get<uint16_t>(T * ff);

  embedding_lookup_cuda(t, d, ids, s.embed.as<uint16_t>(), x, stream);
  const QueryOutputSplit split = query_output_split(attention_selection(), m.num_decode_tokens, t);
  const bool fp8_cache = is_fp8(s.kv.dtype);
  for (int32_t layer = 0; layer < c.num_layers; ++layer) {
    const LayerBuffers& l = s.layers[static_cast<size_t>(layer)];
    const AttentionOp& attention = s.attention[static_cast<size_t>(layer)];
    // The MLP output of the layer before joins the residual here.
    rms_norm_cuda(
        {t, d, x, layer == 0 ? nullptr : proj, l.input_norm.as<uint16_t>(), c.rms_norm_eps, h},
        stream);
    linear_cuda(*s.cublas, t, d, qkv_width, h, l.qkv.as<uint16_t>(), qkv, DType::kBF16, stream);

    RopeQuantAppendParams p;
    p.num_tokens = t;
    p.num_q_heads = hq;
    p.num_kv_heads = hkv;
    p.head_dim = hd;
    p.q = qkv;
    p.k = qkv + qd;
    p.v = qkv + qd + kvd;
    p.q_row_stride = p.k_row_stride = p.v_row_stride = qkv_width;
    p.positions = positions;
    p.rope = c.rope;
    p.cos_sin_cache = s.cos_sin.as<float>();
    p.cos_sin_cache_positions = s.options.max_model_len;
    if (c.qk_norm) {
      p.q_norm_weight = l.q_norm.as<uint16_t>();
      p.k_norm_weight = l.k_norm.as<uint16_t>();
      p.norm_eps = c.rms_norm_eps;
    }
    p.q_bf16_rows = split.bf16_rows;
    p.q_out_bf16 = q_rot;
    p.q_out_fp8 = q_fp8;
    p.q_fp8_dtype = split.fp8_dtype;
    p.q_scale = attention.scales().q_scale();
    p.k_cache = s.k_caches[static_cast<size_t>(layer)].as<void>();
    p.v_cache = s.v_caches[static_cast<size_t>(layer)].as<void>();
    p.kv = s.kv;
    if (fp8_cache) {  // per-tensor scales (per-head ones would need device arrays)
      p.k_scale = attention.scales().k_scale();
      p.v_scale = attention.scales().v_scale();
    }
    p.slot_mapping = slots;
    rope_quant_append_cuda(p, stream);

    AttentionOpArgs args;
    args.q = q_rot;
    args.q_fp8 = q_fp8;
    args.q_fp8_ready = split.fp8_rows_ready;
    args.k_cache = p.k_cache;
    args.v_cache = p.v_cache;
    args.kv = s.kv;
    args.metadata = view;
    args.out = attn;
    const size_t workspace = attention.workspace_bytes(args);
    if (s.attention_workspace.buffer().bytes() < workspace) {
      // Zeroed once when allocated: decode keeps split-merge counters there that every run
      // returns to zero.
      void* w = s.attention_workspace.get<uint8_t>(workspace);
      check_cuda(cudaMemsetAsync(w, 0, workspace, stream), "cudaMemsetAsync(attention workspace)");
    }
    args.workspace = s.attention_workspace.buffer().as<void>();
    args.workspace_bytes = s.attention_workspace.buffer().bytes();
    attention.run(args, stream);

    linear_cuda(*s.cublas, t, qd, d, attn, l.o.as<uint16_t>(), proj, DType::kBF16, stream);
    rms_norm_cuda({t, d, x, proj, l.post_norm.as<uint16_t>(), c.rms_norm_eps, h}, stream);
    linear_cuda(*s.cublas, t, d, 2 * ff, h, l.gate_up.as<uint16_t>(), gate_up, DType::kBF16,
                stream);
    swiglu_cuda(t, ff, gate_up, act, stream);
    linear_cuda(*s.cublas, t, ff, d, act, l.down.as<uint16_t>(), proj, DType::kBF16, stream);
  }
  // The last MLP output joins the residual; the final norm of every row (the rows asked for are
  // then gathered: the norm is per row, so the result is the same).
  rms_norm_cuda({t, d, x, proj, s.final_norm.as<uint16_t>(), c.rms_norm_eps, h}, stream);
  uint16_t* picked = s.row_hidden.get<uint16_t>(static_cast<size_t>(rows) * d);
  embedding_lookup_cuda(rows, d, gather, h, picked, stream);
  float* logits = s.logits.get<float>(static_cast<size_t>(rows) * c.vocab_size);
  linear_cuda(*s.cublas, rows, d, c.vocab_size, picked, s.lm_head, logits, DType::kF32, stream);
  std::vector<float> host(static_cast<size_t>(rows) * c.vocab_size);
  check_cuda(cudaMemcpyAsync(host.data(), logits, host.size() * sizeof(float),
                             cudaMemcpyDeviceToHost, stream),
             "cudaMemcpyAsync logits to host");
  check_cuda(cudaStreamSynchronize(stream), "the model step");
  return host;
}

}  // namespace quench
