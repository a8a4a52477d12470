// Python's str semantics over UTF-8 bytes, as chat templates see them: code-point indexing and
// length, str.isspace's whitespace set for strip/split, and the str()/repr() spellings of
// numbers. Templates written for HF index, strip and print strings the Python way; matching that
// here keeps every filter and method byte-exact without a Unicode library.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace quench::jinja {

// One string per code point; a malformed byte is its own one-byte "code point" so that nothing
// is ever dropped.
std::vector<std::string> code_points(std::string_view text);
int64_t code_point_count(std::string_view text);

// Python's str.strip()/lstrip()/rstrip(): with `chars` empty, Unicode whitespace (str.isspace);
// otherwise any code point of `chars`.
std::string py_strip(std::string_view text, bool left, bool right, std::string_view chars = {},
                     bool chars_given = false);
// Python's str.split(sep, maxsplit): sep empty and not given splits on whitespace runs.
std::vector<std::string> py_split(std::string_view text, std::string_view sep, bool sep_given,
                                  int64_t maxsplit);
// str.splitlines(): \n, \r\n, \r and the other line boundaries Python knows; no line ends kept.
std::vector<std::string> py_splitlines(std::string_view text);
std::string py_replace(std::string_view text, std::string_view old_text, std::string_view new_text,
                       int64_t count);

// ASCII case mapping (non-ASCII letters are kept as they are).
std::string ascii_upper(std::string_view text);
std::string ascii_lower(std::string_view text);
// Python's str.title(): a cased letter after an uncased character starts a word.
std::string py_title(std::string_view text);
std::string py_capitalize(std::string_view text);

// repr(float) and str(float): shortest round-trip digits, exponent form outside [1e-4, 1e16).
std::string py_float_repr(double value);
// repr(str): single quotes unless the text has ' and no ", escapes as Python prints them.
std::string py_string_repr(std::string_view text);
// HTML escaping as jinja2's escape filter does it (& < > " ').
std::string html_escape(std::string_view text);

bool is_py_space(uint32_t code_point);

}  // namespace quench::jinja
