// The scheduler without a model: prompts are cut into chunks that fit the token budget, decode
// rows come first and never exceed max_num_seqs sequences, a cache that runs out preempts the
// newest sequence (which later recomputes), and every page comes back when sequences finish.
#include "quench/engine/scheduler.h"

#include <gtest/gtest.h>

#include "harness/expect_error.h"

namespace quench {
namespace {

std::unique_ptr<Sequence> request(int64_t id, int32_t prompt_len) {
  auto s = std::make_unique<Sequence>();
  s->id = id;
  s->prompt.assign(static_cast<size_t>(prompt_len), 7);
  return s;
}

// What the engine does after a model step: a sequence whose chunk reached its end gets a token;
// it finishes after `max_output` tokens.
std::vector<std::unique_ptr<Sequence>> finish_step(Scheduler& scheduler, const ScheduledStep& step,
                                                   size_t max_output) {
  for (const auto* list : {&step.decode, &step.prefill})
    for (const ScheduledChunk& c : *list) {
      if (c.seq->num_computed + c.num_new != c.seq->num_tokens()) continue;
      c.seq->output.push_back(9);
      if (c.seq->output.size() >= max_output) c.seq->status = SequenceStatus::kFinished;
    }
  return scheduler.complete(step);
}

SchedulerConfig config(int32_t budget, int32_t seqs, int32_t pages) {
  SchedulerConfig c;
  c.max_num_batched_tokens = budget;
  c.max_num_seqs = seqs;
  c.page_size = 16;
  c.num_pages = pages;
  c.max_model_len = 128;
  return c;
}

TEST(Scheduler, LongPromptIsChunkedToTheBudgetThenDecodes) {
  Scheduler scheduler(config(16, 4, 64));
  Sequence* s = scheduler.add(request(0, 50));
  std::vector<int32_t> chunks;
  for (int i = 0; i < 4; ++i) {
    const ScheduledStep step = scheduler.schedule();
    ASSERT_EQ(step.prefill.size(), 1u);
    EXPECT_TRUE(step.decode.empty());
    chunks.push_back(step.prefill[0].num_new);
    finish_step(scheduler, step, 3);
  }
  EXPECT_EQ(chunks, (std::vector<int32_t>{16, 16, 16, 2}));
  EXPECT_EQ(s->output.size(), 1u);  // the last chunk's row sampled the first token
  const ScheduledStep decode = scheduler.schedule();
  ASSERT_EQ(decode.decode.size(), 1u);
  EXPECT_EQ(decode.decode[0].seq->num_computed, 50);
  EXPECT_EQ(s->pages.size(), 4u);  // 51 tokens
}

TEST(Scheduler, DecodeRowsFirstAndAtMostMaxNumSeqsRunning) {
  Scheduler scheduler(config(64, 2, 64));
  for (int i = 0; i < 3; ++i)
    scheduler.add(request(i, 10));
  ScheduledStep first = scheduler.schedule();
  EXPECT_EQ(first.prefill.size(), 2u);  // the third waits for a free sequence slot
  EXPECT_EQ(scheduler.num_waiting(), 1);
  finish_step(scheduler, first, 2);
  const ScheduledStep second = scheduler.schedule();
  EXPECT_EQ(second.decode.size(), 2u);
  EXPECT_TRUE(second.prefill.empty());
  finish_step(scheduler, second, 2);  // both finish: their slots and pages free up
  const ScheduledStep third = scheduler.schedule();
  ASSERT_EQ(third.prefill.size(), 1u);
  EXPECT_EQ(third.prefill[0].seq->id, 2);
}

TEST(Scheduler, RunningOutOfPagesPreemptsTheNewestAndEveryPageReturns) {
  // 9 usable pages of 16 tokens; three sequences of 40-token prompts need 3 pages each, and
  // a 4th page each once they pass 48 tokens.
  Scheduler scheduler(config(256, 8, 10));
  for (int i = 0; i < 3; ++i)
    scheduler.add(request(i, 40));
  int preempted = 0, steps = 0;
  std::vector<std::unique_ptr<Sequence>> done;
  while (scheduler.has_unfinished() && steps < 500) {
    const ScheduledStep step = scheduler.schedule();
    ASSERT_FALSE(step.empty());
    preempted += step.num_preempted;
    EXPECT_LE(step.num_rows(), 256);
    for (auto& s : finish_step(scheduler, step, 30))
      done.push_back(std::move(s));
    ++steps;
  }
  EXPECT_EQ(done.size(), 3u);
  EXPECT_GT(preempted, 0);
  for (const auto& s : done)
    EXPECT_EQ(s->output.size(), 30u);
  EXPECT_GT(done.back()->num_preemptions, 0);  // the newest was preempted, so it finished last
  EXPECT_EQ(scheduler.pages().free_pages(), 9);
}

TEST(Scheduler, BadConfigAndPromptsAreErrors) {
  EXPECT_QUENCH_ERROR(Scheduler(config(16, 4, 8)), {"holds 112 tokens", "max_model_len (128)"});
  EXPECT_QUENCH_ERROR(Scheduler(config(0, 4, 64)), {"max_num_batched_tokens 0"});
  Scheduler scheduler(config(16, 4, 64));
  EXPECT_QUENCH_ERROR(scheduler.add(request(5, 0)), {"request 5", "empty"});
  EXPECT_QUENCH_ERROR(scheduler.add(request(6, 128)), {"request 6", "128 tokens", "at most 127"});
}

}  // namespace
}  // namespace quench
