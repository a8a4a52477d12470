#include "quench/engine/structured_output/string_pattern.h"

#include <algorithm>
#include <map>

#include "quench/core/error.h"
#include "quench/tokenizer/utf8.h"

namespace quench {
namespace {

// The work of the length table (lengths x follow edges) above which a pattern is refused.
constexpr int64_t kMaxLengthTableWork = int64_t{1} << 26;

int32_t count_positions(const RegexNode& n) {
  int64_t count = 0;
  switch (n.kind) {
    case RegexNode::Kind::kEmpty:
      return 0;
    case RegexNode::Kind::kClass:
      return 1;
    case RegexNode::Kind::kSequence:
    case RegexNode::Kind::kAlternative:
      for (const RegexNode& c : n.children)
        count += count_positions(c);
      break;
    case RegexNode::Kind::kRepeat: {
      const int64_t copies = n.max < 0 ? std::max(n.min, 1) : n.max;
      count = copies * count_positions(n.children[0]);
      break;
    }
  }
  return static_cast<int32_t>(std::min<int64_t>(count, StringPattern::kMaxPositions + 1));
}

template <typename F>
void for_each_bit(const std::vector<uint64_t>& s, F&& f) {
  for (size_t w = 0; w < s.size(); ++w) {
    for (uint64_t bits = s[w]; bits != 0; bits &= bits - 1)
      f(static_cast<int32_t>(w * 64 + static_cast<size_t>(__builtin_ctzll(bits))));
  }
}

}  // namespace

// Glushkov's construction over the parse tree: each class a position; for every expression its
// first and last positions and whether it admits the empty string, and the follow sets.
class StringPatternBuilder {
 public:
  struct Part {
    bool nullable = true;
    StringPattern::Positions first, last;
  };

  StringPatternBuilder(StringPattern& p, int32_t positions) : p_(p) {
    p_.positions_ = positions;
    words_ = static_cast<size_t>(positions + 1 + 63) / 64;
    p_.follow_.assign(static_cast<size_t>(positions), StringPattern::Positions(words_, 0));
    p_.classes_.reserve(static_cast<size_t>(positions));
  }

  Part empty() const {
    return Part{true, StringPattern::Positions(words_, 0), StringPattern::Positions(words_, 0)};
  }

  Part build(const RegexNode& n) {
    switch (n.kind) {
      case RegexNode::Kind::kEmpty:
        return empty();
      case RegexNode::Kind::kClass: {
        const auto pos = static_cast<int32_t>(p_.classes_.size());
        p_.classes_.push_back(n.code_points);
        Part part = empty();
        part.nullable = false;
        set(part.first, pos);
        set(part.last, pos);
        return part;
      }
      case RegexNode::Kind::kSequence: {
        Part acc = empty();
        for (const RegexNode& c : n.children)
          acc = sequence(std::move(acc), build(c));
        return acc;
      }
      case RegexNode::Kind::kAlternative: {
        Part acc = build(n.children[0]);
        for (size_t i = 1; i < n.children.size(); ++i) {
          Part next = build(n.children[i]);
          acc.nullable = acc.nullable || next.nullable;
          unite(acc.first, next.first);
          unite(acc.last, next.last);
        }
        return acc;
      }
      case RegexNode::Kind::kRepeat:
      default:
        return repeat(n.children[0], n.min, n.max);
    }
  }

  // x{min,max}: min copies, then either x* (made x+ from the last required copy) or max - min
  // nested optional copies, (x (x (x)?)?)?, whose follow sets stay linear in the copies.
  Part repeat(const RegexNode& x, int32_t min, int32_t max) {
    Part acc = empty();
    if (max < 0) {
      for (int32_t i = 0; i + 1 < min; ++i)
        acc = sequence(std::move(acc), build(x));
      Part loop = build(x);
      for_each_bit(loop.last,
                   [&](int32_t q) { unite(p_.follow_[static_cast<size_t>(q)], loop.first); });
      if (min == 0) loop.nullable = true;
      return sequence(std::move(acc), std::move(loop));
    }
    for (int32_t i = 0; i < min; ++i)
      acc = sequence(std::move(acc), build(x));
    Part optional = empty();
    for (int32_t i = min; i < max; ++i) {
      optional = sequence(build(x), std::move(optional));
      optional.nullable = true;
    }
    return sequence(std::move(acc), std::move(optional));
  }

  Part sequence(Part a, Part b) {
    for_each_bit(a.last, [&](int32_t q) { unite(p_.follow_[static_cast<size_t>(q)], b.first); });
    Part out;
    out.nullable = a.nullable && b.nullable;
    out.first = a.first;
    if (a.nullable) unite(out.first, b.first);
    out.last = b.last;
    if (b.nullable) unite(out.last, a.last);
    return out;
  }

