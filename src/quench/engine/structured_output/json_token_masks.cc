#include "quench/engine/structured_output/json_token_masks.h"

#include <algorithm>
#include <array>
#include <climits>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "quench/tokenizer/tokenizer.h"

namespace quench {
namespace {

// The bytes a plain JSON string takes as themselves: printable ASCII but the quote and the
// backslash (JsonTokenMasks::plain_).
bool is_plain_byte(unsigned char c) {
  return c >= 0x20 && c <= 0x7e && c != '"' && c != '\\';
}

// Feeds one byte to `prefix`; false where it refuses it.
bool feed_byte(JsonSchemaPrefix& prefix, unsigned char c) {
  return prefix.feed(std::string_view(reinterpret_cast<const char*>(&c), 1));
}

// Whether `loops(c)` holds for every plain byte c; 'a' first: most states refuse it or move on at
// once.
template <typename Loops>
bool every_plain_byte(const Loops& loops) {
  if (!loops('a')) return false;
  for (unsigned c = 0x20; c <= 0x7e; ++c) {
    if (is_plain_byte(static_cast<unsigned char>(c)) && c != 'a' &&
        !loops(static_cast<unsigned char>(c)))
      return false;
  }
  return true;
}

// Whether every plain byte leads `prefix` back to its own key: then a token of plain bytes only
// leaves the prefix as it was after each of its bytes (two prefixes with the same key accept the
// same continuations), so it is taken.
bool plain_bytes_loop(const JsonSchemaPrefix& prefix, const std::string& key) {
  return every_plain_byte([&](unsigned char c) {
    JsonSchemaPrefix next = prefix;
    return feed_byte(next, c) && next.key() == key;
  });
}

// The same for a grammar's walk from its first state ids[0]: every plain byte steps back to it
// (states are numbered by what they accept, GrammarSteps).
bool plain_bytes_loop(GrammarSteps& steps, std::vector<int32_t>& ids) {
  return every_plain_byte([&](unsigned char c) {
    const int32_t next = steps.step(std::span<int32_t>(ids.data(), 1), c);
    return next == ids[0];  // after the step: an emptied table renumbers ids[0] in place
  });
}

// Where the plain bytes do not all loop, tokens of plain bytes may still be decided without a
// walk: from the prefix, the largest set of plain bytes that lead it to one same key, then from
// the state that set reaches the largest such set again, and so on, one step per byte of a token
// (a counted class such as [A-Za-z ]{1,40}, a maxLength, a key that stops matching any property
// name and is free from there on). Every token whose byte i lies in step i's set leaves the prefix
// in the state of the key that step reached (prefixes with one key accept the same
// continuations), so it is taken; one whose byte i is refused by step i (its earlier bytes in
// their steps' sets) is refused; the others are walked.

// What one step of the run does with each byte: kWalk (not tried, or leads elsewhere), kTaken
// (leads to the step's key), kRefused.
enum RunByte : uint8_t { kWalk = 0, kTaken = 1, kRefused = 2 };
using RunStep = std::array<uint8_t, 256>;
struct UniformRun {
  std::vector<RunStep> steps;  // steps[i]: a token's byte i; empty: no run
  // Whether the last step's state came back to its own key: then steps.back() holds for every
  // later byte too.
  bool repeats = false;
  // A token's decision from its byte `from` on, its bytes before `from` having been taken by
  // their steps: kTaken, kRefused or kWalk (mark_taken's 1, 2 and 0); `stop` gets the position
  // that decided it (the length where every byte was taken). A byte other than a plain one is
  // never taken, so a token with one is walked or refused.
  uint8_t decide(std::string_view bytes, size_t from, size_t& stop) const {
    const size_t stepped = std::min(bytes.size(), steps.size());
    for (stop = from; stop < stepped; ++stop) {
      const uint8_t what = steps[stop][static_cast<unsigned char>(bytes[stop])];
      if (what != kTaken) return what;
    }
    if (stop == bytes.size()) return kTaken;
    if (!repeats) return kWalk;
    const RunStep& last = steps.back();
    for (; stop < bytes.size(); ++stop) {
      const uint8_t what = last[static_cast<unsigned char>(bytes[stop])];
      if (what != kTaken) return what;
    }
    return kTaken;
  }
};

// The key after `c`, or "" where the prefix refuses it (keys are never empty).
std::string key_after(const JsonSchemaPrefix& prefix, unsigned char c) {
  JsonSchemaPrefix next = prefix;
  if (!feed_byte(next, c)) return "";
  return next.key();
}

// The keys that `bytes` lead `state` to, with the bytes that lead to each; the refused ones are
// marked kRefused in `step`.
void group_by_key(const JsonSchemaPrefix& state, const std::vector<unsigned char>& bytes,
                  std::unordered_map<std::string, std::vector<unsigned char>>& by_key,
                  RunStep& step) {
  for (unsigned char c : bytes) {
    std::string key = key_after(state, c);
    if (key.empty()) {
      step[c] = kRefused;
    } else {
      by_key[std::move(key)].push_back(c);
    }
  }
}

// The largest group of by_key (null where it is empty).
const std::pair<const std::string, std::vector<unsigned char>>* largest_group(
    const std::unordered_map<std::string, std::vector<unsigned char>>& by_key) {
  const std::pair<const std::string, std::vector<unsigned char>>* largest = nullptr;
  for (const auto& group : by_key) {
    if (largest == nullptr || group.second.size() > largest->second.size()) largest = &group;
  }
  return largest;
}

// The uniform run from `prefix`, followed up to `max_length` bytes; no steps where the first
// step's set has fewer than kMinRunBytes bytes (the per-token checks would cost more than they
// save). After the first step, the previous step's set is tried first: where it leads on to one
// key that is not the state's own (a counted class), that set is the step's and the other bytes
// are not tried (tokens with them are walked); where it splits, or loops back to the state's own
// key, every plain byte is tried.
UniformRun uniform_run(const JsonSchemaPrefix& prefix, int32_t max_length) {
  constexpr size_t kMinRunBytes = 8;
  static const std::vector<unsigned char> plain_bytes = [] {
    std::vector<unsigned char> bytes;
    for (unsigned c = 0x20; c <= 0x7e; ++c) {
      if (is_plain_byte(static_cast<unsigned char>(c)))
        bytes.push_back(static_cast<unsigned char>(c));
    }
    return bytes;
  }();
  UniformRun run;
  JsonSchemaPrefix state = prefix;
  std::vector<unsigned char> set = plain_bytes;  // the bytes tried first
  std::unordered_map<std::string, std::vector<unsigned char>> by_key;
  for (int32_t length = 1; length <= max_length; ++length) {
    RunStep step{};  // kWalk
    by_key.clear();
    group_by_key(state, set, by_key, step);
    const std::string state_key = state.key();
    const bool tried_all = set.size() == plain_bytes.size();
    if (!tried_all &&
        (by_key.size() > 1 || (by_key.size() == 1 && by_key.begin()->first == state_key))) {
      std::vector<unsigned char> others;
      for (unsigned char c : plain_bytes) {
        if (std::find(set.begin(), set.end(), c) == set.end()) others.push_back(c);
      }
      group_by_key(state, others, by_key, step);
    }
    const auto* group = largest_group(by_key);
    if (length == 1 && (group == nullptr || group->second.size() < kMinRunBytes))
      return UniformRun{};
    if (group != nullptr) {
      for (unsigned char c : group->second)
        step[c] = kTaken;
    }
    run.steps.push_back(step);
    if (group == nullptr) return run;  // every byte tried refused: no token goes on from here
    if (group->first == state_key) {   // back at its own key: every later step is this one
      run.repeats = true;
      return run;
    }
    set = group->second;
    feed_byte(state, set[0]);
  }
  return run;
}

}  // namespace

JsonTokenMasks::JsonTokenMasks(const Tokenizer& tokenizer, std::vector<int32_t> stop_ids)
    : vocab_size_(tokenizer.vocab_size()), stop_ids_(std::move(stop_ids)) {
  std::vector<std::string> bytes(static_cast<size_t>(vocab_size_));
  for (int32_t id = 0; id < vocab_size_; ++id) {
    if (tokenizer.is_special(id)) continue;
    bytes[static_cast<size_t>(id)] = tokenizer.token_bytes(id, true, true);
    if (!bytes[static_cast<size_t>(id)].empty()) sorted_.push_back(id);
  }
  std::sort(sorted_.begin(), sorted_.end(), [&](int32_t a, int32_t b) {
    return bytes[static_cast<size_t>(a)] < bytes[static_cast<size_t>(b)];
  });
  sorted_start_.reserve(sorted_.size() + 1);
  for (int32_t id : sorted_) {
    sorted_start_.push_back(sorted_bytes_.size());
    sorted_bytes_ += bytes[static_cast<size_t>(id)];
  }
  sorted_start_.push_back(sorted_bytes_.size());
  plain_.assign(sorted_.size(), 0);
  for (size_t i = 0; i < sorted_.size(); ++i) {
    const std::string_view token = sorted_token(i);
    plain_[i] = std::all_of(token.begin(), token.end(),
                            [](char c) { return is_plain_byte(static_cast<unsigned char>(c)); });
    if (plain_[i] != 0)
      max_plain_bytes_ = std::max(max_plain_bytes_, static_cast<int32_t>(token.size()));
  }
  shared_.assign(sorted_.size(), 0);
  for (size_t i = 1; i < sorted_.size(); ++i) {
    const std::string_view a = sorted_token(i - 1);
    const std::string_view b = sorted_token(i);
    size_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n])
      ++n;
    shared_[i] = static_cast<int32_t>(n);
  }
}

