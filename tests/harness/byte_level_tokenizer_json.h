// tokenizer.json text of a byte-level BPE tokenizer without merges, for tests and benchmarks that
// need a vocabulary of chosen tokens (structured output's masks read token bytes only).
#pragma once

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "quench/tokenizer/tokenizer.h"

namespace quench::testing_support {

// vocab: byte-level token text -> id; added_tokens: tokenizer.json's added_tokens array.
std::string byte_level_tokenizer_json(const nlohmann::json& vocab,
                                      const nlohmann::ordered_json& added_tokens);

// A tokenizer whose tokens are `tokens`' bytes (ids in their order; no merges, no special
// tokens): structured output's masks read token bytes only. `name` labels its errors.
Tokenizer byte_level_tokenizer(const std::set<std::string>& tokens, const std::string& name);

}  // namespace quench::testing_support
