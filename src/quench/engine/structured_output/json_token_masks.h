// Structured output's vocabulary masks: the tokens a JsonSchemaPrefix may take next, for one
// tokenizer. The tokens are walked in byte order, keeping one prefix state per depth of the
// current token's bytes: a token feeds only the bytes past the ones it shares with the token
// before it, a refused prefix refuses every token that starts with it at once, and the states are
// assigned into one another (no allocation per token); inside a string that takes every
// printable ASCII byte but '"' and '\\' as itself, tokens of only such bytes are taken unwalked
// (most of a vocabulary: the first mask inside a plain string 10 ms -> 0.7 ms on a synthetic 128k
// vocabulary, 2 cores; a grammar's string alike), and where such bytes step the prefix uniformly,
// one set of them per byte (a counted class, a maxLength, a key that can no longer be a property
// name), tokens are decided by those sets without a walk (a pattern's {1,40} 12 ms -> 2.5 ms, a
// union's key 11 ms -> 3.3 ms); a grammar's states are numbered instead, each byte's step
// from each computed once per mask (GrammarSteps). Masks are cached by the prefix's key (which
// names its schema; a string's inside, for one, always gives the same mask), at most kMaxCached
// of them, shared by every request and schema of the engine.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "quench/engine/structured_output/grammar_steps.h"
#include "quench/engine/structured_output/json_schema_prefix.h"

namespace quench {

class Tokenizer;

class JsonTokenMasks {
 public:
  // stop_ids: the end-of-sequence tokens, allowed where raw text may end
  // (JsonSchemaPrefix::may_stop).
  JsonTokenMasks(const Tokenizer& tokenizer, std::vector<int32_t> stop_ids);
  // The tokens the prefix may take next, packed as logit edits take them
  // (RowLogitEdits::allowed_bits: token t is bit t % 32 of word t / 32). Special tokens and ids
  // without bytes are never allowed, but for the stop tokens where the prefix may stop.
  const std::vector<uint32_t>& allowed_bits(const JsonSchemaPrefix& prefix);

 private:
  // Packed only: 16 KB a mask for a 128k vocabulary, so a full cache holds 64 MB (a byte per
  // token beside it took 9 times that).
  static constexpr size_t kMaxCached = 4096;
  int32_t vocab_size_;
  std::vector<int32_t> stop_ids_;
  // The ids of tokens with bytes (special tokens and ids without bytes are never allowed), in
  // byte order, and their bytes in that order, one after the other: the mask's walk reads them
  // front to back (read through a per-id table, the first mask inside a key took twice as long).
  std::vector<int32_t> sorted_;
  std::string sorted_bytes_;
  std::vector<size_t> sorted_start_;  // sorted token i: sorted_start_[i] .. sorted_start_[i + 1]
  std::string_view sorted_token(size_t i) const {
    return std::string_view(sorted_bytes_)
        .substr(sorted_start_[i], sorted_start_[i + 1] - sorted_start_[i]);
  }
  // shared_[i]: the bytes sorted_[i] shares at its start with sorted_[i - 1] (0 for the first).
  std::vector<int32_t> shared_;
  // plain_[i]: sorted_[i]'s bytes are all printable ASCII but '"' and '\\' (0x20..0x7e): where
  // each of those bytes leads a prefix back to its own key (the inside of a string without a
  // length, pattern or format), every such token is taken without walking it.
  std::vector<uint8_t> plain_;
  int32_t max_plain_bytes_ = 0;  // the longest token of plain bytes only
  // Per sorted token, decided by a uniform run of bytes (uniform_run in the .cc): 1 taken, 2
  // refused, 0 walked; reused across masks.
  std::vector<uint8_t> run_decisions_;
  // Where the prefix does not loop on every plain byte but on a run of them that steps it
  // uniformly (a counted class, a maxLength), the tokens that run decides; else null.
  const std::vector<uint8_t>* uniform_run_decisions(const JsonSchemaPrefix& prefix);
  std::vector<JsonSchemaPrefix> depth_states_;  // the walk's states, reused across masks
  GrammarSteps grammar_steps_;                  // a grammar's walk: its states, met this mask
  std::vector<int32_t> grammar_ids_;            // and the walk's, by depth
  std::unordered_map<std::string, std::shared_ptr<const std::vector<uint32_t>>> cache_;
};

}  // namespace quench