namespace {

// Marks in `mask` the tokens whose bytes `walk` takes: walk.feed(d, c) steps the state after a
// token's first d bytes by its byte c into the state at depth d + 1 (false: refused), the state at
// depth 0 being the prefix. The tokens are walked in byte order: a token feeds only the bytes past
// the ones it shares with the token before it, and a refused start refuses every token that
// starts with it at once.
// decided (or null): per sorted token, 1 taken and 2 refused without feeding it, 0 walked
// (JsonTokenMasks::plain_ where the prefix loops on plain bytes, or a UniformRun's decisions).
// Skipping a token leaves the walk's states as the last fed token left them: the next token
// shares with that one the least of the shared counts since (sorted order), which is what
// `shared` keeps.
// token(i): the bytes of sorted token i.
template <typename Token, typename Walk>
void mark_taken(const Token& token, const std::vector<int32_t>& sorted,
                const std::vector<int32_t>& shared_with_previous, Walk& walk,
                const std::vector<uint8_t>* decided, std::vector<uint32_t>& mask) {
  // refused: the length of the last token's refused start (none: INT32_MAX). shared: the bytes
  // the current token shares with that token (the least shared_with_previous since, the tokens
  // being sorted).
  int32_t refused = INT32_MAX, shared = 0;
  for (size_t i = 0; i < sorted.size(); ++i) {
    const int32_t id = sorted[i];
    shared = std::min(shared, shared_with_previous[i]);
    if (shared >= refused) continue;  // starts with a refused start
    if (decided != nullptr && (*decided)[i] != 0) {
      if ((*decided)[i] == 1) mask[static_cast<size_t>(id) / 32] |= 1u << (id % 32);
      continue;
    }
    // The shared bytes were fed (a token is fed up to its refused start, and one that shares
    // that start was skipped above).
    const std::string_view bytes = token(i);
    const auto length = static_cast<int32_t>(bytes.size());
    walk.reserve(length);
    refused = INT32_MAX;
    for (int32_t d = shared; d < length; ++d) {
      if (!walk.feed(d, static_cast<unsigned char>(bytes[static_cast<size_t>(d)]))) {
        refused = d + 1;
        break;
      }
    }
    shared = length;
    if (refused == INT32_MAX) mask[static_cast<size_t>(id) / 32] |= 1u << (id % 32);
  }
}

// The walk's states as prefixes, one per depth, assigned into one another (no allocation per
// byte once they have grown).
struct PrefixWalk {
  std::vector<JsonSchemaPrefix>& states;
  void reserve(int32_t length) {
    if (states.size() <= static_cast<size_t>(length))
      states.resize(static_cast<size_t>(length) + 1, states[0]);
  }
  bool feed(int32_t d, unsigned char c) {
    JsonSchemaPrefix& next = states[static_cast<size_t>(d) + 1];
    next = states[static_cast<size_t>(d)];
    return feed_byte(next, c);
  }
};

// A grammar's walk: its states numbered by GrammarSteps, one id per depth.
struct GrammarWalk {
  GrammarSteps& steps;
  std::vector<int32_t>& ids;
  void reserve(int32_t length) {
    if (ids.size() <= static_cast<size_t>(length)) ids.resize(static_cast<size_t>(length) + 1);
  }
  bool feed(int32_t d, unsigned char c) {
    const int32_t next = steps.step(std::span<int32_t>(ids.data(), static_cast<size_t>(d) + 1), c);
    ids[static_cast<size_t>(d) + 1] = next;
    return next != GrammarSteps::kRefused;
  }
};

}  // namespace

