// A HuggingFace tokenizer.json of the byte-level BPE family (Llama-3, Qwen2/3, Mistral-Nemo,
// GPT-2 and their kin), read and run in C++ so that quench needs no Python at run time:
//   added tokens   matched first in the raw text (longest, leftmost), honouring lstrip/rstrip;
//   normalizer     null, NFC, or a Sequence of those;
//   pre_tokenizer  Split (a Unicode regex, behavior Isolated), ByteLevel (add_prefix_space,
//                  use_regex with GPT-2's pattern), or a Sequence of those;
//   model          BPE (bpe_model.h), merges as "a b" strings or [a, b] pairs, ignore_merges;
//   post_processor TemplateProcessing (single), ByteLevel, or a Sequence: special tokens added
//                  when encode is asked to;
//   decoder        ByteLevel, or null (concatenation).
// Anything else fails at load naming the component and the supported types. The fixtures in
// tests/data/tokenizer pin agreement with HF's own encoder and decoder
// (tools/make_tokenizer_fixtures.py).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "quench/tokenizer/bpe_model.h"
#include "quench/tokenizer/regex_splitter.h"

namespace quench {

class Tokenizer {
 public:
  // Throws quench::Error naming the file and the component it cannot read.
  static Tokenizer from_file(const std::string& path);
  static Tokenizer from_json(std::string_view json_text, const std::string& source);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Throws naming the byte offset when `text` is not valid UTF-8.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const;
  // Invalid UTF-8 produced by a partial sequence of byte tokens becomes U+FFFD. Throws naming an
  // id the vocabulary lacks, unless skip_unknown_ids: a model's output may hold ids past the
  // tokenizer's (padding rows of a rounded-up embedding), which have no text, as in HF.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false,
                     bool skip_unknown_ids = false) const;

  // The raw bytes one token contributes to decode()'s text before the UTF-8 repair (decode is
  // utf8_lossy of their concatenation, so text can be built a token at a time). Empty for a
  // skipped special or unknown id; throws like decode otherwise.
  std::string token_bytes(int32_t id, bool skip_special_tokens, bool skip_unknown_ids) const;

  int32_t vocab_size() const { return vocab_size_; }  // the largest id + 1
  std::optional<int32_t> token_to_id(const std::string& token) const;
  // "" for an id no token has.
  const std::string& id_to_token(int32_t id) const;
  bool is_special(int32_t id) const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  int32_t vocab_size_ = 0;
};

}  // namespace quench
