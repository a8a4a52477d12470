#include "quench/engine/structured_output/grammar_prefix.h"

#include <algorithm>

#include "quench/tokenizer/utf8.h"

namespace quench {
namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

void sort_unique(std::vector<std::vector<int32_t>>& stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
}

// Whether some scalar value in [lo, hi] is in the class (classes hold no surrogates).
bool class_meets(const CodePointClass& chars, uint32_t lo, uint32_t hi) {
  auto it = std::lower_bound(chars.begin(), chars.end(), lo,
                             [](const CodePointRange& r, uint32_t v) { return r.hi < v; });
  return it != chars.end() && it->lo <= hi;
}

}  // namespace

GrammarPrefix::GrammarPrefix(const Grammar& grammar) : grammar_(&grammar) {
  bool overflow = false;
  for (int32_t start : grammar.alternatives(grammar.root()))
    expand({start}, stacks_, overflow);
  sort_unique(stacks_);
}

// Moves `stack` on until its top is a character class (or it is empty: the text may end), each
// rule on top replaced by its alternatives.
void GrammarPrefix::expand(Stack stack, std::vector<Stack>& out, bool& overflow) const {
  for (;;) {
    if (stack.empty()) break;
    const int32_t p = stack.back();
    const Grammar::Element& e = grammar_->element(p);
    if (e.kind == Grammar::Kind::kEnd) {
      stack.pop_back();
      continue;
    }
    if (e.kind == Grammar::Kind::kChars) break;
    // A rule: its caller goes on after it (unless nothing follows it there), under each of its
    // alternatives.
    stack.pop_back();
    if (grammar_->element(p + 1).kind != Grammar::Kind::kEnd) stack.push_back(p + 1);
    if (stack.size() + 1 > kMaxDepth) {
      overflow = true;
      return;
    }
    const std::vector<int32_t>& starts = grammar_->alternatives(e.rule);
    for (size_t i = 0; i < starts.size(); ++i) {
      // The last alternative takes the stack itself (no copy).
      Stack next = i + 1 < starts.size() ? stack : std::move(stack);
      next.push_back(starts[i]);
      expand(std::move(next), out, overflow);
      if (out.size() > kMaxStacks) {
        overflow = true;
        return;
      }
    }
    return;
  }
  out.push_back(std::move(stack));
}

bool GrammarPrefix::take(uint32_t cp) {
  if (cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
  std::vector<Stack> next;
  bool overflow = false;
  for (const Stack& s : stacks_) {
    if (s.empty()) continue;
    const Grammar::Element& e = grammar_->element(s.back());
    if (!class_contains(e.chars, cp)) continue;
    Stack moved = s;
    moved.back() += 1;
    expand(std::move(moved), next, overflow);
    if (overflow) return false;
  }
  if (next.empty()) return false;
  if (next.size() > 1) sort_unique(next);
  stacks_ = std::move(next);
  return true;
}

bool GrammarPrefix::any_live(uint32_t lo, uint32_t hi) const {
  hi = std::min(hi, kMaxCodePoint);
  for (const Stack& s : stacks_) {
    if (!s.empty() && class_meets(grammar_->element(s.back()).chars, lo, hi)) return true;
  }
  return false;
}

bool GrammarPrefix::feed_byte(unsigned char c) {
  if (utf8_left_ > 0) {
    if ((c & 0xC0) != 0x80) return false;
    code_point_ = (code_point_ << 6) | (c & 0x3Fu);
    if (--utf8_left_ == 0) {
      const uint32_t cp = code_point_;
      code_point_ = 0;
      return cp >= utf8_min_ && take(cp);
    }
  } else if (c < 0x80) {
    return take(c);
  } else {
    Utf8Lead lead;
    if (!utf8_lead(c, lead)) return false;
    utf8_left_ = lead.continuation_bytes, code_point_ = lead.bits, utf8_min_ = lead.least;
  }
  // A character under way: some top must admit a code point its bytes may still become.
  const int free_bits = 6 * utf8_left_;
  const uint32_t lo = std::max(code_point_ << free_bits, utf8_min_);
  const uint32_t hi = (code_point_ << free_bits) | ((1u << free_bits) - 1);
  return lo <= hi && any_live(lo, hi);
}

bool GrammarPrefix::may_stop() const {
  return utf8_left_ == 0 && !stacks_.empty() && stacks_.front().empty();
}

bool GrammarPrefix::finished() const {
  return may_stop() && stacks_.size() == 1;
}

void GrammarPrefix::append_key(std::string& key) const {
  auto append = [&key](uint32_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  append(code_point_);
  append(static_cast<uint32_t>(utf8_left_));
  append(utf8_min_);
  append(static_cast<uint32_t>(stacks_.size()));
  for (const Stack& s : stacks_) {
    append(static_cast<uint32_t>(s.size()));
    for (int32_t p : s)
      append(static_cast<uint32_t>(p));
  }
}

}  // namespace quench