const std::vector<uint8_t>* JsonTokenMasks::uniform_run_decisions(const JsonSchemaPrefix& prefix) {
  const UniformRun run = uniform_run(prefix, max_plain_bytes_);
  if (run.steps.empty()) return nullptr;
  run_decisions_.resize(sorted_.size());
  // In byte order a token shares its first shared_[i] bytes with the one before: where that one
  // was decided by one of them, so is this one; else the bytes before shared_[i] were taken, and
  // the decision goes on from there (about one new byte per token, not all of them).
  // Through local pointers: a store through uint8_t* may alias anything, so the members'
  // pointers would be loaded again after every decision.
  const char* all_bytes = sorted_bytes_.data();
  const size_t* starts = sorted_start_.data();
  const int32_t* shared_bytes = shared_.data();
  uint8_t* decisions = run_decisions_.data();
  const size_t count = sorted_.size();
  // previous_stop: the position that decided the token before (its length where it was taken).
  size_t previous_stop = 0;
  uint8_t previous = 0;
  for (size_t i = 0; i < count; ++i) {
    const auto shared = static_cast<size_t>(shared_bytes[i]);
    // Where this token shares the byte that decided the token before, it is decided alike.
    if (shared <= previous_stop) {
      previous = run.decide(std::string_view(all_bytes + starts[i], starts[i + 1] - starts[i]),
                            shared, previous_stop);
    }
    decisions[i] = previous;
  }
  return &run_decisions_;
}

