#include "quench/engine/llm_engine.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "quench/core/cuda_device.h"
#include "quench/core/env_switch.h"
#include "quench/core/error.h"
#include "quench/core/json_file.h"
#include "quench/core/log.h"
#include "quench/engine/kv_cache_sizing.h"
#include "quench/engine/logits_processors.h"
#include "quench/engine/sampler.h"
#include "quench/kv_cache/block_table.h"
#include "quench/model/device_decoder_model.h"

namespace quench {
namespace {

// The CPU backend keeps whole contexts in host memory; a default past this many tokens would
// size a cache nobody asked for.
constexpr int32_t kDefaultMaxModelLen = 4096;

}  // namespace

LlmEngine::LlmEngine(const EngineOptions& options) : options_(options) {
  checkpoint_ = std::make_unique<Checkpoint>(options.model_dir);
  config_ = read_model_config(checkpoint_->config_path());
  eos_ids_ = config_.eos_token_ids;
  // Instruct models list their end-of-turn token in generation_config.json.
  const std::filesystem::path generation =
      std::filesystem::path(options.model_dir) / "generation_config.json";
  if (std::filesystem::exists(generation)) {
    const std::string text = read_text_file(generation.string(), "generation config");
    for (int32_t id : parse_generation_eos_ids(text, generation.string()))
      if (std::find(eos_ids_.begin(), eos_ids_.end(), id) == eos_ids_.end()) eos_ids_.push_back(id);
  }
  const std::filesystem::path tokenizer_path =
      std::filesystem::path(options.model_dir) / "tokenizer.json";
  if (std::filesystem::exists(tokenizer_path)) {
    tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::from_file(tokenizer_path.string()));
    QUENCH_REQUIRE(tokenizer_->vocab_size() <= config_.vocab_size, tokenizer_path.string(), " has ",
                   tokenizer_->vocab_size(), " ids, more than the model's vocab_size ",
                   config_.vocab_size);
  }
  const bool gpu = options.device == EngineDevice::kGpu ||
                   (options.device == EngineDevice::kAuto && cuda_device_available());
  // An FP8 checkpoint's linear weights stay FP8 where the GPU runner computes with them as FP8
  // (DeviceDecoderModel::keeps_fp8_weights: the GPU, the scaling, the shapes); elsewhere, and
  // under QUENCH_FP8_WEIGHTS=dequant, they are dequantized to bf16 at load as on the CPU.
  bool keep_fp8 = false;
  if (gpu && config_.quantization.fp8 &&
      env_switch("QUENCH_FP8_WEIGHTS", {"keep", "dequant"}) == "keep") {
    const CudaDeviceProperties props = require_current_cuda_device_properties("FP8 weights");
    keep_fp8 = DeviceDecoderModel::keeps_fp8_weights(
        config_, props.compute_capability_major * 10 + props.compute_capability_minor);
  }
  weights_ = std::make_unique<ModelWeights>(ModelWeights::load(config_, *checkpoint_, keep_fp8));
  if (weights_->has_fp8_linears())
    log_info(
        "FP8 checkpoint: linear weights stay FP8 on the GPU (QUENCH_FP8_WEIGHTS=dequant for "
        "bf16)");

