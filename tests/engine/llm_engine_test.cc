// The engine on the built-in tiny model: batching changes nothing (greedy tokens of a batch with
// chunked prefill equal each prompt run alone, also through preemptions), seeded sampling repeats
// whatever it is batched with and whichever side draws, requests stop at the end-of-sequence token,
// max_tokens and max_model_len, and bad requests are refused with the field named.
#include "quench/engine/llm_engine.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "harness/expect_error.h"
#include "harness/scratch_dir.h"
#include "harness/tiny_engine.h"
#include "quench/model/decoder_model.h"
#include "quench/model/tiny_model.h"
#include "quench/ops/logprobs/row_logprobs_reference.h"

namespace quench {
namespace {

using testing_support::greedy;

std::string tiny_model_dir(const std::string& name) {
  return testing_support::tiny_model_dir("quench_llm_engine_test", name);
}

EngineOptions options(const std::string& dir) {
  return testing_support::tiny_engine_options(dir);
}

std::vector<std::vector<int32_t>> prompts() {
  std::vector<std::vector<int32_t>> p;
  for (int32_t len : {5, 70, 1, 33, 17}) {
    std::vector<int32_t> ids;
    for (int32_t i = 0; i < len; ++i)
      ids.push_back(3 + (i * 37 + len * 11) % 500);
    p.push_back(ids);
  }
  return p;
}

std::vector<std::vector<int32_t>> alone(const EngineOptions& o,
                                        const std::vector<std::vector<int32_t>>& ps,
                                        const SamplingParams& s) {
  std::vector<std::vector<int32_t>> out;
  for (const auto& p : ps) {
    LlmEngine engine(o);
    out.push_back(engine.generate({p}, s)[0].output);
  }
  return out;
}

TEST(LlmEngine, BatchedGreedyEqualsEachPromptAlone) {
  const EngineOptions o = options(tiny_model_dir("batched"));
  const auto want = alone(o, prompts(), greedy(12));
  LlmEngine engine(o);
  const std::vector<RequestOutput> got = engine.generate(prompts(), greedy(12));
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].output, want[i]) << "prompt " << i;
    EXPECT_EQ(got[i].prompt, prompts()[i]);
    EXPECT_EQ(got[i].finish_reason, FinishReason::kLength);
    EXPECT_EQ(got[i].output.size(), 12u);
  }
}

// Step times are counted per kind: one prefill step for the prompts (the budget holds them all),
// then one decode-only step per further token; the runner's time lies within the step's, and the
// CPU runner reports no GPU time.
TEST(LlmEngine, CountsDecodeAndPrefillStepTimes) {
  const EngineOptions o = options(tiny_model_dir("step_times"));
  LlmEngine engine(o);
  engine.generate({{5, 6, 7}, {8, 9}}, greedy(6));
  const StepTimeTotals& decode = engine.decode_step_times();
  const StepTimeTotals& prefill = engine.prefill_step_times();
  EXPECT_EQ(prefill.steps, 1);
  EXPECT_EQ(decode.steps, 5);  // the prefill step samples the first of the 6 tokens
  for (const StepTimeTotals* t : {&decode, &prefill}) {
    EXPECT_GT(t->forward_ms, 0.0);
    EXPECT_GE(t->wall_ms, t->forward_ms);
    EXPECT_EQ(t->device_ms, 0.0);
  }
}

// Greedy rows without logprobs take the runner's argmax path (no logits to the host); with
// logprobs they take the full logits. Both pick the same tokens, and the top logprob is the token.
TEST(LlmEngine, GreedyTokensAreTheSameWithAndWithoutLogprobs) {
  const EngineOptions o = options(tiny_model_dir("argmax_path"));
  LlmEngine engine(o);
  const std::vector<RequestOutput> plain = engine.generate(prompts(), greedy(10));
  SamplingParams with_logprobs = greedy(10);
  with_logprobs.logprobs = 2;
  const std::vector<RequestOutput> full = engine.generate(prompts(), with_logprobs);
  ASSERT_EQ(plain.size(), full.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_EQ(plain[i].output, full[i].output) << "prompt " << i;
    ASSERT_EQ(full[i].output_logprobs.size(), full[i].output.size());
    for (size_t k = 0; k < full[i].output.size(); ++k)
      EXPECT_EQ(full[i].output_logprobs[k].top.front().first, full[i].output[k]);
  }
}