const std::vector<uint32_t>& JsonTokenMasks::allowed_bits(const JsonSchemaPrefix& prefix) {
  const std::string key = prefix.key();
  auto it = cache_.find(key);
  if (it != cache_.end()) return *it->second;
  const auto token = [this](size_t i) { return sorted_token(i); };
  auto mask =
      std::make_shared<std::vector<uint32_t>>((static_cast<size_t>(vocab_size_) + 31) / 32, 0u);
  if (const GrammarPrefix* grammar = prefix.grammar()) {
    grammar_ids_.assign(1, grammar_steps_.start(*grammar));
    GrammarWalk walk{grammar_steps_, grammar_ids_};
    const bool plain_loop = plain_bytes_loop(grammar_steps_, grammar_ids_);
    mark_taken(token, sorted_, shared_, walk, plain_loop ? &plain_ : nullptr, *mask);
  } else {
    if (depth_states_.empty()) depth_states_.assign(1, prefix);
    depth_states_[0] = prefix;
    PrefixWalk walk{depth_states_};
    mark_taken(token, sorted_, shared_, walk,
               plain_bytes_loop(prefix, key) ? &plain_ : uniform_run_decisions(prefix), *mask);
  }
  if (prefix.may_stop()) {
    for (int32_t id : stop_ids_) {
      if (id >= 0 && id < vocab_size_) (*mask)[static_cast<size_t>(id) / 32] |= 1u << (id % 32);
    }
  }
  if (cache_.size() >= kMaxCached) cache_.clear();
  return *cache_.emplace(key, std::move(mask)).first->second;
}

}  // namespace quench
