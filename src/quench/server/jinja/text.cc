#include "quench/server/jinja/text.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace quench::jinja {
namespace {

// The code point at text[i] and its byte length; a malformed byte decodes as itself, length 1.
std::pair<uint32_t, size_t> decode_at(std::string_view text, size_t i) {
  const auto b = static_cast<unsigned char>(text[i]);
  size_t len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
  if (len == 0 || i + len > text.size()) return {b, 1};
  if (len == 1) return {b, 1};
  uint32_t cp = b & (0x7F >> len);
  for (size_t k = 1; k < len; ++k) {
    const auto c = static_cast<unsigned char>(text[i + k]);
    if ((c >> 6) != 0x2) return {b, 1};
    cp = (cp << 6) | (c & 0x3F);
  }
  return {cp, len};
}

bool in_chars(uint32_t cp, std::string_view chars) {
  for (size_t i = 0; i < chars.size();) {
    const auto [c, len] = decode_at(chars, i);
    if (c == cp) return true;
    i += len;
  }
  return false;
}

bool is_line_break(uint32_t cp) {
  return cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || cp == 0x1C || cp == 0x1D ||
         cp == 0x1E || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
}

}  // namespace

bool is_py_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

std::vector<std::string> code_points(std::string_view text) {
  std::vector<std::string> out;
  for (size_t i = 0; i < text.size();) {
    const size_t len = decode_at(text, i).second;
    out.emplace_back(text.substr(i, len));
    i += len;
  }
  return out;
}

int64_t code_point_count(std::string_view text) {
  int64_t n = 0;
  for (size_t i = 0; i < text.size(); ++n)
    i += decode_at(text, i).second;
  return n;
}

std::string py_strip(std::string_view text, bool left, bool right, std::string_view chars,
                     bool chars_given) {
  auto strip_it = [&](uint32_t cp) { return chars_given ? in_chars(cp, chars) : is_py_space(cp); };
  std::vector<std::pair<size_t, uint32_t>> cps;  // (byte offset, code point)
  for (size_t i = 0; i < text.size();) {
    const auto [cp, len] = decode_at(text, i);
    cps.emplace_back(i, cp);
    i += len;
  }
  size_t first = 0;
  size_t last = cps.size();
  if (left)
    while (first < last && strip_it(cps[first].second))
      ++first;
  if (right)
    while (last > first && strip_it(cps[last - 1].second))
      --last;
  const size_t begin = first < cps.size() ? cps[first].first : text.size();
  const size_t end = last < cps.size() ? cps[last].first : text.size();
  return std::string(text.substr(begin, end - begin));
}

std::vector<std::string> py_split(std::string_view text, std::string_view sep, bool sep_given,
                                  int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep_given) {
    size_t start = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      const size_t at = text.find(sep, start);
      if (at == std::string_view::npos) break;
      out.emplace_back(text.substr(start, at - start));
      start = at + sep.size();
    }
    out.emplace_back(text.substr(start));
    return out;
  }
  size_t i = 0;
  auto skip_space = [&] {
    while (i < text.size()) {
      const auto [cp, len] = decode_at(text, i);
      if (!is_py_space(cp)) break;
      i += len;
    }
  };
  skip_space();
  while (i < text.size()) {
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      out.push_back(py_strip(text.substr(i), false, true));
      return out;
    }
    const size_t start = i;
    while (i < text.size()) {
      const auto [cp, len] = decode_at(text, i);
      if (is_py_space(cp)) break;
      i += len;
    }
    out.emplace_back(text.substr(start, i - start));
    skip_space();
  }
  return out;
}

std::vector<std::string> py_splitlines(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < text.size();) {
    const auto [cp, len] = decode_at(text, i);
    if (!is_line_break(cp)) {
      i += len;
      continue;
    }
    out.emplace_back(text.substr(start, i - start));
    i += len;
    if (cp == '\r' && i < text.size() && text[i] == '\n') ++i;
    start = i;
  }
  if (start < text.size()) out.emplace_back(text.substr(start));
  return out;
}

std::string py_replace(std::string_view text, std::string_view old_text, std::string_view new_text,
                       int64_t count) {
  std::string out;
  if (old_text.empty()) {
    // Python inserts `new_text` before every code point and at the end.
    int64_t done = 0;
    for (const std::string& cp : code_points(text)) {
      if (count < 0 || done < count) {
        out += new_text;
        ++done;
      }
      out += cp;
    }
    if (count < 0 || done < count) out += new_text;
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t at = text.find(old_text, start);
    if (at == std::string_view::npos) break;
    out.append(text.substr(start, at - start));
    out.append(new_text);
    start = at + old_text.size();
    ++done;
  }
  out.append(text.substr(start));
  return out;
}

std::string ascii_upper(std::string_view text) {
  std::string out(text);
  for (char& c : out)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return out;
}

std::string ascii_lower(std::string_view text) {
  std::string out(text);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

std::string py_title(std::string_view text) {
  std::string out(text);
  bool previous_cased = false;
  for (char& c : out) {
    const auto b = static_cast<unsigned char>(c);
    const bool upper = b >= 'A' && b <= 'Z';
    const bool lower = b >= 'a' && b <= 'z';
    if (upper || lower) {
      c = previous_cased ? (upper ? static_cast<char>(c - 'A' + 'a') : c)
                         : (lower ? static_cast<char>(c - 'a' + 'A') : c);
      previous_cased = true;
    } else {
      previous_cased = b >= 0x80;  // letters outside ASCII are cased for word boundaries
    }
  }
  return out;
}

std::string py_capitalize(std::string_view text) {
  std::string out = ascii_lower(text);
  if (!out.empty() && out[0] >= 'a' && out[0] <= 'z')
    out[0] = static_cast<char>(out[0] - 'a' + 'A');
  return out;
}

std::string py_float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
  const std::string sci(buf, result.ptr);
  const size_t e = sci.find('e');
  std::string mantissa = sci.substr(0, e);
  const int exponent = std::stoi(sci.substr(e + 1));
  const bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa)
    if (c != '.') digits += c;
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out += "0.";
      out.append(static_cast<size_t>(-exponent - 1), '0');
      out += digits;
    } else {
      const auto point = static_cast<size_t>(exponent) + 1;
      if (digits.size() <= point) {
        out += digits;
        out.append(point - digits.size(), '0');
        out += ".0";
      } else {
        out.append(digits, 0, point);
        out += '.';
        out.append(digits, point, std::string::npos);
      }
    }
    return out;
  }
  out += digits[0];
  if (digits.size() > 1) {
    out += '.';
    out.append(digits, 1, std::string::npos);
  }
  char exp[16];
  std::snprintf(exp, sizeof(exp), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exp;
}

std::string py_string_repr(std::string_view text) {
  const bool has_single = text.find('\'') != std::string_view::npos;
  const bool has_double = text.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char c : text) {
    const auto b = static_cast<unsigned char>(c);
    if (c == quote || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (b < 0x20 || b == 0x7F) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "\\x%02x", b);
      out += hex;
    } else {
      out += c;
    }
  }
  return out + quote;
}

std::string html_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace quench::jinja
