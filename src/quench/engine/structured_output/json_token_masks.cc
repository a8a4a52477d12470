#include "quench/engine/structured_output/json_token_masks.h"

#include "quench/tokenizer/tokenizer.h"

namespace quench {

JsonTokenMasks::JsonTokenMasks(const Tokenizer& tokenizer) {
  bytes_.resize(static_cast<size_t>(tokenizer.vocab_size()));
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    if (tokenizer.is_special(id)) continue;
    std::string& bytes = bytes_[static_cast<size_t>(id)];
    bytes = tokenizer.token_bytes(id, true, true);
    if (!bytes.empty()) by_first_byte_[static_cast<unsigned char>(bytes[0])].push_back(id);
  }
}

const std::vector<uint32_t>& JsonTokenMasks::allowed_bits(const JsonSchemaPrefix& prefix) {
  const std::string key = prefix.key();
  auto it = cache_.find(key);
  if (it != cache_.end()) return *it->second;
  auto mask = std::make_shared<std::vector<uint32_t>>((bytes_.size() + 31) / 32, 0u);
  // Tokens by their first byte: a refused first byte refuses its whole group at one test (most
  // groups, outside strings), and an accepted one leaves each token's other bytes to test.
  for (int byte = 0; byte < 256; ++byte) {
    const std::vector<int32_t>& group = by_first_byte_[static_cast<size_t>(byte)];
    if (group.empty()) continue;
    const char first = static_cast<char>(byte);
    JsonSchemaPrefix after_first = prefix;
    if (!after_first.feed(std::string_view(&first, 1))) continue;
    for (int32_t id : group) {
      const std::string& bytes = bytes_[static_cast<size_t>(id)];
      JsonSchemaPrefix next = after_first;
      if (next.feed(std::string_view(bytes).substr(1)))
        (*mask)[static_cast<size_t>(id) / 32] |= 1u << (id % 32);
    }
  }
  if (cache_.size() >= kMaxCached) cache_.clear();
  return *cache_.emplace(key, std::move(mask)).first->second;
}

}  // namespace quench
