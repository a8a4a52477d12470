#include "quench/engine/structured_output/json_token_masks.h"

#include <algorithm>
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

// Where the plain bytes do not all loop, tokens may still be decided by their length alone: run,
// the largest set of plain bytes that lead the prefix to one same key, may keep doing so byte
// after byte (a counted class such as [A-Za-z ]{1,40}, a maxLength), and then every token made of
// run bytes only leaves the prefix in that same state after each of its bytes: taken where its
// length is within the uniform steps, refused from the length where every run byte is refused.
struct UniformRun {
  bool in_run[256] = {};
  int32_t taken_up_to = 0;           // run-only tokens of this length or shorter are taken
  int32_t refused_from = INT32_MAX;  // and of this length or longer refused; between: walked
};

// The key after `c`, or "" where the prefix refuses it (keys are never empty).
std::string key_after(const JsonSchemaPrefix& prefix, unsigned char c) {
  JsonSchemaPrefix next = prefix;
  if (!feed_byte(next, c)) return "";
  return next.key();
}

// The uniform run from `prefix`, followed up to `max_length` bytes; taken_up_to 0 where no run
// of at least kMinRunBytes bytes exists (the per-token checks would cost more than they save).
UniformRun uniform_run(const JsonSchemaPrefix& prefix, int32_t max_length) {
  constexpr size_t kMinRunBytes = 8;
  UniformRun run;
  std::unordered_map<std::string, std::vector<unsigned char>> by_key;
  for (unsigned c = 0x20; c <= 0x7e; ++c) {
    if (!is_plain_byte(static_cast<unsigned char>(c))) continue;
    std::string key = key_after(prefix, static_cast<unsigned char>(c));
    if (!key.empty()) by_key[std::move(key)].push_back(static_cast<unsigned char>(c));
  }
  const std::vector<unsigned char>* bytes = nullptr;
  for (const auto& [key, group] : by_key) {
    if (bytes == nullptr || group.size() > bytes->size()) bytes = &group;
  }
  if (bytes == nullptr || bytes->size() < kMinRunBytes) return run;
  for (unsigned char c : *bytes)
    run.in_run[c] = true;
  JsonSchemaPrefix state = prefix;
  feed_byte(state, (*bytes)[0]);
  run.taken_up_to = 1;
  for (int32_t length = 2; length <= max_length; ++length) {
    const std::string first = key_after(state, (*bytes)[0]);
    for (size_t i = 1; i < bytes->size(); ++i) {
      if (key_after(state, (*bytes)[i]) != first) return run;  // the run splits: walk
    }
    if (first.empty()) {
      run.refused_from = length;
      return run;
    }
    if (first == state.key()) {  // every run byte loops from here on: all longer tokens taken
      run.taken_up_to = max_length;
      return run;
    }
    feed_byte(state, (*bytes)[0]);
    run.taken_up_to = length;
  }
  return run;
}

}  // namespace

