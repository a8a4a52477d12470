// The engine loop: requests in, tokens out. Each step asks the scheduler for a batch, lays its
// rows out as the attention op wants them (decode rows first, then prefill chunks), runs the
// model once, samples a token for every sequence whose chunk reached its end, and retires the
// sequences that stop (end-of-sequence token, max_tokens, or max_model_len).
// The model runs on the CPU (DecoderModel) or the GPU (DeviceDecoderModel) behind the same step.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "quench/engine/scheduler.h"
#include "quench/engine/structured_output/json_token_masks.h"
#include "quench/model/decoder_model.h"
#include "quench/tokenizer/tokenizer.h"

namespace quench {

enum class EngineDevice : uint8_t { kAuto, kCpu, kGpu };

struct EngineOptions {
  std::string model_dir;
  EngineDevice device = EngineDevice::kAuto;  // auto: the GPU when one is usable, else the CPU
  DType kv_cache_dtype = DType::kFP8E4M3;
  int32_t block_size = 16;  // tokens per KV page
  KvLayout layout = KvLayout::kNHD;
  int32_t max_model_len = 0;  // 0 = the config's max_position_embeddings, capped at 4096
  // 0 = on the GPU, what gpu_memory_utilization leaves after the weights and step buffers; on the
  // CPU, enough for max_num_seqs sequences of max_model_len.
  int32_t num_kv_pages = 0;
  double gpu_memory_utilization = 0.9;  // the share of the GPU's memory the engine may take
  int32_t max_num_seqs = 16;
  int32_t max_num_batched_tokens = 2048;
  uint64_t seed = 0;                  // seeds requests that bring no seed of their own
  bool enable_prefix_caching = true;  // reuse the KV pages of prompts' prefixes computed before
  bool enforce_eager = false;         // GPU: no CUDA graphs for decode steps
  NgramSpeculation speculation;  // n-gram speculative decoding of greedy requests; off by default
  AttentionKernelOverride prefill_kernel;
  AttentionKernelOverride decode_kernel;
};

struct RequestOutput {
  int64_t id = 0;
  std::vector<int32_t> prompt;
  std::vector<int32_t> output;
  std::vector<TokenLogprobs> output_logprobs;                 // one per output token when asked for
  std::vector<std::optional<TokenLogprobs>> prompt_logprobs;  // one per prompt token when asked
  FinishReason finish_reason = FinishReason::kNone;
  int32_t num_preemptions = 0;
  // A stop string ended it: its text is the decoded output up to this byte offset. -1 otherwise.
  int64_t stop_text_offset = -1;
  bool skip_special_tokens = true;  // the request's: how its text is decoded
};

// The text of a finished request: the decoded output, cut before a matched stop string.
std::string output_text(const Tokenizer& tokenizer, const RequestOutput& output);

// A token sampled for a request in a step (what a streaming client receives).
struct TokenEvent {
  int64_t id = 0;
  int32_t token = 0;
  TokenLogprobs logprobs;  // when the request asked for them
};

struct EngineStepStats {
  int32_t decode_rows = 0;
  int32_t prefill_rows = 0;
  int32_t preempted = 0;
};

// Where the engine's steps spent their time, summed over steps of one kind (decode-only steps,
// the ones TPOT is made of, apart from steps with prefill rows). wall: the whole step() call;
// forward: inside the model runner (inputs to the device, the forward, results back, the wait);
// device: the runner's stream busy with the step (0 on the CPU). wall - forward is the host's
// own work (scheduling, metadata, sampling, stop checks), during which the GPU idles.
struct StepTimeTotals {
  int64_t steps = 0;
  double wall_ms = 0.0;
  double forward_ms = 0.0;
  double device_ms = 0.0;
};

class LlmEngine {
 public:
  // Loads config.json (+ generation_config.json), the weights and tokenizer.json (if present) from
  // options.model_dir and sizes the KV cache. Throws
  // quench::Error naming the file, tensor or option at fault.
  explicit LlmEngine(const EngineOptions& options);

