#include "quench/tokenizer/regex_splitter.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "quench/core/error.h"

namespace quench {
namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof buffer);
  return reinterpret_cast<const char*>(buffer);
}

}  // namespace

const std::string& gpt2_split_pattern() {
  static const std::string pattern =
      R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
  return pattern;
}

RegexSplitter::RegexSplitter(const std::string& pattern) : pattern_(pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  QUENCH_REQUIRE(code != nullptr, "tokenizer: split pattern does not compile at offset ", offset,
                 ": ", pcre2_message(error), " (pattern: ", pattern, ")");
  pcre2_jit_compile(code,
                    PCRE2_JIT_COMPLETE);  // optional speed-up; the interpreter is the fallback
  code_ = code;
}

RegexSplitter::~RegexSplitter() {
  pcre2_code_free(static_cast<pcre2_code*>(code_));
}

void RegexSplitter::split(std::string_view text, std::vector<std::string>& pieces) const {
  auto* code = static_cast<pcre2_code*>(code_);
  pcre2_match_data* match = pcre2_match_data_create_from_pattern(code, nullptr);
  QUENCH_REQUIRE(match != nullptr, "tokenizer: out of memory for regex match data");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0, last_end = 0;
  while (start <= text.size()) {
    // The text was checked as UTF-8 once; no need to check again at every offset.
    const int rc =
        pcre2_match(code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, match, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      pcre2_match_data_free(match);
      fail(str_cat("tokenizer: regex match failed: ", pcre2_message(rc)));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match);
    const size_t begin = ov[0], end = ov[1];
    if (begin > last_end) pieces.emplace_back(text.substr(last_end, begin - last_end));
    if (end > begin) {
      pieces.emplace_back(text.substr(begin, end - begin));
      last_end = end;
      start = end;
    } else {  // an empty match: step over one code point
      size_t next = begin + 1;
      while (next < text.size() && (static_cast<uint8_t>(text[next]) & 0xC0) == 0x80)
        ++next;
      start = next;
    }
  }
  if (last_end < text.size()) pieces.emplace_back(text.substr(last_end));
  pcre2_match_data_free(match);
}

}  // namespace quench