  SchedulerConfig sc;
  sc.max_num_seqs = options.max_num_seqs;
  sc.max_num_batched_tokens = options.max_num_batched_tokens;
  sc.page_size = options.block_size;
  sc.enable_prefix_caching = options.enable_prefix_caching;
  sc.speculation = options.speculation;
  sc.max_model_len = options.max_model_len > 0
                         ? options.max_model_len
                         : std::min(config_.max_position_embeddings, kDefaultMaxModelLen);
  QUENCH_REQUIRE(sc.max_model_len <= config_.max_position_embeddings, "max_model_len ",
                 sc.max_model_len, " exceeds the model's max_position_embeddings ",
                 config_.max_position_embeddings);
  if (options.num_kv_pages > 0) {
    sc.num_pages = options.num_kv_pages;
  } else if (gpu) {
    KvMemoryBudget budget;
    const CudaMemoryInfo memory = current_cuda_memory_info("the GPU model runner");
    budget.device_total_bytes = memory.total_bytes;
    budget.device_free_bytes = memory.free_bytes;
    budget.utilization = options.gpu_memory_utilization;
    budget.weight_bytes = DeviceDecoderModel::weight_bytes(*weights_);
    // The runner sizes its buffers for max(max_num_batched_tokens, max_num_seqs) rows (a decode
    // graph holds max_num_seqs), each a logit row at most (prompt logprobs).
    const int32_t rows = std::max(sc.max_num_batched_tokens, sc.max_num_seqs);
    budget.step_bytes = DeviceDecoderModel::step_bytes(config_, rows, sc.max_num_seqs);
    KvCacheLayout page;
    page.num_pages = 1;
    page.page_size = options.block_size;
    page.num_kv_heads = config_.num_kv_heads();
    page.head_dim = config_.head_dim();
    page.dtype = options.kv_cache_dtype;
    page.layout = options.layout;
    budget.page_bytes = 2 * int64_t{config_.num_layers} * page.tensor_bytes();
    budget.page_size = options.block_size;
    budget.max_model_len = sc.max_model_len;
    sc.num_pages = kv_pages_for_memory_budget(budget);
  } else {
    sc.num_pages = static_cast<int32_t>(1 + sc.max_num_seqs *
                                                pages_for_tokens(sc.max_model_len, sc.page_size));
  }
  scheduler_ = std::make_unique<Scheduler>(sc);

  DecoderModelOptions mo;
  mo.kv_dtype = options.kv_cache_dtype;
  mo.page_size = options.block_size;
  mo.layout = options.layout;
  mo.num_pages = sc.num_pages;
  mo.max_model_len = sc.max_model_len;
  mo.prefill_kernel = options.prefill_kernel;
  mo.decode_kernel = options.decode_kernel;
  mo.max_num_seqs = sc.max_num_seqs;
  mo.max_num_batched_tokens = sc.max_num_batched_tokens;
  mo.enforce_eager = options.enforce_eager;
  if (gpu) {
    model_ = std::make_unique<DeviceDecoderModel>(config_, *weights_, mo);
  } else {
    model_ = std::make_unique<DecoderModel>(config_, *weights_, mo);
  }
}

bool LlmEngine::fp8_linear_weights() const {
  return weights_->has_fp8_linears();
}

void LlmEngine::check_request(const std::vector<int32_t>& prompt,
                              const SamplingParams& params) const {
  params.validate();
  QUENCH_REQUIRE(params.stop.empty() || tokenizer_ != nullptr,
                 "stop strings need the model's tokenizer.json, which this model lacks");
  QUENCH_REQUIRE(!params.structured_output() || tokenizer_ != nullptr,
                 "JSON mode and JSON schemas need the model's tokenizer.json, which this model "
                 "lacks");
  QUENCH_REQUIRE(!prompt.empty(), "the prompt is empty");
  const int32_t max_len = scheduler_->config().max_model_len;
  QUENCH_REQUIRE(static_cast<int64_t>(prompt.size()) < max_len, "the prompt has ", prompt.size(),
                 " tokens; max_model_len ", max_len, " leaves room for at most ", max_len - 1);
  for (size_t i = 0; i < prompt.size(); ++i) {
    QUENCH_REQUIRE(prompt[i] >= 0 && prompt[i] < config_.vocab_size, "prompt token ", i, " = ",
                   prompt[i], " is outside the vocabulary [0, ", config_.vocab_size, ")");
  }
  for (int32_t token : params.stop_token_ids) {
    QUENCH_REQUIRE(token >= 0 && token < config_.vocab_size, "stop_token_ids holds ", token,
                   ", outside the vocabulary [0, ", config_.vocab_size, ")");
  }
  for (const auto& [token, bias] : params.logit_bias) {
    QUENCH_REQUIRE(token >= 0 && token < config_.vocab_size, "logit_bias names token ", token,
                   ", outside the vocabulary [0, ", config_.vocab_size, ")");
  }
}

