#include "quench/tokenizer/bpe_model.h"

#include <limits>

#include "quench/core/error.h"
#include "quench/tokenizer/utf8.h"

namespace quench {
namespace {

constexpr size_t kMaxCachedWords = 1 << 16;

std::string pair_key(std::string_view left, std::string_view right) {
  std::string key;
  key.reserve(left.size() + right.size() + 1);
  key.append(left);
  key += '\0';
  key.append(right);
  return key;
}

}  // namespace

BpeModel::BpeModel(std::unordered_map<std::string, int32_t> vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges,
                   bool ignore_merges)
    : vocab_(std::move(vocab)), ignore_merges_(ignore_merges) {
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    QUENCH_REQUIRE(vocab_.count(left + right), "tokenizer merge ", rank, " (\"", left, "\" + \"",
                   right, "\") makes \"", left + right, "\", which is not in the vocabulary");
    // A repeated merge keeps its first (best) rank, as HF does.
    merge_rank_.emplace(pair_key(left, right), static_cast<int32_t>(rank));
  }
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& ids) const {
  if (word.empty()) return;
  {
    const std::lock_guard<std::mutex> lock(cache_mutex_);
    const auto hit = cache_.find(std::string(word));
    if (hit != cache_.end()) {
      ids.insert(ids.end(), hit->second.begin(), hit->second.end());
      return;
    }
  }
  std::vector<int32_t> word_ids;
  const auto whole = vocab_.find(std::string(word));
  if (ignore_merges_ && whole != vocab_.end()) {
    word_ids.push_back(whole->second);
  } else {
    std::vector<std::string> symbols = split_code_points(word);
    while (symbols.size() > 1) {
      int32_t best_rank = std::numeric_limits<int32_t>::max();
      size_t best = 0;
      for (size_t i = 0; i + 1 < symbols.size(); ++i) {
        const auto it = merge_rank_.find(pair_key(symbols[i], symbols[i + 1]));
        if (it != merge_rank_.end() && it->second < best_rank) {
          best_rank = it->second;
          best = i;
        }
      }
      if (best_rank == std::numeric_limits<int32_t>::max()) break;
      symbols[best] += symbols[best + 1];
      symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    }
    for (const std::string& s : symbols) {
      const auto it = vocab_.find(s);
      QUENCH_REQUIRE(it != vocab_.end(), "tokenizer: symbol \"", s,
                     "\" has no id (the vocabulary lacks part of the byte-level alphabet)");
      word_ids.push_back(it->second);
    }
  }
  ids.insert(ids.end(), word_ids.begin(), word_ids.end());
  const std::lock_guard<std::mutex> lock(cache_mutex_);
  if (cache_.size() < kMaxCachedWords) cache_.emplace(std::string(word), std::move(word_ids));
}

}  // namespace quench
