#include "quench/engine/scheduler.h"

#include <algorithm>

#include "quench/core/error.h"
#include "quench/kv_cache/block_table.h"

namespace quench {

void SchedulerConfig::validate() const {
  QUENCH_REQUIRE(max_num_seqs >= 1, "max_num_seqs ", max_num_seqs, " must be >= 1");
  QUENCH_REQUIRE(max_num_batched_tokens >= 1, "max_num_batched_tokens ", max_num_batched_tokens,
                 " must be >= 1");
  QUENCH_REQUIRE(max_model_len >= 2, "max_model_len ", max_model_len, " must be >= 2");
  QUENCH_REQUIRE(page_size >= 1, "page_size ", page_size, " must be >= 1");
  const int64_t capacity = static_cast<int64_t>(num_pages - 1) * page_size;
  QUENCH_REQUIRE(num_pages >= 2 && capacity >= max_model_len, "the KV cache holds ",
                 std::max<int64_t>(capacity, 0), " tokens (", num_pages, " pages of ", page_size,
                 ", page 0 reserved), fewer than one max_model_len (", max_model_len,
                 ") sequence; lower max_model_len or give the cache more memory");
  speculation.validate();
}

int32_t ScheduledStep::num_rows() const {
  int32_t rows = 0;
  for (const auto* list : {&decode, &prefill})
    for (const ScheduledChunk& c : *list)
      rows += c.num_new;
  return rows;
}

Scheduler::Scheduler(const SchedulerConfig& config)
    : config_((config.validate(), config)), allocator_(config.num_pages) {}

Sequence* Scheduler::add(std::unique_ptr<Sequence> seq) {
  QUENCH_REQUIRE(!seq->prompt.empty(), "request ", seq->id, ": the prompt is empty");
  QUENCH_REQUIRE(static_cast<int64_t>(seq->prompt.size()) < config_.max_model_len, "request ",
                 seq->id, ": the prompt has ", seq->prompt.size(), " tokens; max_model_len ",
                 config_.max_model_len, " leaves room for at most ", config_.max_model_len - 1);
  seq->status = SequenceStatus::kWaiting;
  Sequence* raw = seq.get();
  waiting_.push_back(std::move(seq));
  return raw;
}

bool Scheduler::reserve(Sequence& seq, int32_t tokens) {
  const auto need = static_cast<int32_t>(pages_for_tokens(tokens, config_.page_size));
  const int32_t more = need - static_cast<int32_t>(seq.pages.size());
  if (more <= 0) return true;
  if (more > allocator_.free_pages()) return false;
  const std::vector<int32_t> fresh = allocator_.allocate(more);
  for (int32_t page : fresh)
    prefix_cache_.erase_page(page);  // about to hold other tokens
  seq.pages.insert(seq.pages.end(), fresh.begin(), fresh.end());
  return true;
}

void Scheduler::release(Sequence& seq) {
  for (int32_t page : seq.pages)
    allocator_.release(page);
  seq.pages.clear();
}

void Scheduler::reuse_cached_prefix(Sequence& seq) {
  seq.num_hashed_pages = 0;
  seq.last_page_hash = PrefixCache::kRootHash;
  seq.num_cached_prompt_tokens = 0;
  // Prompt logprobs need the logits of every prompt row: cached pages have none.
  if (!config_.enable_prefix_caching || seq.params.prompt_logprobs >= 0) return;
  const int32_t p = config_.page_size;
  while ((seq.num_hashed_pages + 1) * p <= seq.num_tokens() - 1) {
    const std::vector<int32_t> tokens = seq.tokens(seq.num_hashed_pages * p, p);
    const uint64_t hash = PrefixCache::hash_page(seq.last_page_hash, tokens);
    const std::optional<int32_t> page = prefix_cache_.find(hash, seq.last_page_hash, tokens);
    if (!page) break;
    if (allocator_.ref_count(*page) > 0) {
      allocator_.retain(*page);  // in use by another sequence: shared
    } else {
      allocator_.reclaim(*page);  // freed but intact
    }
    seq.pages.push_back(*page);
    seq.last_page_hash = hash;
    ++seq.num_hashed_pages;
  }
  seq.num_computed = seq.num_hashed_pages * p;
  seq.num_cached_prompt_tokens = seq.num_computed;
}

void Scheduler::index_full_pages(Sequence& seq) {
  if (!config_.enable_prefix_caching) return;
  const int32_t p = config_.page_size;
  while ((seq.num_hashed_pages + 1) * p <= seq.num_computed) {
    const std::vector<int32_t> tokens = seq.tokens(seq.num_hashed_pages * p, p);
    const uint64_t hash = PrefixCache::hash_page(seq.last_page_hash, tokens);
    prefix_cache_.insert(hash, seq.last_page_hash, tokens,
                         seq.pages[static_cast<size_t>(seq.num_hashed_pages)]);
    seq.last_page_hash = hash;
    ++seq.num_hashed_pages;
  }
}

std::vector<int32_t> Scheduler::drafts_for(const Sequence& s, int32_t budget) const {
  const NgramSpeculation& spec = config_.speculation;
  if (spec.num_speculative_tokens == 0 || !greedy_by_argmax(s.params)) return {};
  // Drafts stay inside the step's budget, max_model_len and the request's max_tokens (the last
  // verified row still samples one token after them).
  const int32_t room =
      std::min({spec.num_speculative_tokens, budget - 1, config_.max_model_len - s.num_tokens() - 1,
                s.params.max_tokens - static_cast<int32_t>(s.output.size()) - 1});
  if (room <= 0) return {};
  // The look-up reads the last kNgramLookback tokens: its cost per step stays bounded however
  // long the sequence grows.
  const int32_t from = std::max(0, s.num_tokens() - kNgramLookback);
  return propose_ngram_drafts(s.tokens(from, s.num_tokens() - from), spec, room);
}

void Scheduler::preempt(std::unique_ptr<Sequence> seq) {
  release(*seq);
  seq->num_computed = 0;
  seq->status = SequenceStatus::kWaiting;
  ++seq->num_preemptions;
  waiting_.push_front(std::move(seq));
}

ScheduledStep Scheduler::schedule() {
  ScheduledStep step;
  int32_t budget = config_.max_num_batched_tokens;

  // 1. Decode rows, oldest first; preempt from the newest end when pages run out.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence& s = *running_[i];
    if (!s.in_decode()) {
      ++i;
      continue;
    }
    std::vector<int32_t> draft = drafts_for(s, budget);
    // Drafts never cost another sequence its pages: without room for them, the row goes alone.
    if (!draft.empty() && !reserve(s, s.num_computed + 1 + static_cast<int32_t>(draft.size())))
      draft.clear();
    const int32_t rows = 1 + static_cast<int32_t>(draft.size());
    bool placed = true;
    while (!reserve(s, s.num_computed + rows)) {
      std::unique_ptr<Sequence> victim = std::move(running_.back());
      running_.pop_back();
      ++step.num_preempted;
      const bool self = victim.get() == &s;
      preempt(std::move(victim));
      if (self) {
        placed = false;
        break;
      }
    }
    if (!placed) break;
    step.decode.push_back({&s, rows, std::move(draft)});
    budget -= rows;
    ++i;
  }

