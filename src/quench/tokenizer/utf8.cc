#include "quench/tokenizer/utf8.h"

namespace quench {
namespace {

// Length of the valid sequence at text[i], or 0 when it is invalid (then `valid_prefix` is the
// number of bytes that began a plausible sequence, at least 1).
size_t sequence_length(std::string_view text, size_t i, size_t* valid_prefix) {
  const auto b0 = static_cast<uint8_t>(text[i]);
  *valid_prefix = 1;
  if (b0 < 0x80) return 1;
  size_t n = 0;
  uint32_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;  // no overlong forms
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;  // <= U+10FFFF
  } else {
    return 0;
  }
  for (size_t k = 1; k < n; ++k) {
    if (i + k >= text.size()) return 0;
    const auto b = static_cast<uint8_t>(text[i + k]);
    if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return 0;
    *valid_prefix = k + 1;
  }
  return n;
}

}  // namespace

bool utf8_lead(unsigned char c, Utf8Lead& lead) {
  if (c >= 0xC2 && c <= 0xDF) {
    lead = {1, c & 0x1Fu, 0x80};
  } else if (c >= 0xE0 && c <= 0xEF) {
    lead = {2, c & 0x0Fu, 0x800};
  } else if (c >= 0xF0 && c <= 0xF4) {
    lead = {3, c & 0x07u, 0x10000};
  } else {
    return false;
  }
  return true;
}

size_t find_invalid_utf8(std::string_view text) {
  size_t prefix = 0;
  for (size_t i = 0; i < text.size();) {
    const size_t n = sequence_length(text, i, &prefix);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

void append_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::vector<std::string> split_code_points(std::string_view text) {
  std::vector<std::string> out;
  size_t prefix = 0;
  for (size_t i = 0; i < text.size();) {
    const size_t n = std::max<size_t>(1, sequence_length(text, i, &prefix));
    out.emplace_back(text.substr(i, n));
    i += n;
  }
  return out;
}

std::vector<uint32_t> decode_utf8(std::string_view text) {
  std::vector<uint32_t> out;
  for (const std::string& s : split_code_points(text)) {
    const auto b0 = static_cast<uint8_t>(s[0]);
    uint32_t cp = s.size() == 1   ? b0
                  : s.size() == 2 ? (b0 & 0x1Fu)
                  : s.size() == 3 ? (b0 & 0x0Fu)
                                  : (b0 & 0x07u);
    for (size_t k = 1; k < s.size(); ++k)
      cp = (cp << 6) | (static_cast<uint8_t>(s[k]) & 0x3Fu);
    out.push_back(cp);
  }
  return out;
}

size_t utf8_settled_prefix(std::string_view bytes) {
  size_t prefix = 0;
  for (size_t i = 0; i < bytes.size();) {
    const size_t n = sequence_length(bytes, i, &prefix);
    if (n > 0) {
      i += n;
      continue;
    }
    // Invalid here: settled, unless the bytes so far are a valid start cut off by the end.
    if (i + prefix >= bytes.size() && static_cast<uint8_t>(bytes[i]) >= 0xC2 &&
        static_cast<uint8_t>(bytes[i]) <= 0xF4) {
      return i;
    }
    i += prefix;
  }
  return bytes.size();
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  size_t prefix = 0;
  for (size_t i = 0; i < bytes.size();) {
    const size_t n = sequence_length(bytes, i, &prefix);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      i += prefix;
    } else {
      out.append(bytes.substr(i, n));
      i += n;
    }
  }
  return out;
}

}  // namespace quench
