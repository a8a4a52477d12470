#include "quench/engine/structured_output/key_automaton.h"

#include <algorithm>
#include <map>

#include "quench/core/error.h"
#include "quench/tokenizer/utf8.h"

namespace quench {
namespace {

constexpr int32_t kNoOutcome = -1;  // JsonSchema::kNoNode
constexpr uint32_t kSurrogateFirst = 0xD800;
constexpr uint32_t kSurrogateEnd = 0xE000;  // one past the last
constexpr uint32_t kCodePointEnd = 0x110000;

int64_t capped_add(int64_t a, int64_t b) {
  return std::min(a + b, KeyAutomaton::kCountCap);
}

int64_t capped_mul(int64_t size, int64_t count) {
  if (count == 0) return 0;
  return size > KeyAutomaton::kCountCap / count ? KeyAutomaton::kCountCap
                                                : std::min(size * count, KeyAutomaton::kCountCap);
}

// [lo, hi] without the surrogates: how many scalar values it holds.
int64_t scalar_values(uint32_t lo, uint32_t hi) {
  if (lo > hi) return 0;
  int64_t n = int64_t{hi} - lo + 1;
  const uint32_t s_lo = std::max(lo, kSurrogateFirst), s_hi = std::min(hi, kSurrogateEnd - 1);
  if (s_lo <= s_hi) n -= int64_t{s_hi} - s_lo + 1;
  return n;
}

}  // namespace

std::shared_ptr<const KeyAutomaton> KeyAutomaton::build(const Spec& spec, const std::string& path) {
  QUENCH_REQUIRE(spec.patterns.size() <= kMaxPatterns, "JSON schema ", path, ": ",
                 spec.patterns.size(), " patternProperties; at most ", kMaxPatterns,
                 " per object are supported");
  auto automaton = std::make_shared<KeyAutomaton>();
  KeyAutomaton& a = *automaton;
  // The components: the patternProperties patterns, then propertyNames' patterns.
  std::vector<const StringPattern*> parts;
  for (const auto& p : spec.patterns)
    parts.push_back(p.get());
  for (const auto& p : spec.names)
    parts.push_back(p.get());
  const size_t matchers = spec.patterns.size();

  // Atoms: every component's, cut at the surrogates too (a key holds none).
  std::vector<uint32_t> cuts = {0, kSurrogateFirst, kSurrogateEnd};
  for (const StringPattern* p : parts)
    cuts.insert(cuts.end(), p->atom_starts().begin(), p->atom_starts().end());
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  a.atom_starts_ = std::move(cuts);
  a.ascii_atoms_.resize(128);
  for (uint32_t cp = 0; cp < 128; ++cp) {
    a.ascii_atoms_[cp] =
        static_cast<int32_t>(std::upper_bound(a.atom_starts_.begin(), a.atom_starts_.end(), cp) -
                             a.atom_starts_.begin() - 1);
  }

  // The length component saturates where the bounds stop telling lengths apart: past maxLength
  // (dead), or at minLength.
  const int64_t length_cap = spec.max_length >= 0 ? spec.max_length + 1 : spec.min_length;
  using Tuple = std::vector<int64_t>;  // component states, then the length
  std::map<Tuple, State> ids;
  std::vector<Tuple> tuples;
  std::vector<State> table;
  auto intern = [&](const Tuple& t) -> State {
    for (size_t i = matchers; i < parts.size(); ++i)
      if (t[i] == StringPattern::kDead) return kDead;  // no key goes on to match this name pattern
    if (spec.max_length >= 0 && t.back() > spec.max_length) return kDead;
    auto [it, inserted] = ids.emplace(t, static_cast<State>(tuples.size()));
    if (inserted) {
      QUENCH_REQUIRE(
          tuples.size() < static_cast<size_t>(StringPattern::kMaxStates) &&
              static_cast<int64_t>(tuples.size() + 1) * static_cast<int64_t>(a.atoms()) <=
                  StringPattern::kMaxTableEntries,
          "JSON schema ", path,
          ": patternProperties / propertyNames make a key automaton of more than ", tuples.size(),
          " states over ", a.atoms(), " character ranges; use fewer or simpler patterns");
      tuples.push_back(t);
    }
    return it->second;
  };
  Tuple first;
  for (const StringPattern* p : parts)
    first.push_back(p->start());
  first.push_back(0);
  const State start = intern(first);
  Tuple next(first.size());
  for (size_t i = 0; i < tuples.size(); ++i) {
    const Tuple from = tuples[i];  // a copy: intern() grows `tuples`
    for (size_t atom = 0; atom < a.atoms(); ++atom) {
      const uint32_t cp = a.atom_starts_[atom];
      if (cp >= kSurrogateFirst && cp < kSurrogateEnd) {
        table.push_back(kDead);
        continue;
      }
      for (size_t c = 0; c < parts.size(); ++c)
        next[c] = parts[c]->step(static_cast<StringPattern::State>(from[c]), cp);
      next.back() = std::min(from.back() + 1, length_cap);
      table.push_back(intern(next));
    }
  }

  // Each state's outcome: the names all matched within the lengths, then the patterns' set.
  std::map<uint64_t, int32_t> outcome_of_set;
  std::vector<int32_t> outcomes(tuples.size(), kNoOutcome);
  for (size_t i = 0; i < tuples.size(); ++i) {
    const Tuple& t = tuples[i];
    bool named = t.back() >= spec.min_length;
    for (size_t c = matchers; c < parts.size(); ++c)
      named = named && parts[c]->may_end(static_cast<StringPattern::State>(t[c]), 0);
    if (!named) continue;
    uint64_t matched = 0;
    for (size_t c = 0; c < matchers; ++c) {
      if (parts[c]->may_end(static_cast<StringPattern::State>(t[c]), 0))
        matched |= uint64_t{1} << c;
    }
    auto it = outcome_of_set.find(matched);
    if (it == outcome_of_set.end())
      it = outcome_of_set.emplace(matched, spec.outcome(matched)).first;
    outcomes[i] = it->second;
  }

  // Keep the states from which some key reaches an outcome (backwards from those with one).
  const size_t n = tuples.size();
  std::vector<std::vector<State>> before(n);
  for (size_t s = 0; s < n; ++s) {
    for (size_t atom = 0; atom < a.atoms(); ++atom) {
      const State t = table[s * a.atoms() + atom];
      if (t != kDead) before[static_cast<size_t>(t)].push_back(static_cast<State>(s));
    }
  }
  std::vector<char> live(n, 0);
  std::vector<State> queue;
  for (size_t s = 0; s < n; ++s) {
    if (outcomes[s] != kNoOutcome) live[s] = 1, queue.push_back(static_cast<State>(s));
  }
  while (!queue.empty()) {
    const State t = queue.back();
    queue.pop_back();
    for (State s : before[static_cast<size_t>(t)]) {
      if (!live[static_cast<size_t>(s)]) live[static_cast<size_t>(s)] = 1, queue.push_back(s);
    }
  }
  std::vector<State> renumbered(n, kDead);
  for (size_t s = 0; s < n; ++s) {
    if (!live[s]) continue;
    renumbered[s] = static_cast<State>(a.outcomes_.size());
    a.outcomes_.push_back(outcomes[s]);
  }
  a.start_ = start == kDead ? kDead : renumbered[static_cast<size_t>(start)];
  a.table_.reserve(a.outcomes_.size() * a.atoms());
  for (size_t s = 0; s < n; ++s) {
    if (!live[s]) continue;
    for (size_t atom = 0; atom < a.atoms(); ++atom) {
      const State t = table[s * a.atoms() + atom];
      a.table_.push_back(t == kDead ? kDead : renumbered[static_cast<size_t>(t)]);
    }
  }

  // Completions: a state's own outcome plus, per atom, its size times the next state's count. A
  // state on a cycle has infinitely many (every live state reaches an outcome), and so has every
  // state that reaches it. One depth-first pass: an edge to a state still on the stack closes a
  // cycle; the first state of a cycle to finish has such an edge, and the others reach it.
  const size_t live_states = a.outcomes_.size();
  a.completions_.assign(live_states, 0);
  std::vector<uint8_t> color(live_states, 0);  // 0 new, 1 on the stack, 2 done
  struct Visit {
    State state;
    size_t atom;
  };
  std::vector<Visit> stack;
  for (size_t root = 0; root < live_states; ++root) {
    if (color[root] != 0) continue;
    stack.push_back({static_cast<State>(root), 0});
    color[root] = 1;
    a.completions_[root] = a.outcomes_[root] != kNoOutcome ? 1 : 0;
    while (!stack.empty()) {
      Visit& v = stack.back();
      const auto s = static_cast<size_t>(v.state);
      if (v.atom == a.atoms()) {
        color[s] = 2;
        stack.pop_back();
        if (!stack.empty()) {
          const auto parent = static_cast<size_t>(stack.back().state);
          const size_t atom = stack.back().atom - 1;
          a.completions_[parent] =
              capped_add(a.completions_[parent], capped_mul(a.atom_size(atom), a.completions_[s]));
        }
        continue;
      }
      const size_t atom = v.atom++;
      const State t = a.table_[s * a.atoms() + atom];
      if (t == kDead) continue;
      const auto ti = static_cast<size_t>(t);
      if (color[ti] == 1) {
        a.completions_[s] = kCountCap;  // a cycle
      } else if (color[ti] == 2) {
        a.completions_[s] =
            capped_add(a.completions_[s], capped_mul(a.atom_size(atom), a.completions_[ti]));
      } else {
        color[ti] = 1;
        a.completions_[ti] = a.outcomes_[ti] != kNoOutcome ? 1 : 0;
        stack.push_back({t, 0});
      }
    }
  }

  for (size_t i = 0; i < spec.listed.size() && i < 64; ++i) {
    if (a.outcome_of(spec.listed[i]) != kNoOutcome) a.listed_reaching_ |= uint64_t{1} << i;
  }
  a.unlisted_keys_ =
      a.completions(a.start_) > static_cast<int64_t>(__builtin_popcountll(a.listed_reaching_));
  return automaton;
}

size_t KeyAutomaton::atom_of(uint32_t cp) const {
  if (cp < 128) return static_cast<size_t>(ascii_atoms_[cp]);
  return static_cast<size_t>(std::upper_bound(atom_starts_.begin(), atom_starts_.end(), cp) -
                             atom_starts_.begin() - 1);
}

int64_t KeyAutomaton::atom_size(size_t atom) const {
  const uint32_t end = atom + 1 < atoms() ? atom_starts_[atom + 1] : kCodePointEnd;
  return scalar_values(atom_starts_[atom], end - 1);
}

int32_t KeyAutomaton::outcome(State s) const {
  return s == kDead ? kNoOutcome : outcomes_[static_cast<size_t>(s)];
}

int64_t KeyAutomaton::completions_via(State s, uint32_t lo, uint32_t hi) const {
  if (s == kDead || lo > hi) return 0;
  hi = std::min(hi, kCodePointEnd - 1);
  int64_t total = 0;
  for (size_t atom = atom_of(lo); atom < atoms() && atom_starts_[atom] <= hi; ++atom) {
    const State t = table_[static_cast<size_t>(s) * atoms() + atom];
    if (t == kDead) continue;
    const uint32_t end = atom + 1 < atoms() ? atom_starts_[atom + 1] : kCodePointEnd;
    const int64_t size = scalar_values(std::max(lo, atom_starts_[atom]), std::min(hi, end - 1));
    total = capped_add(total, capped_mul(size, completions_[static_cast<size_t>(t)]));
  }
  return total;
}

std::vector<std::string> KeyAutomaton::finite_keys(int64_t limit) const {
  std::vector<std::string> keys;
  if (start_ == kDead || completions(start_) > limit) return keys;
  // Depth first; every live state reaches an outcome, and the count bounds the code points
  // tried (an atom leads to completions() x its size keys).
  struct Visit {
    State state;
    size_t atom;
    uint32_t cp;    // the next code point of `atom` to try
    size_t length;  // bytes of the key that reaches this state
  };
  std::string key;
  std::vector<Visit> stack = {{start_, 0, atom_starts_.empty() ? 0 : atom_starts_[0], 0}};
  if (outcome(start_) != kNoOutcome) keys.push_back("");
  while (!stack.empty()) {
    Visit& v = stack.back();
    if (v.atom == atoms()) {
      stack.pop_back();
      continue;
    }
    const uint32_t end = v.atom + 1 < atoms() ? atom_starts_[v.atom + 1] : kCodePointEnd;
    const State t = table_[static_cast<size_t>(v.state) * atoms() + v.atom];
    if (t == kDead || v.cp >= end) {
      ++v.atom;
      if (v.atom < atoms()) v.cp = atom_starts_[v.atom];
      continue;
    }
    const uint32_t cp = v.cp++;
    key.resize(v.length);  // the characters of the states below this one
    append_utf8(cp, key);
    if (outcome(t) != kNoOutcome) keys.push_back(key);
    const size_t next_length = key.size();
    stack.push_back({t, 0, atom_starts_[0], next_length});
  }
  return keys;
}

int32_t KeyAutomaton::outcome_of(const std::string& key) const {
  if (find_invalid_utf8(key) != std::string::npos) return kNoOutcome;
  State s = start_;
  for (uint32_t cp : decode_utf8(key))
    s = step(s, cp);
  return outcome(s);
}

}  // namespace quench
