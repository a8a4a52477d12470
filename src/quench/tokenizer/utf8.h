// UTF-8 helpers for the tokenizer: validation, code point iteration and encoding.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace quench {

// The byte offset of the first invalid UTF-8 sequence (overlong forms, surrogates and code
// points past U+10FFFF count as invalid), or npos when `text` is valid.
size_t find_invalid_utf8(std::string_view text);

// The code point of a UTF-16 surrogate pair (high in D800-DBFF, low in DC00-DFFF), as a JSON
// "\uD83D\uDE00" escape pair writes U+1F600.
constexpr uint32_t surrogate_pair_code_point(uint32_t high, uint32_t low) {
  return 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
}

// A lead byte of a multi-byte UTF-8 sequence (C2-F4), for decoders fed a byte at a time: the
// continuation bytes still to come, the lead's bits of the code point, and the least code point
// a sequence of that length may encode (shorter would be overlong). False for any other byte.
struct Utf8Lead {
  int continuation_bytes = 0;
  uint32_t bits = 0;
  uint32_t least = 0;
};
bool utf8_lead(unsigned char c, Utf8Lead& lead);

// Appends the UTF-8 encoding of code point cp (<= U+10FFFF, not a surrogate).
void append_utf8(uint32_t cp, std::string& out);

// Splits valid UTF-8 into one string per code point.
std::vector<std::string> split_code_points(std::string_view text);

// Decodes valid UTF-8 into code points.
std::vector<uint32_t> decode_utf8(std::string_view text);

// The length of the longest prefix of `bytes` that does not end inside a sequence more bytes could
// still complete: utf8_lossy of that prefix is final, whatever follows.
size_t utf8_settled_prefix(std::string_view bytes);

// Replaces each invalid sequence with U+FFFD, as a lossy byte-to-text decoder does (the maximal
// subpart rule: one replacement per invalid prefix).
std::string utf8_lossy(std::string_view bytes);

}  // namespace quench
