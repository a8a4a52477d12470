// Structured output's vocabulary masks: the tokens a JsonSchemaPrefix may take next, for one
// tokenizer, each token's bytes fed to a copy of the prefix (tokens grouped by first byte, so that
// a refused first byte refuses its group at once). Masks are cached by the prefix's key
// (which names its schema; a string's inside, for one, always gives the same mask), at most
// kMaxCached of them, shared by every request and schema of the engine.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "quench/engine/structured_output/json_schema_prefix.h"

namespace quench {

class Tokenizer;

class JsonTokenMasks {
 public:
  explicit JsonTokenMasks(const Tokenizer& tokenizer);
  // The tokens the prefix may take next, packed as logit edits take them
  // (RowLogitEdits::allowed_bits: token t is bit t % 32 of word t / 32). Special tokens and ids
  // without bytes are never allowed.
  const std::vector<uint32_t>& allowed_bits(const JsonSchemaPrefix& prefix);

 private:
  // Packed only: 16 KB a mask for a 128k vocabulary, so a full cache holds 64 MB (a byte per
  // token beside it took 9 times that).
  static constexpr size_t kMaxCached = 4096;
  std::vector<std::string> bytes_;                       // per token id; empty = never allowed
  std::array<std::vector<int32_t>, 256> by_first_byte_;  // the ids of bytes_ by their first byte
  std::unordered_map<std::string, std::shared_ptr<const std::vector<uint32_t>>> cache_;
};

}  // namespace quench
