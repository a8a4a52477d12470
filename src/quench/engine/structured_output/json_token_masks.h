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
  // [vocab_size] 1 = allowed. Special tokens and ids without bytes are never allowed.
  const std::vector<uint8_t>& allowed(const JsonSchemaPrefix& prefix);
  // The same mask packed as logit edits take it (RowLogitEdits::allowed_bits: bit t % 32 of word
  // t / 32), cached beside it: a structured row packed its 128k-entry mask every step.
  const std::vector<uint32_t>& allowed_bits(const JsonSchemaPrefix& prefix);

 private:
  struct Mask {
    std::vector<uint8_t> allowed;
    std::vector<uint32_t> bits;
  };
  const Mask& mask(const JsonSchemaPrefix& prefix);

  static constexpr size_t kMaxCached = 4096;
  std::vector<std::string> bytes_;                       // per token id; empty = never allowed
  std::array<std::vector<int32_t>, 256> by_first_byte_;  // the ids of bytes_ by their first byte
  std::unordered_map<std::string, std::shared_ptr<const Mask>> cache_;
};

}  // namespace quench