  // 2. Prefill chunks: running sequences mid-prompt, then new admissions.
  auto chunk_for = [&](Sequence& s) {
    const int32_t held = static_cast<int32_t>(s.pages.size()) + allocator_.free_pages();
    const int32_t room = held * config_.page_size - s.num_computed;
    return std::min({s.num_tokens() - s.num_computed, budget, room});
  };
  for (const auto& owned : running_) {
    if (budget <= 0) break;
    Sequence& s = *owned;
    if (s.in_decode()) continue;
    const int32_t n = chunk_for(s);
    if (n <= 0) continue;
    reserve(s, s.num_computed + n);
    step.prefill.push_back({&s, n, {}});
    budget -= n;
  }
  while (budget > 0 && !waiting_.empty() &&
         static_cast<int32_t>(running_.size()) < config_.max_num_seqs) {
    Sequence& s = *waiting_.front();
    reuse_cached_prefix(s);
    const int32_t n = chunk_for(s);
    if (n <= 0) {  // no room yet: give the cached pages back, it waits holding nothing
      release(s);
      s.num_computed = 0;
      break;
    }
    prefix_query_tokens_ += s.num_tokens();
    prefix_hit_tokens_ += s.num_computed;
    reserve(s, s.num_computed + n);
    s.status = SequenceStatus::kRunning;
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
    // A one-token prompt is a decode row from the start: its rows must come first.
    (s.in_decode() ? step.decode : step.prefill).push_back({&s, n, {}});
    budget -= n;
  }
  return step;
}

bool Scheduler::abort(int64_t id) {
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
    if ((*it)->id != id) continue;
    waiting_.erase(it);  // a waiting sequence holds no pages (preemption freed them)
    return true;
  }
  for (auto it = running_.begin(); it != running_.end(); ++it) {
    if ((*it)->id != id) continue;
    release(**it);
    running_.erase(it);
    return true;
  }
  return false;
}

std::vector<std::unique_ptr<Sequence>> Scheduler::complete(const ScheduledStep& step) {
  for (const ScheduledChunk& c : step.decode) {
    c.seq->num_computed = c.seq->num_tokens() - 1;
    index_full_pages(*c.seq);
  }
  for (const ScheduledChunk& c : step.prefill) {
    c.seq->num_computed += c.num_new;
    index_full_pages(*c.seq);
  }
  std::vector<std::unique_ptr<Sequence>> finished;
  auto it = std::stable_partition(running_.begin(), running_.end(), [](const auto& s) {
    return s->status != SequenceStatus::kFinished;
  });
  for (auto f = it; f != running_.end(); ++f) {
    release(**f);
    finished.push_back(std::move(*f));
  }
  running_.erase(it, running_.end());
  return finished;
}

}  // namespace quench
