// The byte-level alphabet of GPT-2-style BPE (tokenizer.json "ByteLevel"): every byte maps to one
// printable code point, so any byte string is a string of vocabulary symbols. Bytes 33-126,
// 161-172 and 174-255 map to themselves; the other 68 (controls, space, 127-160, 173) map to
// U+0100 onwards in byte order (space -> U+0120 'Ġ', newline -> U+010A 'Ċ').
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace quench {

// The UTF-8 text of byte b's symbol.
const std::string& byte_level_symbol(uint8_t b);

// Maps every byte of `bytes` to its symbol.
std::string to_byte_level(std::string_view bytes);

// The byte of a symbol code point, if it is one.
std::optional<uint8_t> byte_level_byte(uint32_t code_point);

}  // namespace quench