  static void set(StringPattern::Positions& s, int32_t bit) {
    s[static_cast<size_t>(bit) / 64] |= uint64_t{1} << (bit % 64);
  }
  static void unite(StringPattern::Positions& into, const StringPattern::Positions& from) {
    for (size_t w = 0; w < into.size(); ++w)
      into[w] |= from[w];
  }

 private:
  StringPattern& p_;
  size_t words_ = 0;
};

std::shared_ptr<const StringPattern> StringPattern::compile(const std::string& pattern,
                                                            int64_t min_length, int64_t max_length,
                                                            bool full_match) {
  const RegexNode tree = parse_regex(pattern, full_match);
  const int32_t positions = count_positions(tree);
  QUENCH_REQUIRE(positions <= kMaxPositions, "pattern \"", pattern,
                 "\": its repetitions expand to more than ", kMaxPositions,
                 " character positions; write it with smaller counts");
  auto p = std::make_shared<StringPattern>();
  p->min_length_ = min_length;
  p->max_length_ = max_length;
  p->bounded_ = min_length > 0 || max_length >= 0;
  StringPatternBuilder builder(*p, positions);
  StringPatternBuilder::Part root = builder.build(tree);
  const int32_t end = positions;
  for_each_bit(root.last, [&](int32_t q) {
    StringPatternBuilder::set(p->follow_[static_cast<size_t>(q)], end);
  });
  p->start_positions_ = root.first;
  if (root.nullable) StringPatternBuilder::set(p->start_positions_, end);

  // Keep the positions that can reach the end (backwards from it over the follow edges); a
  // position of an empty class (say [^\s\S]) reaches nothing.
  std::vector<std::vector<int32_t>> before(static_cast<size_t>(positions + 1));
  int64_t edges = 0;
  for (int32_t q = 0; q < positions; ++q) {
    if (p->classes_[static_cast<size_t>(q)].empty()) continue;
    for_each_bit(p->follow_[static_cast<size_t>(q)], [&](int32_t r) {
      before[static_cast<size_t>(r)].push_back(q);
      ++edges;
    });
  }
  Positions live(p->start_positions_.size(), 0);
  std::vector<int32_t> queue = {end};
  StringPatternBuilder::set(live, end);
  while (!queue.empty()) {
    const int32_t r = queue.back();
    queue.pop_back();
    for (int32_t q : before[static_cast<size_t>(r)]) {
      if (p->has(live, q)) continue;
      StringPatternBuilder::set(live, q);
      queue.push_back(q);
    }
  }
  auto keep_live = [&](Positions& s) {
    for (size_t w = 0; w < s.size(); ++w)
      s[w] &= live[w];
  };
  keep_live(p->start_positions_);
  for (Positions& f : p->follow_)
    keep_live(f);

  if (p->bounded_) {
    // reaches_: R(0) = {end}; R(l) = the live positions with a follow in R(l - 1).
    p->horizon_ = max_length >= 0 ? max_length : min_length + positions + 1;
    QUENCH_REQUIRE(p->horizon_ * (edges + positions + 1) <= kMaxLengthTableWork, "pattern \"",
                   pattern, "\" with its length bounds (minLength ", min_length, ", maxLength ",
                   max_length,
                   ") is too large to check for dead ends; use a smaller bound or pattern");
    p->reaches_.assign(static_cast<size_t>(positions + 1), {});
    std::vector<int32_t> current = {end};
    std::vector<char> in_next(static_cast<size_t>(positions + 1), 0);
    for (int32_t l = 0; l <= p->horizon_ && !current.empty(); ++l) {
      std::vector<int32_t> next;
      for (int32_t e : current) {
        auto& runs = p->reaches_[static_cast<size_t>(e)];
        if (!runs.empty() && runs.back().second == l - 1) {
          runs.back().second = l;
        } else {
          runs.emplace_back(l, l);
        }
        for (int32_t q : before[static_cast<size_t>(e)]) {
          if (!p->has(live, q) || in_next[static_cast<size_t>(q)]) continue;
          in_next[static_cast<size_t>(q)] = 1;
          next.push_back(q);
        }
      }
      for (int32_t q : next)
        in_next[static_cast<size_t>(q)] = 0;
      current = std::move(next);
    }
  }
  p->determinize(pattern);
  QUENCH_REQUIRE(p->can_finish(p->start_, 0), "pattern \"", pattern, "\" admits no string",
                 p->bounded_ ? " of a length within minLength / maxLength" : "");
  return p;
}

void StringPattern::step_positions(const Positions& from, uint32_t cp, Positions& to) const {
  to.assign(from.size(), 0);
  for_each_bit(from, [&](int32_t q) {
    if (q == positions_ || !class_contains(classes_[static_cast<size_t>(q)], cp)) return;
    StringPatternBuilder::unite(to, follow_[static_cast<size_t>(q)]);
  });
}

// Subset construction over atoms: the code-point ranges on which every class agrees (cut at
// each class range's ends), so that one representative steps the whole atom.
void StringPattern::determinize(const std::string& pattern) {
  std::vector<uint32_t> cuts = {0};
  for (const CodePointClass& c : classes_) {
    for (const CodePointRange& r : c) {
      cuts.push_back(r.lo);
      if (r.hi < 0x10FFFF) cuts.push_back(r.hi + 1);
    }
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  atom_starts_ = std::move(cuts);
  ascii_atoms_.resize(128);
  for (uint32_t cp = 0; cp < 128; ++cp) {
    ascii_atoms_[cp] = static_cast<int32_t>(
        std::upper_bound(atom_starts_.begin(), atom_starts_.end(), cp) - atom_starts_.begin() - 1);
  }

  std::map<Positions, State> ids;
  std::vector<Positions> sets;
  auto intern = [&](const Positions& set) {
    bool empty = true;
    for (uint64_t w : set)
      empty = empty && w == 0;
    if (empty) return kDead;
    auto [it, inserted] = ids.emplace(set, static_cast<State>(sets.size()));
    if (inserted) {
      QUENCH_REQUIRE(sets.size() < static_cast<size_t>(kMaxStates) &&
                         static_cast<int64_t>(sets.size() + 1) * static_cast<int64_t>(atoms()) <=
                             kMaxTableEntries,
                     "pattern \"", pattern, "\": its automaton needs more than ", sets.size(),
                     " states over ", atoms(),
                     " character ranges; write it with fewer alternatives or counts");
      sets.push_back(set);
    }
    return it->second;
  };
  start_ = intern(start_positions_);
  Positions next;
  for (size_t i = 0; i < sets.size(); ++i) {
    const Positions set = sets[i];  // a copy: intern() grows `sets`
    for (size_t a = 0; a < atoms(); ++a) {
      step_positions(set, atom_starts_[a], next);
      table_.push_back(intern(next));
    }
    accepting_.push_back(has(set, positions_) ? 1 : 0);
    if (!bounded_) continue;
    // The state's lengths to the end: its elements' runs, merged.
    std::vector<std::pair<int32_t, int32_t>> runs;
    for_each_bit(set, [&](int32_t e) {
      const auto& r = reaches_[static_cast<size_t>(e)];
      runs.insert(runs.end(), r.begin(), r.end());
    });
    std::sort(runs.begin(), runs.end());
    std::vector<std::pair<int32_t, int32_t>> merged;
    for (const auto& r : runs) {
      if (!merged.empty() && r.first <= merged.back().second + 1) {
        merged.back().second = std::max(merged.back().second, r.second);
      } else {
        merged.push_back(r);
      }
    }
    state_reaches_.push_back(std::move(merged));
  }
  // The position automaton is no longer needed.
  classes_.clear();
  follow_.clear();
  reaches_.clear();
}

size_t StringPattern::atom_of(uint32_t cp) const {
  if (cp < 128) return static_cast<size_t>(ascii_atoms_[cp]);
  return static_cast<size_t>(std::upper_bound(atom_starts_.begin(), atom_starts_.end(), cp) -
                             atom_starts_.begin() - 1);
}

bool StringPattern::can_finish(State s, int64_t chars) const {
  if (s == kDead) return false;
  if (!bounded_) return true;  // every live state reaches the end
  // With no maxLength, a state that reaches the end in some l >= lo reaches it in one of
  // [lo, lo + positions]: a longer path repeats a position past lo, and the cycle can go.
  const int64_t lo = std::max<int64_t>(0, min_length_ - chars);
  const int64_t hi = max_length_ >= 0 ? max_length_ - chars : lo + positions_ + 1;
  if (hi < lo) return false;
  const auto& runs = state_reaches_[static_cast<size_t>(s)];
  auto it = std::lower_bound(
      runs.begin(), runs.end(), lo,
      [](const std::pair<int32_t, int32_t>& r, int64_t v) { return r.second < v; });
  return it != runs.end() && it->first <= hi;
}

bool StringPattern::any_live(State s, uint32_t lo, uint32_t hi, int64_t chars) const {
  if (s == kDead || lo > hi) return false;
  for (size_t a = atom_of(lo); a < atoms() && atom_starts_[a] <= hi; ++a) {
    if (can_finish(table_[static_cast<size_t>(s) * atoms() + a], chars + 1)) return true;
  }
  return false;
}

bool StringPattern::may_end(State s, int64_t chars) const {
  return s != kDead && accepting_[static_cast<size_t>(s)] && chars >= min_length_ &&
         (max_length_ < 0 || chars <= max_length_);
}

bool StringPattern::matches(const std::string& utf8) const {
  if (find_invalid_utf8(utf8) != std::string::npos) return false;
  const std::vector<uint32_t> code_points = decode_utf8(utf8);
  State s = start_;
  for (uint32_t cp : code_points)
    s = step(s, cp);
  return may_end(s, static_cast<int64_t>(code_points.size()));
}

}  // namespace quench