int64_t LlmEngine::add_request(std::vector<int32_t> prompt, const SamplingParams& params) {
  check_request(prompt, params);
  auto seq = std::make_unique<Sequence>();
  seq->id = next_id_++;
  seq->prompt = std::move(prompt);
  seq->params = params;
  // Unseeded requests still draw reproducibly: the engine seed and the request id.
  seq->rng.seed(params.seed
                    ? *params.seed
                    : options_.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(seq->id));
  const int64_t id = seq->id;
  scheduler_->add(std::move(seq));
  return id;
}

bool LlmEngine::match_stop(Sequence& s) const {
  // The text grows a token at a time (settled characters only); only the tail where a stop
  // string could newly end is searched.
  if (!s.output_text) {
    s.output_text =
        std::make_shared<IncrementalDetokenizer>(*tokenizer_, s.params.skip_special_tokens);
    s.output_text->push(std::vector<int32_t>(s.output.begin(), s.output.end() - 1));
  }
  s.output_text->push({s.output.back()});
  const std::string& text = s.output_text->settled_text();
  size_t longest = 0;
  for (const std::string& stop : s.params.stop)
    longest = std::max(longest, stop.size());
  const size_t from = s.stop_search_from > longest ? s.stop_search_from - longest : 0;
  size_t best = std::string::npos;
  for (const std::string& stop : s.params.stop)
    best = std::min(best, text.find(stop, from));
  s.stop_search_from = text.size();
  if (best == std::string::npos) return false;
  s.stop_text_offset = static_cast<int64_t>(best);
  return true;
}

std::string output_text(const Tokenizer& tokenizer, const RequestOutput& output) {
  std::string text =
      decode_output_text(tokenizer, output.output, output.skip_special_tokens,
                         ended_on_its_last_token(output.finish_reason, output.stop_text_offset));
  if (output.stop_text_offset >= 0) text.resize(static_cast<size_t>(output.stop_text_offset));
  return text;
}

void LlmEngine::append_token(Sequence& s, int32_t token, std::optional<TokenLogprobs> logprobs,
                             std::vector<TokenEvent>* sampled_tokens) {
  const SchedulerConfig& sc = scheduler_->config();
  s.output.push_back(token);
  QUENCH_REQUIRE(logprobs.has_value() == (s.params.logprobs >= 0), "request ", s.id,
                 ": the runner's logprobs do not match the request's logprobs ", s.params.logprobs);
  TokenLogprobs lp;
  if (logprobs) {
    lp = std::move(*logprobs);
    s.output_logprobs.push_back(lp);
  }
  if (sampled_tokens != nullptr) sampled_tokens->push_back({s.id, token, std::move(lp)});
  const auto holds = [&](const std::vector<int32_t>& ids) {
    return std::find(ids.begin(), ids.end(), token) != ids.end();
  };
  // Structured output: the token's bytes extend the JSON text (the mask allowed only such
  // tokens); its closing byte ends the request, as raw text (guided_regex / guided_choice) ends
  // where nothing may follow it (or on the end-of-sequence token, which its mask allows wherever
  // the text may end). A prefix that took a masked token, the mask having allowed none, ends it
  // too.
  // With a reasoning gate, the gate reads every token (special ones shown: a marker may be one)
  // and the prefix only the answer's bytes.
  const std::shared_ptr<const JsonSchema> schema = s.params.structured_output();
  bool json_ends = false;
  if (schema) {
    if (!s.json_prefix) start_structured_output(s, *schema);
    const auto answering = [&] {
      return !s.reasoning_gate || s.reasoning_gate->state() == ReasoningGate::State::kAnswer;
    };
    const bool gated = !answering();
    const std::string bytes = tokenizer_->token_bytes(token, !gated, true);
    const std::string_view answer = gated ? s.reasoning_gate->feed(bytes) : bytes;
    if (answering()) json_ends = !s.json_prefix->feed(answer) || s.json_prefix->complete();
  }
  if ((!s.params.ignore_eos && holds(eos_ids_)) || holds(s.params.stop_token_ids) || json_ends) {
    s.finish_reason = FinishReason::kStop;
  } else if (!s.params.stop.empty() && match_stop(s)) {
    s.finish_reason = FinishReason::kStop;
  } else if (static_cast<int32_t>(s.output.size()) >= s.params.max_tokens ||
             s.num_tokens() >= sc.max_model_len) {
    s.finish_reason = FinishReason::kLength;
  }
  if (s.finish_reason != FinishReason::kNone) s.status = SequenceStatus::kFinished;
}

