#include "quench/engine/structured_output/grammar_prefix.h"

#include <algorithm>

#include "quench/tokenizer/utf8.h"

namespace quench {
namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// Whether some scalar value in [lo, hi] is in the class (classes hold no surrogates).
bool class_meets(const CodePointClass& chars, uint32_t lo, uint32_t hi) {
  auto it = std::lower_bound(chars.begin(), chars.end(), lo,
                             [](const CodePointRange& r, uint32_t v) { return r.hi < v; });
  return it != chars.end() && it->lo <= hi;
}

}  // namespace

GrammarPrefix::GrammarPrefix(const Grammar& grammar) : grammar_(&grammar) {
  Scratch& out = scratch();
  out.positions.clear(), out.ends.clear();
  for (int32_t start : grammar.alternatives(grammar.root())) {
    out.work.assign(1, start);
    started_ = started_ && expand(out.work, 0, out);
  }
  adopt(out);
}

GrammarPrefix::Scratch& GrammarPrefix::scratch() {
  thread_local Scratch s;
  return s;
}

bool GrammarPrefix::expand(std::vector<int32_t>& work, size_t level, Scratch& out) const {
  for (;;) {
    if (work.empty()) break;
    const int32_t p = work.back();
    const Grammar::Element& e = grammar_->element(p);
    if (e.kind == Grammar::Kind::kEnd) {
      work.pop_back();
      continue;
    }
    if (e.kind == Grammar::Kind::kChars) break;
    // A rule: its caller goes on after it (unless nothing follows it there), under each of its
    // alternatives.
    work.pop_back();
    if (grammar_->element(p + 1).kind != Grammar::Kind::kEnd) work.push_back(p + 1);
    if (work.size() + 1 > kMaxDepth) return false;
    const std::vector<int32_t>& starts = grammar_->alternatives(e.rule);
    if (starts.size() == 1) {
      work.push_back(starts[0]);
      continue;
    }
    // Each branching level is a call deeper: bounded like the stacks.
    if (level >= kMaxDepth) return false;
    if (out.saved.size() <= level) out.saved.resize(level + 1);
    out.saved[level] = work;
    for (size_t i = 0; i < starts.size(); ++i) {
      if (i > 0) work = out.saved[level];
      work.push_back(starts[i]);
      if (!expand(work, level + 1, out)) return false;
    }
    return true;
  }
  if (out.ends.size() >= kMaxStacks) return false;
  out.positions.insert(out.positions.end(), work.begin(), work.end());
  out.ends.push_back(static_cast<uint32_t>(out.positions.size()));
  return true;
}

void GrammarPrefix::adopt(Scratch& out) {
  const size_t n = out.ends.size();
  auto begin_of = [&](size_t i) { return i == 0 ? 0 : out.ends[i - 1]; };
  bool ordered = true;  // already sorted and distinct (one stack, say): take them as they are
  auto less = [&](uint32_t a, uint32_t b) {
    return std::lexicographical_compare(
        out.positions.begin() + begin_of(a), out.positions.begin() + out.ends[a],
        out.positions.begin() + begin_of(b), out.positions.begin() + out.ends[b]);
  };
  for (size_t i = 1; i < n && ordered; ++i)
    ordered = less(static_cast<uint32_t>(i - 1), static_cast<uint32_t>(i));
  if (ordered) {
    std::swap(positions_, out.positions);
    std::swap(ends_, out.ends);
    return;
  }
  out.order.resize(n);
  for (size_t i = 0; i < n; ++i)
    out.order[i] = static_cast<uint32_t>(i);
  std::sort(out.order.begin(), out.order.end(), less);
  positions_.clear(), ends_.clear();
  for (size_t k = 0; k < n; ++k) {
    const uint32_t i = out.order[k];
    if (k > 0 && !less(out.order[k - 1], i)) continue;  // equal to the one before
    positions_.insert(positions_.end(), out.positions.begin() + begin_of(i),
                      out.positions.begin() + out.ends[i]);
    ends_.push_back(static_cast<uint32_t>(positions_.size()));
  }
}

bool GrammarPrefix::take(uint32_t cp) {
  if (cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
  Scratch& out = scratch();
  out.positions.clear(), out.ends.clear();
  for (size_t i = 0; i < stacks(); ++i) {
    const size_t begin = stack_begin(i), end = ends_[i];
    if (begin == end || !class_contains(grammar_->element(positions_[end - 1]).chars, cp)) continue;
    out.work.assign(positions_.begin() + static_cast<std::ptrdiff_t>(begin),
                    positions_.begin() + static_cast<std::ptrdiff_t>(end));
    out.work.back() += 1;
    if (!expand(out.work, 0, out)) return false;
  }
  if (out.ends.empty()) return false;
  adopt(out);
  return true;
}

bool GrammarPrefix::any_live(uint32_t lo, uint32_t hi) const {
  hi = std::min(hi, kMaxCodePoint);
  for (size_t i = 0; i < stacks(); ++i) {
    const size_t end = ends_[i];
    if (end != stack_begin(i) && class_meets(grammar_->element(positions_[end - 1]).chars, lo, hi))
      return true;
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
  return utf8_left_ == 0 && !ends_.empty() && ends_[0] == 0;
}

bool GrammarPrefix::finished() const {
  return may_stop() && ends_.size() == 1;
}

void GrammarPrefix::append_key(std::string& key) const {
  auto append = [&key](uint32_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  append(code_point_);
  append(static_cast<uint32_t>(utf8_left_));
  append(utf8_min_);
  append(static_cast<uint32_t>(ends_.size()));
  for (uint32_t e : ends_)
    append(e);
  for (int32_t p : positions_)
    append(static_cast<uint32_t>(p));
}

}  // namespace quench