JsonTokenMasks::JsonTokenMasks(const Tokenizer& tokenizer, std::vector<int32_t> stop_ids)
    : stop_ids_(std::move(stop_ids)) {
  bytes_.resize(static_cast<size_t>(tokenizer.vocab_size()));
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    if (tokenizer.is_special(id)) continue;
    bytes_[static_cast<size_t>(id)] = tokenizer.token_bytes(id, true, true);
    if (!bytes_[static_cast<size_t>(id)].empty()) sorted_.push_back(id);
  }
  std::sort(sorted_.begin(), sorted_.end(), [&](int32_t a, int32_t b) {
    return bytes_[static_cast<size_t>(a)] < bytes_[static_cast<size_t>(b)];
  });
  plain_.assign(sorted_.size(), 0);
  for (size_t i = 0; i < sorted_.size(); ++i) {
    const std::string& bytes = bytes_[static_cast<size_t>(sorted_[i])];
    plain_[i] = std::all_of(bytes.begin(), bytes.end(),
                            [](char c) { return is_plain_byte(static_cast<unsigned char>(c)); });
    if (plain_[i] != 0)
      max_plain_bytes_ = std::max(max_plain_bytes_, static_cast<int32_t>(bytes.size()));
  }
  shared_.assign(sorted_.size(), 0);
  for (size_t i = 1; i < sorted_.size(); ++i) {
    const std::string& a = bytes_[static_cast<size_t>(sorted_[i - 1])];
    const std::string& b = bytes_[static_cast<size_t>(sorted_[i])];
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
template <typename Walk>
void mark_taken(const std::vector<std::string>& bytes_of, const std::vector<int32_t>& sorted,
                const std::vector<int32_t>& shared_with_previous, Walk& walk,
                const std::vector<uint8_t>* decided, std::vector<uint32_t>& mask) {
  // refused: the length of the last token's refused start (none: INT32_MAX). shared: the bytes
  // the current token shares with that token (the least shared_with_previous since, the tokens
  // being sorted).
  int32_t refused = INT32_MAX, shared = 0;
  for (size_t i = 0; i < sorted.size(); ++i) {
    const int32_t id = sorted[i];
    const std::string& bytes = bytes_of[static_cast<size_t>(id)];
    shared = std::min(shared, shared_with_previous[i]);
    if (shared >= refused) continue;  // starts with a refused start
    if (decided != nullptr && (*decided)[i] != 0) {
      if ((*decided)[i] == 1) mask[static_cast<size_t>(id) / 32] |= 1u << (id % 32);
      continue;
    }
    // The shared bytes were fed (a token is fed up to its refused start, and one that shares
    // that start was skipped above).
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
  if (run.taken_up_to == 0) return nullptr;
  run_decisions_.assign(sorted_.size(), 0);
  for (size_t i = 0; i < sorted_.size(); ++i) {
    if (plain_[i] == 0) continue;
    const std::string& bytes = bytes_[static_cast<size_t>(sorted_[i])];
    if (!std::all_of(bytes.begin(), bytes.end(),
                     [&](char c) { return run.in_run[static_cast<unsigned char>(c)]; }))
      continue;
    const auto length = static_cast<int32_t>(bytes.size());
    if (length <= run.taken_up_to) run_decisions_[i] = 1;
    if (length >= run.refused_from) run_decisions_[i] = 2;
  }
  return &run_decisions_;
}

const std::vector<uint32_t>& JsonTokenMasks::allowed_bits(const JsonSchemaPrefix& prefix) {
  const std::string key = prefix.key();
  auto it = cache_.find(key);
  if (it != cache_.end()) return *it->second;
  auto mask = std::make_shared<std::vector<uint32_t>>((bytes_.size() + 31) / 32, 0u);
  if (const GrammarPrefix* grammar = prefix.grammar()) {
    grammar_ids_.assign(1, grammar_steps_.start(*grammar));
    GrammarWalk walk{grammar_steps_, grammar_ids_};
    const bool plain_loop = plain_bytes_loop(grammar_steps_, grammar_ids_);
    mark_taken(bytes_, sorted_, shared_, walk, plain_loop ? &plain_ : nullptr, *mask);
  } else {
    if (depth_states_.empty()) depth_states_.assign(1, prefix);
    depth_states_[0] = prefix;
    PrefixWalk walk{depth_states_};
    mark_taken(bytes_, sorted_, shared_, walk,
               plain_bytes_loop(prefix, key) ? &plain_ : uniform_run_decisions(prefix), *mask);
  }
  if (prefix.may_stop()) {
    for (int32_t id : stop_ids_) {
      if (id >= 0 && static_cast<size_t>(id) < bytes_.size())
        (*mask)[static_cast<size_t>(id) / 32] |= 1u << (id % 32);
    }
  }
  if (cache_.size() >= kMaxCached) cache_.clear();
  return *cache_.emplace(key, std::move(mask)).first->second;
}

}  // namespace quench