void LlmEngine::start_structured_output(Sequence& s, const JsonSchema& schema) const {
  s.json_prefix = std::make_shared<JsonSchemaPrefix>(schema);
  if (s.params.reasoning_gate)
    s.reasoning_gate = std::make_shared<ReasoningGate>(*s.params.reasoning_gate);
}

const std::vector<uint32_t>* LlmEngine::structured_output_mask(Sequence& s,
                                                               std::vector<uint32_t>& scratch) {
  const std::vector<uint32_t>& schema_bits = json_masks_->allowed_bits(*s.json_prefix);
  if (!s.reasoning_gate) return &schema_bits;
  switch (s.reasoning_gate->state()) {
    case ReasoningGate::State::kAnswer:
      return &schema_bits;
    case ReasoningGate::State::kReasoning:
      return nullptr;
    case ReasoningGate::State::kMayOpen:
      break;
  }
  // The open marker as one token of its own (Qwen3's <think>); a vocabulary without one cannot
  // open a block: the schema's tokens alone (the gate then reads the first as the answer's).
  const std::string& open = s.reasoning_gate->spec().open;
  const std::optional<int32_t> id = tokenizer_->token_to_id(open);
  if (!id || *id < 0 || static_cast<size_t>(*id) >= 32 * schema_bits.size() ||
      tokenizer_->token_bytes(*id, false, true) != open) {
    return &schema_bits;
  }
  scratch = schema_bits;
  scratch[static_cast<size_t>(*id) / 32] |= 1u << (*id % 32);
  return &scratch;
}

