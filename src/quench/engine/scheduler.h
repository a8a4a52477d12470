// Continuous batching with chunked prefill over a paged KV cache (pure CPU bookkeeping).
// Each step, under a budget of max_num_batched_tokens query rows and max_num_seqs sequences:
//   1. every running sequence past its prompt gets one decode row, oldest first (with n-gram
//      speculation, its drafts after it); when its next token needs a page and none is free, the
//      newest running sequence is preempted (its pages freed, back to the front of the queue,
//      recomputed from its tokens later);
//   2. running sequences still in their prompt, then waiting ones in arrival order, get prefill
//      chunks from what budget is left (a prompt longer than the budget spans several steps); an
//      admitted sequence first takes whatever full pages of its tokens the prefix cache holds
//      (prefix_cache.h) and computes only the rest.
// A sequence whose chunk reaches its last token gets logits this step and samples its next token.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "quench/engine/ngram_proposer.h"
#include "quench/engine/prefix_cache.h"
#include "quench/engine/sequence.h"
#include "quench/kv_cache/page_allocator.h"

namespace quench {

struct SchedulerConfig {
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 2048;
  int32_t page_size = 16;
  int32_t num_pages = 0;  // the cache's pages, page 0 (null) included
  int32_t max_model_len = 0;
  bool enable_prefix_caching = true;  // reuse the KV pages of prefixes computed before
  // n-gram speculative decoding for greedy requests without logprobs (ngram_proposer.h): their
  // decode rows carry drafts that the step verifies.
  NgramSpeculation speculation;

  void validate() const;  // throws quench::Error naming the field
};

struct ScheduledChunk {
  Sequence* seq = nullptr;
  // Rows this step: tokens [seq->num_computed, + num_new); for a decode row with drafts, the
  // sequence's last token and then the drafts.
  int32_t num_new = 0;
  std::vector<int32_t> draft;  // speculative tokens after the sequence's last one (decode only)
};

struct ScheduledStep {
  std::vector<ScheduledChunk> decode;   // one row each, plus its drafts
  std::vector<ScheduledChunk> prefill;  // chunks of prompts (or of a preempted sequence)
  int32_t num_preempted = 0;
  int32_t num_rows() const;
  bool empty() const { return decode.empty() && prefill.empty(); }
};

class Scheduler {
 public:
  explicit Scheduler(const SchedulerConfig& config);

  // Takes ownership; the request joins the waiting queue. Throws when its prompt is empty or
  // cannot fit max_model_len with at least one generated token, or could never fit the cache.
  Sequence* add(std::unique_ptr<Sequence> seq);

  // Plans one step and allocates its pages. An empty step means nothing is left to run.
  ScheduledStep schedule();

  // After the model ran `step`: advances num_computed of every chunk (a decode row's sequence to
  // all its tokens but the last sampled one: its accepted drafts are computed, its rejected ones
  // are written over when their positions come again); the caller has appended the sampled
  // tokens. Finished sequences (status kFinished) release their pages and are returned.
  std::vector<std::unique_ptr<Sequence>> complete(const ScheduledStep& step);

  // Removes request `id` wherever it is (waiting or running) and frees its pages; false when no
  // such request is in flight. Call between steps, never with a step outstanding.
  bool abort(int64_t id);

  bool has_unfinished() const { return !waiting_.empty() || !running_.empty(); }
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  const PageAllocator& pages() const { return allocator_; }
  // Prompt tokens admitted, and those of them whose KV came from the prefix cache.
  int64_t prefix_query_tokens() const { return prefix_query_tokens_; }
  int64_t prefix_hit_tokens() const { return prefix_hit_tokens_; }
  const SchedulerConfig& config() const { return config_; }

 private:
  // Makes seq's pages cover `tokens` tokens; false (nothing changed) when pages run out.
  bool reserve(Sequence& seq, int32_t tokens);
  // The drafts of a decode row (empty without speculation or room for it).
  std::vector<int32_t> drafts_for(const Sequence& s, int32_t budget) const;
  void release(Sequence& seq);
  void preempt(std::unique_ptr<Sequence> seq);
  // On admission: takes the cached pages of seq's leading full pages (leaving at least its last
  // token to compute, whose logits the step needs).
  void reuse_cached_prefix(Sequence& seq);
  // After a step: indexes the pages it filled.
  void index_full_pages(Sequence& seq);

  SchedulerConfig config_;
  PageAllocator allocator_;
  PrefixCache prefix_cache_;
  int64_t prefix_query_tokens_ = 0;
  int64_t prefix_hit_tokens_ = 0;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;  // admission order
};

}  // namespace quench
