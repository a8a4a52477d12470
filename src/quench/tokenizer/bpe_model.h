// The BPE model of a tokenizer.json ("model": {"type": "BPE", "vocab": {...}, "merges": [...]}):
// a word (one pre-tokenized piece, already in byte-level symbols) starts as one symbol per code
// point and repeatedly merges the adjacent pair with the lowest merge rank, the leftmost first
// among equals, until no pair has a rank; each remaining symbol is a vocabulary token. With
// ignore_merges (Llama-3), a word that is itself in the vocabulary is that one token.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace quench {

class BpeModel {
 public:
  // merges: pairs (left, right) in rank order. Throws quench::Error when a merge names a symbol
  // or a result that is not in the vocabulary, or ids repeat.
  BpeModel(std::unordered_map<std::string, int32_t> vocab,
           const std::vector<std::pair<std::string, std::string>>& merges, bool ignore_merges);

  // Appends the ids of `word`. Throws naming the symbol when a symbol has no id (a vocabulary
  // without the byte-level alphabet).
  void encode_word(std::string_view word, std::vector<int32_t>& ids) const;

  const std::unordered_map<std::string, int32_t>& vocab() const { return vocab_; }

 private:
  std::unordered_map<std::string, int32_t> vocab_;
  std::unordered_map<std::string, int32_t> merge_rank_;  // "left\x00right" -> rank
  bool ignore_merges_ = false;
  // Words repeat (" the", " of"): their ids are kept, up to a bound, behind a lock so that the
  // server's threads share one tokenizer.
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace quench