std::vector<RequestOutput> LlmEngine::step(EngineStepStats* stats,
                                           std::vector<TokenEvent>* sampled_tokens) {
  const auto step_start = std::chrono::steady_clock::now();
  const ScheduledStep step = scheduler_->schedule();
  if (stats != nullptr) {
    stats->decode_rows = static_cast<int32_t>(step.decode.size());
    stats->prefill_rows = step.num_rows() - stats->decode_rows;
    stats->preempted = step.num_preempted;
  }
  if (step.empty()) {
    QUENCH_REQUIRE(!scheduler_->has_unfinished(),
                   "the scheduler placed nothing while requests wait (KV cache too small?)");
    return {};
  }
  std::vector<ScheduledSequence> decode, prefill;
  std::vector<int32_t> tokens, logit_rows;
  // A sequence that samples this step: its logit rows are [first, first + 1 + drafts) of
  // logit_rows (a decode row with drafts has one per token: each verifies the draft after it).
  struct SampleSite {
    Sequence* seq;
    size_t first;
    const std::vector<int32_t>* draft;
  };
  std::vector<SampleSite> sampled;
  struct PromptRow {
    Sequence* seq;
    int32_t row;
    int32_t position;  // its logits predict the prompt token after it
  };
  std::vector<PromptRow> prompt_rows;
  int32_t row = 0;
  for (const auto* list : {&step.decode, &step.prefill}) {
    for (const ScheduledChunk& c : *list) {
      ScheduledSequence s{c.seq->pages, c.seq->num_computed, c.num_new};
      (list == &step.decode ? decode : prefill).push_back(std::move(s));
      const auto real = static_cast<int32_t>(c.num_new - c.draft.size());  // known tokens
      for (int32_t i = 0; i < c.num_new; ++i) {
        const int32_t position = c.seq->num_computed + i;
        tokens.push_back(i < real ? c.seq->token_at(position)
                                  : c.draft[static_cast<size_t>(i - real)]);
        if (c.seq->params.prompt_logprobs >= 0 &&
            position + 1 < static_cast<int32_t>(c.seq->prompt.size())) {
          prompt_rows.push_back({c.seq, row + i, position});
        }
      }
      if (c.seq->num_computed + real == c.seq->num_tokens()) {
        sampled.push_back({c.seq, logit_rows.size(), &c.draft});
        for (int32_t i = real - 1; i < c.num_new; ++i)
          logit_rows.push_back(row + i);
      }
      row += c.num_new;
    }
  }
  const SchedulerConfig& sc = scheduler_->config();
  const auto max_pages = static_cast<int32_t>(pages_for_tokens(sc.max_model_len, sc.page_size));
  const AttentionMetadata metadata =
      build_attention_metadata(decode, prefill, sc.page_size, sc.num_pages, max_pages);
  const size_t sampling_rows = logit_rows.size();
  for (const PromptRow& p : prompt_rows)
    logit_rows.push_back(p.row);  // after the sampling rows
  // Each sampled row needs only its largest logit (greedy) or its draw, after its request's
  // logit adjustments, and its token's logprobs where the request asks: the runner picks them
  // where the logits are (on the GPU: a few numbers per row cross to the host, not a vocabulary
  // of floats). Rows with drafts are always greedy (the scheduler drafts for no other). A draw's
  // key comes from the request's generator, one per sampled token, so a seeded request gives the
  // same tokens whichever backend draws it.
  std::vector<RowPick> picks(logit_rows.size());
  // A request's logit adjustments as edits of its row, applied by the runner before the pick
  // (adjusted requests are never drafted: one row each). Their addresses stay put: reserved.
  // fill_edits builds them while the runner's forward is under way (forward_for_sampling).
  std::vector<RowLogitEdits> edits;
  std::vector<Sequence*> edited;  // edits[i] is edited[i]'s
  edits.reserve(sampled.size());
  for (const SampleSite& site : sampled) {
    Sequence& s = *site.seq;
    const SamplingParams& p = s.params;
    const RowLogitEdits* row_edits = nullptr;
    if (adjusts_logits(p)) {
      edits.emplace_back();
      edited.push_back(&s);
      row_edits = &edits.back();
    }
    for (size_t j = 0; j <= site.draft->size(); ++j) {
      RowPick& pick = picks[site.first + j];
      pick.edits = row_edits;
      if (p.temperature == 0.0f) {
        pick.kind = RowPick::Kind::kArgmax;
      } else {
        pick.kind = RowPick::Kind::kDraw;
        pick.sampler = row_sampler(p, site.seq->rng);
      }
      pick.top = p.logprobs;  // -1: none asked
    }
  }
  // Prompt rows need one token's log-probability and the top entries: the runner computes them
  // where the logits are (a prompt of thousands of rows would otherwise send thousands of
  // vocabularies of floats to the host).
  for (size_t i = 0; i < prompt_rows.size(); ++i) {
    const Sequence& s = *prompt_rows[i].seq;
    RowPick& pick = picks[sampling_rows + i];
    pick.kind = RowPick::Kind::kLogprobs;
    pick.token = s.prompt[static_cast<size_t>(prompt_rows[i].position + 1)];
    pick.top = s.params.prompt_logprobs;
  }
  const auto forward_start = std::chrono::steady_clock::now();
  const auto fill_edits = [&] {
    for (size_t i = 0; i < edited.size(); ++i) {
      Sequence& s = *edited[i];
      const std::vector<uint32_t>* allowed = nullptr;
      std::vector<uint32_t> first_token_bits;  // read by logit_edits below
      if (const std::shared_ptr<const JsonSchema> schema = s.params.structured_output()) {
        if (!json_masks_) json_masks_ = std::make_unique<JsonTokenMasks>(*tokenizer_, eos_ids_);
        if (!s.json_prefix) start_structured_output(s, *schema);
        allowed = structured_output_mask(s, first_token_bits);
      }
      s.penalty_tokens.sync(s.prompt, s.output);
      edits[i] = logit_edits(s.params, s.penalty_tokens, eos_ids_, allowed);
    }
  };
  const StepLogits logits =
      model_->forward_for_sampling(tokens, metadata, logit_rows, picks, fill_edits);
  const auto forward_end = std::chrono::steady_clock::now();
  // Each row's place in logits.logprobs (rows that asked for them, in logit-row order).
  std::vector<size_t> logprobs_row(logit_rows.size(), 0);
  size_t logprobs_rows = 0;
  for (size_t i = 0; i < logit_rows.size(); ++i)
    if (picks[i].wants_logprobs()) logprobs_row[i] = logprobs_rows++;
  QUENCH_REQUIRE(logits.logprobs.size() == logprobs_rows, "the model returned ",
                 logits.logprobs.size(), " logprobs rows for ", logprobs_rows);
  for (size_t i = 0; i < prompt_rows.size(); ++i) {
    Sequence& s = *prompt_rows[i].seq;
    const auto next = static_cast<size_t>(prompt_rows[i].position + 1);
    if (s.prompt_logprobs.size() != s.prompt.size())
      s.prompt_logprobs.assign(s.prompt.size(), std::nullopt);
    s.prompt_logprobs[next] = logits.logprobs[logprobs_row[sampling_rows + i]];
  }

  for (const SampleSite& site : sampled) {
    Sequence& s = *site.seq;
    const std::vector<int32_t>& draft = *site.draft;
    spec_drafted_tokens_ += static_cast<int64_t>(draft.size());
    // Row j's token; while it equals draft j, row j + 1 saw the right context and is used too.
    for (size_t j = 0; j <= draft.size() && s.finish_reason == FinishReason::kNone; ++j) {
      const size_t i = site.first + j;
      const int32_t token = logits.picked[i];
      QUENCH_REQUIRE(token >= 0, "sampling request ", s.id,
                     ": a logit is not finite (the model produced a non-finite value)");
      std::optional<TokenLogprobs> lp;
      if (picks[i].wants_logprobs()) lp = logits.logprobs[logprobs_row[i]];
      append_token(s, token, std::move(lp), sampled_tokens);
      if (j < draft.size()) {
        if (token != draft[j]) break;
        ++spec_accepted_tokens_;
      }
    }
  }
  std::vector<RequestOutput> done;
  const std::vector<std::unique_ptr<Sequence>> finished = scheduler_->complete(step);
  StepTimeTotals& times = step.prefill.empty() ? decode_step_times_ : prefill_step_times_;
  using Ms = std::chrono::duration<double, std::milli>;
  ++times.steps;
  times.wall_ms += Ms(std::chrono::steady_clock::now() - step_start).count();
  times.forward_ms += Ms(forward_end - forward_start).count();
  times.device_ms += logits.device_ms;
  for (auto& seq : finished) {
    if (seq->params.prompt_logprobs >= 0) seq->prompt_logprobs.resize(seq->prompt.size());
    done.push_back({seq->id, std::move(seq->prompt), std::move(seq->output),
                    std::move(seq->output_logprobs), std::move(seq->prompt_logprobs),
                    seq->finish_reason, seq->num_preemptions, seq->stop_text_offset,
                    seq->params.skip_special_tokens});
  }
  return done;
}

std::vector<RequestOutput> LlmEngine::generate(const std::vector<std::vector<int32_t>>& prompts,
                                               const SamplingParams& params) {
  QUENCH_REQUIRE(!has_unfinished(), "generate() runs on an idle engine; requests are pending");
  std::map<int64_t, size_t> slot;
  for (size_t i = 0; i < prompts.size(); ++i)
    slot[add_request(prompts[i], params)] = i;
  std::vector<RequestOutput> outputs(prompts.size());
  while (has_unfinished()) {
    for (RequestOutput& out : step())
      outputs[slot.at(out.id)] = std::move(out);
  }
  return outputs;
}

}  // namespace quench