TEST(LlmEngine, PreemptionRecomputesWithoutChangingTokens) {
  // With prefix caching a readmitted sequence's computed count comes from the cache lookup;
  // without it, only the preemption's reset stands between it and stale pages.
  for (const bool caching : {true, false}) {
    EngineOptions o = options(tiny_model_dir("preempt"));
    o.enable_prefix_caching = caching;
    const auto want = alone(o, prompts(), greedy(40));
    o.num_kv_pages = 17;  // 256 tokens: less than the batch needs at its peak
    LlmEngine engine(o);
    const std::vector<RequestOutput> got = engine.generate(prompts(), greedy(40));
    int32_t preemptions = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].output, want[i]) << "prompt " << i << " caching " << caching;
      preemptions += got[i].num_preemptions;
    }
    EXPECT_GT(preemptions, 0) << "caching " << caching;
  }
}

TEST(LlmEngine, SeededSamplingRepeatsWhateverItIsBatchedWith) {
  const EngineOptions o = options(tiny_model_dir("seeded"));
  SamplingParams s = greedy(10);
  s.temperature = 1.0f;
  s.top_p = 0.9f;
  s.seed = 1234;
  const auto want = alone(o, {prompts()[1]}, s)[0];
  LlmEngine engine(o);
  const auto got = engine.generate(prompts(), s);
  EXPECT_EQ(got[1].output, want);
  EXPECT_NE(got[1].output, alone(o, {prompts()[1]}, greedy(10))[0]);  // it did sample
}

// The runner's draws (rows without logit adjustments) and the host's sampler (a logit bias of 0
// leaves the logits as they are but sends the rows to the host) take the same key from a
// request's generator per token and give the same tokens.
TEST(LlmEngine, RunnerDrawsAndTheHostSamplerGiveTheSameTokens) {
  const EngineOptions o = options(tiny_model_dir("draws"));
  SamplingParams s = greedy(12);
  s.temperature = 0.8f;
  s.top_k = 20;
  s.top_p = 0.9f;
  s.seed = 99;
  LlmEngine runner_draws(o);
  const auto drawn = runner_draws.generate(prompts(), s);
  s.logit_bias = {{0, 0.0f}};
  LlmEngine host_draws(o);
  const auto hosted = host_draws.generate(prompts(), s);
  ASSERT_EQ(drawn.size(), hosted.size());
  for (size_t i = 0; i < drawn.size(); ++i)
    EXPECT_EQ(drawn[i].output, hosted[i].output) << "prompt " << i;
}

TEST(LlmEngine, StopsAtEndOfSequenceAndAtMaxModelLen) {
  const std::string dir = tiny_model_dir("eos");
  EngineOptions o = options(dir);
  const std::vector<int32_t> prompt = prompts()[0];
  std::vector<int32_t> free_run;
  {
    LlmEngine engine(o);
    free_run = engine.generate({prompt}, greedy(8))[0].output;
  }
  // config.json names the third generated token, generation_config.json the fifth: either ends
  // the request, whichever comes first (an earlier token may equal one of them).
  nlohmann::json config = nlohmann::json::parse(std::ifstream(dir + "/config.json"));
  config["eos_token_id"] = free_run[2];
  std::ofstream(dir + "/config.json") << config.dump();
  std::ofstream(dir + "/generation_config.json")
      << nlohmann::json{{"eos_token_id", {free_run[4]}}}.dump();
  const size_t stop_at = static_cast<size_t>(
      std::find_if(free_run.begin(), free_run.end(),
                   [&](int32_t t) { return t == free_run[2] || t == free_run[4]; }) -
      free_run.begin());
  LlmEngine engine(o);
  EXPECT_EQ(engine.eos_token_ids(), (std::vector<int32_t>{free_run[2], free_run[4]}));
  SamplingParams s = greedy(8);
  s.ignore_eos = false;
  const RequestOutput out = engine.generate({prompt}, s)[0];
  EXPECT_EQ(out.finish_reason, FinishReason::kStop);
  EXPECT_EQ(out.output, std::vector<int32_t>(free_run.begin(), free_run.begin() + stop_at + 1));

  o.max_model_len = 9;  // 5 prompt tokens: 4 generated tokens fill it
  LlmEngine short_engine(o);
  const RequestOutput capped = short_engine.generate({prompt}, greedy(100))[0];
  EXPECT_EQ(capped.finish_reason, FinishReason::kLength);
  EXPECT_EQ(capped.output.size(), 4u);
}

