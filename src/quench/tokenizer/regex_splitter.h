// Splits text with a Unicode regular expression (PCRE2 with UTF and Unicode properties, the
// dialect of tokenizer.json patterns: \p{L}, \p{N}, (?i:...), lookahead) into the pieces the
// "Split" pre-tokenizer with behavior "Isolated" gives: every match is a piece, and so is every
// non-empty stretch between matches.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace quench {

class RegexSplitter {
 public:
  // Throws quench::Error with PCRE2's message and offset when the pattern does not compile.
  explicit RegexSplitter(const std::string& pattern);
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  // `text` must be valid UTF-8. Appends the pieces in order; they concatenate to `text`.
  void split(std::string_view text, std::vector<std::string>& pieces) const;

 private:
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8, kept out of the header
};

// GPT-2's pre-tokenizer pattern (tokenizer.json ByteLevel with "use_regex": true).
const std::string& gpt2_split_pattern();

}  // namespace quench
