// Prefix caching: the cache answers only for the exact tokens after the exact parent; the
// scheduler hands a later request the full pages an earlier one computed (shared while both run,
// reclaimed once freed, never the page holding the last token, which must be computed for its
// logits) and the KV pages come back when the requests end; the engine's greedy tokens are the
// same with and without it, bit for bit.
#include "quench/engine/prefix_cache.h"

#include <gtest/gtest.h>

#include "harness/scratch_dir.h"
#include "quench/engine/llm_engine.h"
#include "quench/engine/scheduler.h"
#include "quench/model/tiny_model.h"

namespace quench {
namespace {

TEST(PrefixCache, FindsOnlyTheSameTokensAfterTheSameParent) {
  PrefixCache cache;
  const std::vector<int32_t> a = {1, 2, 3, 4}, b = {1, 2, 3, 5};
  const uint64_t ha = PrefixCache::hash_page(PrefixCache::kRootHash, a);
  EXPECT_NE(ha, PrefixCache::hash_page(PrefixCache::kRootHash, b));
  EXPECT_NE(ha, PrefixCache::hash_page(ha, a));  // the chain: the same page after another parent
  cache.insert(ha, PrefixCache::kRootHash, a, 7);
  EXPECT_EQ(cache.find(ha, PrefixCache::kRootHash, a), 7);
  EXPECT_FALSE(cache.find(ha, PrefixCache::kRootHash, b).has_value());  // as if the hashes collided
  EXPECT_FALSE(cache.find(ha, 42, a).has_value());
  cache.insert(ha, PrefixCache::kRootHash, a, 8);  // the first page stays
  EXPECT_EQ(cache.find(ha, PrefixCache::kRootHash, a), 7);
  cache.erase_page(7);
  EXPECT_FALSE(cache.find(ha, PrefixCache::kRootHash, a).has_value());
  EXPECT_EQ(cache.size(), 0u);
}

std::unique_ptr<Sequence> request(int64_t id, std::vector<int32_t> prompt) {
  auto s = std::make_unique<Sequence>();
  s->id = id;
  s->prompt = std::move(prompt);
  return s;
}

// What the engine does after a model step: a chunk that reaches its sequence's end samples a
// token; a sequence with `outputs` tokens finishes.
void finish_step(Scheduler& scheduler, const ScheduledStep& step, size_t outputs) {
  for (const auto* list : {&step.decode, &step.prefill})
    for (const ScheduledChunk& c : *list) {
      if (c.seq->num_computed + c.num_new != c.seq->num_tokens()) continue;
      c.seq->output.push_back(9);
      if (c.seq->output.size() >= outputs) c.seq->status = SequenceStatus::kFinished;
    }
  scheduler.complete(step);
}

// Runs steps until every request has finished.
void run_to_end(Scheduler& scheduler, size_t outputs) {
  for (int i = 0; i < 200 && scheduler.has_unfinished(); ++i)
    finish_step(scheduler, scheduler.schedule(), outputs);
}

TEST(PrefixCacheScheduler, LaterRequestsTakeTheFullPagesAndComputeTheRest) {
  SchedulerConfig c;
  c.max_num_batched_tokens = 256;
  c.page_size = 16;
  c.num_pages = 32;
  c.max_model_len = 128;
  Scheduler scheduler(c);
  std::vector<int32_t> prompt(40);
  for (int32_t i = 0; i < 40; ++i)
    prompt[static_cast<size_t>(i)] = 100 + i;
  Sequence* first = scheduler.add(request(0, prompt));
  finish_step(scheduler, scheduler.schedule(), 3);  // first's prefill: pages 0-1 full, indexed
  // A request with the same 40 tokens, while the first still runs: shares its two full pages.
  Sequence* second = scheduler.add(request(1, prompt));
  ScheduledStep step = scheduler.schedule();
  ASSERT_EQ(step.prefill.size(), 1u);
  EXPECT_EQ(step.prefill[0].seq, second);
  EXPECT_EQ(step.prefill[0].num_new, 8);  // 40 - 32
  EXPECT_EQ(second->pages[0], first->pages[0]);
  EXPECT_EQ(second->pages[1], first->pages[1]);
  EXPECT_EQ(scheduler.pages().ref_count(first->pages[0]), 2);
  EXPECT_EQ(scheduler.prefix_hit_tokens(), 32);
  EXPECT_EQ(scheduler.prefix_query_tokens(), 80);
  finish_step(scheduler, step, 3);
  run_to_end(scheduler, 3);
  EXPECT_EQ(scheduler.pages().free_pages(), 31);  // every page back
  // After both ended: a 32-token prompt that is exactly the two cached pages takes the first only
  // (its last token must be computed), reclaimed from the free pages.
  Sequence* third =
      scheduler.add(request(2, std::vector<int32_t>(prompt.begin(), prompt.begin() + 32)));
  step = scheduler.schedule();
  ASSERT_EQ(step.prefill.size(), 1u);
  EXPECT_EQ(step.prefill[0].num_new, 16);
  EXPECT_EQ(third->num_cached_prompt_tokens, 16);
  finish_step(scheduler, step, 1);
  run_to_end(scheduler, 1);
  // With caching off nothing is reused.
  c.enable_prefix_caching = false;
  Scheduler plain(c);
  plain.add(request(0, prompt));
  finish_step(plain, plain.schedule(), 3);
  plain.add(request(1, prompt));
  step = plain.schedule();
  ASSERT_EQ(step.prefill.size(), 1u);
  EXPECT_EQ(step.prefill[0].num_new, 40);
  EXPECT_EQ(plain.prefix_hit_tokens(), 0);
}

TEST(PrefixCacheEngine, GreedyTokensAreTheSameWithAndWithoutIt) {
  const std::string dir = testing_support::scratch_dir("quench_prefix_cache_test", "tiny");
  write_tiny_model(dir, TinyModelSpec{});
  std::vector<int32_t> system(37);
  for (int32_t i = 0; i < 37; ++i)
    system[static_cast<size_t>(i)] = 10 + (i * 13) % 400;
  std::vector<std::vector<int32_t>> prompts;
  for (int32_t r = 0; r < 5; ++r) {
    std::vector<int32_t> p = system;
    for (int32_t k = 0; k < 3 + 7 * r; ++k)
      p.push_back(20 + (k * 29 + r * 5) % 450);
    prompts.push_back(p);
  }
  prompts.push_back(prompts[2]);  // a repeat: all but its last page from the cache
  SamplingParams s;
  s.max_tokens = 24;  // past a page boundary: generated pages are indexed too
  s.ignore_eos = true;
  EngineOptions o;
  o.model_dir = dir;
  o.max_model_len = 256;
  o.max_num_batched_tokens = 64;
  o.max_num_seqs = 2;  // later requests start after earlier ones indexed their pages
  o.enable_prefix_caching = false;
  LlmEngine plain(o);
  const auto want = plain.generate(prompts, s);
  o.enable_prefix_caching = true;
  LlmEngine cached(o);
  const auto got = cached.generate(prompts, s);
  for (size_t i = 0; i < prompts.size(); ++i)
    EXPECT_EQ(got[i].output, want[i].output) << "prompt " << i;
  EXPECT_GT(cached.prefix_hit_tokens(), 100);
  EXPECT_EQ(plain.prefix_hit_tokens(), 0);
}

}  // namespace
}  // namespace quench
