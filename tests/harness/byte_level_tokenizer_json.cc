#include "harness/byte_level_tokenizer_json.h"

#include <cstdint>

#include "quench/tokenizer/byte_level.h"

namespace quench::testing_support {

std::string byte_level_tokenizer_json(const nlohmann::json& vocab,
                                      const nlohmann::ordered_json& added_tokens) {
  nlohmann::ordered_json j;
  j["version"] = "1.0";
  j["added_tokens"] = added_tokens;
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {{"type", "ByteLevel"},
                        {"add_prefix_space", false},
                        {"trim_offsets", true},
                        {"use_regex", false}};
  j["post_processor"] = nullptr;
  j["decoder"] = {{"type", "ByteLevel"},
                  {"add_prefix_space", true},
                  {"trim_offsets", true},
                  {"use_regex", true}};
  j["model"] = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"byte_fallback", false},
                {"ignore_merges", true},
                {"vocab", vocab},
                {"merges", nlohmann::ordered_json::array()}};
  return j.dump();
}

Tokenizer byte_level_tokenizer(const std::set<std::string>& tokens, const std::string& name) {
  nlohmann::json vocab = nlohmann::json::object();
  int32_t id = 0;
  for (const std::string& t : tokens)
    vocab[to_byte_level(t)] = id++;
  return Tokenizer::from_json(byte_level_tokenizer_json(vocab, nlohmann::ordered_json::array()),
                              name);
}

}  // namespace quench::testing_support
