#include "quench/tokenizer/byte_level.h"

#include <array>

#include "quench/tokenizer/utf8.h"

namespace quench {
namespace {

struct Tables {
  std::array<uint32_t, 256> code_point{};
  std::array<std::string, 256> symbol;
  std::array<int16_t, 256 + 68> byte_of{};  // code point -> byte, -1 for none
  Tables() {
    byte_of.fill(-1);
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
      code_point[b] = printable ? b : next++;
      append_utf8(code_point[b], symbol[b]);
      byte_of[code_point[b]] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

const std::string& byte_level_symbol(uint8_t b) {
  return tables().symbol[b];
}

std::string to_byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes)
    out += tables().symbol[static_cast<uint8_t>(c)];
  return out;
}

std::optional<uint8_t> byte_level_byte(uint32_t code_point) {
  if (code_point >= tables().byte_of.size() || tables().byte_of[code_point] < 0)
    return std::nullopt;
  return static_cast<uint8_t>(tables().byte_of[code_point]);
}

}  // namespace quench
