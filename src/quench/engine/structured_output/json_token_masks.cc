#include "quench/engine/structured_output/json_token_masks.h"

#include "quench/tokenizer/tokenizer.h"

namespace quench {

JsonTokenMasks::JsonTokenMasks(const Tokenizer& tokenizer) {
  bytes_.resize(static_cast<size_t>(tokenizer.vocab_size()));
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    if (tokenizer.is_special(id)) continue;
    bytes_[static_cast<size_t>(id)] = tokenizer.token_bytes(id, true, true);
  }
}

const JsonTokenMasks::Mask& JsonTokenMasks::mask(const JsonSchemaPrefix& prefix) {
  const std::string key = prefix.key();
  auto it = cache_.find(key);
  if (it != cache_.end()) return *it->second;
  auto mask = std::make_shared<Mask>();
  mask->allowed.assign(bytes_.size(), 0);
  mask->bits.assign((bytes_.size() + 31) / 32, 0u);
  for (size_t id = 0; id < bytes_.size(); ++id) {
    if (bytes_[id].empty()) continue;
    JsonSchemaPrefix next = prefix;
    if (next.feed(bytes_[id])) {
      mask->allowed[id] = 1;
      mask->bits[id / 32] |= 1u << (id % 32);
    }
  }
  if (cache_.size() >= kMaxCached) cache_.clear();
  return *cache_.emplace(key, std::move(mask)).first->second;
}

const std::vector<uint8_t>& JsonTokenMasks::allowed(const JsonSchemaPrefix& prefix) {
  return mask(prefix).allowed;
}

const std::vector<uint32_t>& JsonTokenMasks::allowed_bits(const JsonSchemaPrefix& prefix) {
  return mask(prefix).bits;
}

}  // namespace quench