  const ModelConfig& config() const { return config_; }
  // Whether an FP8 checkpoint's linear weights were kept FP8 (the GPU runner computes with them;
  // false for bf16 checkpoints and for FP8 ones dequantized at load).
  bool fp8_linear_weights() const;
  const ModelRunner& model() const { return *model_; }
  const SchedulerConfig& scheduler_config() const { return scheduler_->config(); }
  int64_t checkpoint_bytes() const { return checkpoint_->total_bytes(); }
  // The model directory's tokenizer.json; nullptr when it has none (prompts are then token ids).
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }
  // config.json's eos_token_id(s) plus generation_config.json's.
  const std::vector<int32_t>& eos_token_ids() const { return eos_ids_; }

  // Throws quench::Error for what add_request would refuse: bad parameters, token ids outside
  // the vocabulary, an empty prompt or one longer than max_model_len allows. Reads only the
  // configuration, so other threads may call it while the engine runs.
  void check_request(const std::vector<int32_t>& prompt, const SamplingParams& params) const;
  // Queues a request (after check_request); returns its id.
  int64_t add_request(std::vector<int32_t> prompt, const SamplingParams& params);
  // Drops a queued or running request and frees its pages; false when it is not in flight.
  bool abort_request(int64_t id) { return scheduler_->abort(id); }
  int32_t num_running() const { return scheduler_->num_running(); }
  int32_t num_waiting() const { return scheduler_->num_waiting(); }
  // Prompt tokens admitted, and those whose KV the prefix cache supplied.
  int64_t prefix_query_tokens() const { return scheduler_->prefix_query_tokens(); }
  int64_t prefix_hit_tokens() const { return scheduler_->prefix_hit_tokens(); }
  // n-gram speculation: drafts verified so far, and those of them accepted.
  int64_t spec_drafted_tokens() const { return spec_drafted_tokens_; }
  int64_t spec_accepted_tokens() const { return spec_accepted_tokens_; }
  // Step times so far: decode-only steps, and steps with prefill rows.
  const StepTimeTotals& decode_step_times() const { return decode_step_times_; }
  const StepTimeTotals& prefill_step_times() const { return prefill_step_times_; }
  // Share of the KV cache's pages in use (0 to 1).
  double kv_cache_usage() const {
    const PageAllocator& pages = scheduler_->pages();
    return 1.0 - static_cast<double>(pages.free_pages()) / (pages.num_pages() - 1);
  }
  bool has_unfinished() const { return scheduler_->has_unfinished(); }
  // Runs one step; returns the requests that finished in it, and appends every token sampled in
  // the step to `sampled_tokens` when given.
  std::vector<RequestOutput> step(EngineStepStats* stats = nullptr,
                                  std::vector<TokenEvent>* sampled_tokens = nullptr);
  // On an idle engine: adds the prompts, runs until all finish, returns outputs in prompt order.
  std::vector<RequestOutput> generate(const std::vector<std::vector<int32_t>>& prompts,
                                      const SamplingParams& params);

 private:
  EngineOptions options_;
  ModelConfig config_;
  std::unique_ptr<Checkpoint> checkpoint_;
  std::unique_ptr<ModelWeights> weights_;
  std::unique_ptr<ModelRunner> model_;
  std::unique_ptr<Scheduler> scheduler_;
  // True (and the offset recorded) when s's text now contains one of its stop strings.
  bool match_stop(Sequence& s) const;
  // Appends one generated token to s (with its logprobs, given exactly when the request asks)
  // and decides whether s finishes with it.
  void append_token(Sequence& s, int32_t token, std::optional<TokenLogprobs> logprobs,
                    std::vector<TokenEvent>* sampled_tokens);
  // Structured output: s's prefix (and reasoning gate) from its first use on.
  void start_structured_output(Sequence& s, const JsonSchema& schema) const;
  // The tokens s may take next under its structured output: the schema's; none masked while it
  // reasons; at a first token that may open a reasoning block, the schema's and the open
  // marker's own token (built in `scratch`). Null: no mask.
  const std::vector<uint32_t>* structured_output_mask(Sequence& s, std::vector<uint32_t>& scratch);

  std::unique_ptr<Tokenizer> tokenizer_;
  std::vector<int32_t> eos_ids_;
  int64_t next_id_ = 0;
  int64_t spec_drafted_tokens_ = 0;
  int64_t spec_accepted_tokens_ = 0;
  std::unique_ptr<JsonTokenMasks> json_masks_;  // structured output's masks, built at first use
  StepTimeTotals decode_step_times_;
  StepTimeTotals prefill_step_times_;
};

}  // namespace quench