TEST(LlmEngine, StopStringsEndTheRequestAndCutTheText) {
  const std::string dir = tiny_model_dir("stop");
  const EngineOptions o = options(dir);
  const std::vector<int32_t> prompt = prompts()[3];
  const Tokenizer tokenizer = Tokenizer::from_file(dir + "/tokenizer.json");
  LlmEngine free_engine(o);
  const RequestOutput free_run = free_engine.generate({prompt}, greedy(40))[0];
  const std::string text = output_text(tokenizer, free_run);
  // A stop string taken from the middle of the free run's text (two stop strings, the earlier
  // match wins).
  ASSERT_GT(text.size(), 24u);
  const std::string stop = text.substr(text.size() / 2, 3);
  const size_t cut = text.find(stop);
  SamplingParams s = greedy(40);
  s.stop = {"no such text \x01", stop};
  LlmEngine engine(o);
  const RequestOutput out = engine.generate({prompt}, s)[0];
  EXPECT_EQ(out.finish_reason, FinishReason::kStop);
  EXPECT_EQ(out.stop_text_offset, static_cast<int64_t>(cut));
  EXPECT_EQ(output_text(tokenizer, out), text.substr(0, cut));
  EXPECT_LT(out.output.size(), free_run.output.size());
  // The tokens up to the stop are the free run's.
  EXPECT_EQ(out.output, std::vector<int32_t>(free_run.output.begin(),
                                             free_run.output.begin() + out.output.size()));
  SamplingParams empty = greedy(4);
  empty.stop = {""};
  EXPECT_QUENCH_ERROR(engine.add_request({1, 2}, empty), {"stop[0] is empty"});
}

TEST(LlmEngine, PromptLogprobsScoreEveryPromptTokenUnderTheOnesBefore) {
  const std::string dir = tiny_model_dir("prompt_logprobs");
  const EngineOptions o = options(dir);  // 64-token steps: the 70-token prompt spans two chunks
  const std::vector<int32_t> prompt = prompts()[1];
  ASSERT_EQ(prompt.size(), 70u);
  SamplingParams s = greedy(2);
  s.prompt_logprobs = 2;
  s.logprobs = 0;
  LlmEngine engine(o);
  engine.generate({prompt}, greedy(3));  // leaves the prompt's pages in the prefix cache
  const RequestOutput out = engine.generate({prompt}, s)[0];
  ASSERT_EQ(out.prompt_logprobs.size(), 70u);
  EXPECT_FALSE(out.prompt_logprobs[0].has_value());  // nothing before the first token
  ASSERT_EQ(out.output_logprobs.size(), 2u);
  // The oracle: the model's logits at every row of one prefill, log-softmaxed.
  const Checkpoint checkpoint(dir);
  const ModelConfig config = read_model_config(checkpoint.config_path());
  const ModelWeights weights = ModelWeights::load(config, checkpoint);
  DecoderModelOptions mo;
  mo.kv_dtype = o.kv_cache_dtype;
  mo.num_pages = 16;
  mo.max_model_len = 256;
  DecoderModel model(config, weights, mo);
  std::vector<int32_t> rows(70);
  std::iota(rows.begin(), rows.end(), 0);
  const std::vector<ScheduledSequence> prefill = {{{1, 2, 3, 4, 5}, 0, 70}};
  const std::vector<float> logits =
      model.forward(prompt, build_attention_metadata({}, prefill, 16, 16), rows);
  const auto vocab = static_cast<size_t>(config.vocab_size);
  for (size_t j = 1; j < 70; ++j) {
    ASSERT_TRUE(out.prompt_logprobs[j].has_value()) << j;
    const TokenLogprobs want = row_logprobs_reference(
        std::span<const float>(logits.data() + (j - 1) * vocab, vocab), prompt[j], 2);
    EXPECT_FLOAT_EQ(out.prompt_logprobs[j]->logprob, want.logprob) << "token " << j;
    EXPECT_EQ(out.prompt_logprobs[j]->top, want.top) << "token " << j;
  }
  const TokenLogprobs first = row_logprobs_reference(
      std::span<const float>(logits.data() + 69 * vocab, vocab), out.output[0], 0);
  EXPECT_FLOAT_EQ(out.output_logprobs[0].logprob, first.logprob);
}

TEST(LlmEngine, BadRequestsAndOptionsAreRefused) {
  const std::string dir = tiny_model_dir("bad");
  LlmEngine engine(options(dir));
  EXPECT_QUENCH_ERROR(engine.add_request({1, 600}, greedy(4)),
                      {"prompt token 1 = 600", "[0, 512)"});
  EXPECT_QUENCH_ERROR(engine.add_request(std::vector<int32_t>(256, 3), greedy(4)),
                      {"256 tokens", "at most 255"});
  SamplingParams bad = greedy(4);
  bad.top_p = 1.5f;
  EXPECT_QUENCH_ERROR(engine.add_request({1}, bad), {"top_p 1.5"});
  EXPECT_FALSE(engine.has_unfinished());
  EngineOptions long_context = options(dir);
  long_context.max_model_len = 5000;
  EXPECT_QUENCH_ERROR(LlmEngine{long_context},
                      {"max_model_len 5000", "max_position_embeddings 4096"});
  EngineOptions small_cache = options(dir);
  small_cache.num_kv_pages = 4;
  EXPECT_QUENCH_ERROR(LlmEngine{small_cache}, {"holds 48 tokens", "max_model_len (256)"});
}

}  // namespace
}  // namespace quench
