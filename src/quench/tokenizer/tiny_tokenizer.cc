#include "quench/tokenizer/tiny_tokenizer.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "quench/core/error.h"
#include "quench/tokenizer/byte_level.h"
#include "quench/tokenizer/regex_splitter.h"
#include "quench/tokenizer/utf8.h"

namespace quench {
namespace {

const char* kSplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

const char* kCorpus =
    "quench is an inference engine for large language models. It serves requests with "
    "continuous batching and chunked prefill over a paged key-value cache stored in FP8, and its "
    "attention kernels run on the tensor cores of the GPU. The quick brown fox jumps over the lazy "
    "dog. A model reads a prompt, computes the keys and values of every token, and then generates "
    "one token at a time: each new token attends to all the tokens before it. The scheduler "
    "decides "
    "which requests run in each step, the sampler picks the next token, and the server streams the "
    "text back to the client as it is generated. Prefill is compute-bound and decode is "
    "memory-bound; that is why the cache is quantized and why the kernels are tuned for the "
    "hardware they run on. Numbers such as 128, 4096 and 32768 are context lengths; 448 is the "
    "largest e4m3 value. What time is it? It's 12:45, and we've got tokens to generate!\n";

using Word = std::vector<std::string>;

}  // namespace

std::string tiny_tokenizer_json(int32_t vocab_size) {
  constexpr int32_t kFirstByteId = 6;
  QUENCH_REQUIRE(vocab_size >= kFirstByteId + 256, "tiny tokenizer vocab_size ", vocab_size,
                 " must be >= ", kFirstByteId + 256, " (6 special tokens and 256 bytes)");
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  std::map<std::string, int32_t> ids;
  const char* specials[] = {"<|pad|>",           "<|begin_of_text|>",
                            "<|end_of_text|>",   "<|start_header_id|>",
                            "<|end_header_id|>", "<|eot_id|>"};
  // The special tokens are in the model's vocabulary too (as HF's trainer writes them), so that
  // every reader keeps their ids.
  for (int32_t id = 0; id < kFirstByteId; ++id)
    ids[specials[id]] = id;
  for (int b = 0; b < 256; ++b)
    ids[byte_level_symbol(static_cast<uint8_t>(b))] = kFirstByteId + b;

  // Words of the corpus (byte-level symbols) with their counts.
  std::vector<std::string> pieces;
  RegexSplitter(kSplitPattern).split(kCorpus, pieces);
  std::map<std::string, int64_t> word_counts;
  for (const std::string& p : pieces)
    ++word_counts[to_byte_level(p)];
  std::vector<std::pair<Word, int64_t>> words;
  for (const auto& [w, n] : word_counts)
    words.emplace_back(split_code_points(w), n);

  nlohmann::ordered_json merges = nlohmann::ordered_json::array();
  int32_t next_id = kFirstByteId + 256;
  while (next_id < vocab_size) {
    std::map<std::pair<std::string, std::string>, int64_t> pair_counts;
    for (const auto& [w, n] : words)
      for (size_t i = 0; i + 1 < w.size(); ++i)
        pair_counts[{w[i], w[i + 1]}] += n;
    // The most frequent pair not yet a token; ties go to the first in byte order (deterministic).
    const std::pair<std::string, std::string>* best = nullptr;
    int64_t best_count = 0;
    for (const auto& [pair, n] : pair_counts) {
      if (n > best_count && !ids.count(pair.first + pair.second)) {
        best = &pair;
        best_count = n;
      }
    }
    QUENCH_REQUIRE(best != nullptr, "tiny tokenizer: the corpus has no pair left for id ", next_id);
    const std::string merged = best->first + best->second;
    ids[merged] = next_id++;
    merges.push_back({best->first, best->second});
    const std::pair<std::string, std::string> chosen = *best;
    for (auto& [w, n] : words) {
      Word out;
      for (size_t i = 0; i < w.size(); ++i) {
        if (i + 1 < w.size() && w[i] == chosen.first && w[i + 1] == chosen.second) {
          out.push_back(merged);
          ++i;
        } else {
          out.push_back(w[i]);
        }
      }
      w = std::move(out);
    }
  }
  std::vector<std::pair<int32_t, std::string>> by_id;
  for (const auto& [token, id] : ids)
    by_id.emplace_back(id, token);
  std::sort(by_id.begin(), by_id.end());
  for (const auto& [id, token] : by_id)
    vocab[token] = id;

  nlohmann::ordered_json added = nlohmann::ordered_json::array();
  for (int32_t id = 0; id < kFirstByteId; ++id) {
    added.push_back({{"id", id},
                     {"content", specials[id]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  nlohmann::ordered_json j;
  j["version"] = "1.0";
  j["added_tokens"] = added;
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers",
                         {{{"type", "Split"},
                           {"pattern", {{"Regex", kSplitPattern}}},
                           {"behavior", "Isolated"},
                           {"invert", false}},
                          {{"type", "ByteLevel"},
                           {"add_prefix_space", false},
                           {"trim_offsets", true},
                           {"use_regex", false}}}}};
  j["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single",
       {{{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}},
        {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
      {"pair", nlohmann::ordered_json::array()},
      {"special_tokens",
       {{"<|begin_of_text|>",
         {{"id", "<|begin_of_text|>"}, {"ids", {1}}, {"tokens", {"<|begin_of_text|>"}}}}}}};
  j["decoder"] = {{"type", "ByteLevel"},
                  {"add_prefix_space", true},
                  {"trim_offsets", true},
                  {"use_regex", true}};
  j["model"] = {{"type", "BPE"},          {"dropout", nullptr},    {"unk_token", nullptr},
                {"byte_fallback", false}, {"ignore_merges", true}, {"vocab", vocab},
                {"merges", merges}};
  return j.dump(1) + "\n";
}

}  // namespace quench
