// "json_masks" (host only): the cost of one structured-output vocabulary mask
// (engine/structured_output/json_token_masks.h), built from scratch (no cache), for the states a
// request meets: JSON mode inside a string and after '{', a plain string property, a string
// with a pattern, an enforced format, a bounded integer, an untagged union of objects, a key under
// propertyNames, a GBNF grammar's text. A mask is
// built once per new state and then cached, so this is what a schema's first request pays per
// state.
//
// The vocabulary is synthetic, 128256 tokens like Llama 3's: the 256 byte symbols, then words
// of 1-10 letters (45% with a leading space, some capitalized), numbers 0-999, JSON punctuation
// runs ("\":", "\",", "{\"", ...) and a few accented words; no merges (the masks read each
// token's bytes only). Metric: ms per mask, the median of 5 builds.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "harness/byte_level_tokenizer_json.h"
#include "quench/core/error.h"
#include "quench/engine/structured_output/json_token_masks.h"
#include "quench/tokenizer/byte_level.h"
#include "quench/tokenizer/tokenizer.h"
#include "support/bench_registry.h"

namespace quench::bench {
namespace {

constexpr int32_t kVocabSize = 128256;

std::string synthetic_tokenizer_json() {
  std::mt19937 rng(17);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  nlohmann::json vocab = nlohmann::json::object();  // ids are explicit: no order needed
  std::set<std::string> seen;
  auto add = [&](const std::string& bytes) {
    const std::string symbol = to_byte_level(bytes);
    if (!seen.insert(symbol).second) return;
    vocab[symbol] = static_cast<int32_t>(seen.size() - 1);
  };
  for (int b = 0; b < 256; ++b)
    add(std::string(1, static_cast<char>(b)));
  const char* punctuation[] = {"\":", "\",", "{\"", "}",    "},", "[", "]",  "\":\"", "\",\"", ".",
                               ",",   "\n",  "  ",  "\":[", "-",  "_", "'s", "\\n",   "\\\""};
  while (static_cast<int32_t>(seen.size()) < kVocabSize - 2) {
    const int kind = pick(100);
    std::string t;
    if (kind < 3) {
      t = std::to_string(pick(1000));
    } else if (kind < 8) {
      t = punctuation[pick(static_cast<int>(std::size(punctuation)))];
    } else {
      if (pick(100) < 45) t = " ";
      const int len = 1 + pick(10);
      for (int i = 0; i < len; ++i)
        t += static_cast<char>((i == 0 && pick(100) < 15 ? 'A' : 'a') + pick(26));
      if (pick(100) < 2) t += "\xc3\xa9";  // é
    }
    add(t);
  }
  nlohmann::ordered_json added = nlohmann::ordered_json::array();
  for (const char* special : {"<|begin_of_text|>", "<|end_of_text|>"}) {
    added.push_back({{"id", static_cast<int32_t>(seen.size())},
                     {"content", special},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
    seen.insert(special);
  }
  return testing_support::byte_level_tokenizer_json(vocab, added);
}

void run_json_masks_bench(const BenchOptions& options, BenchReporter& reporter) {
  const Tokenizer tokenizer =
      Tokenizer::from_json(synthetic_tokenizer_json(), "json_masks bench (synthetic)");
  const auto any = JsonSchema::any_object();
  const auto schema = JsonSchema::compile(nlohmann::json::parse(R"({"type": "object",
      "properties": {"plain": {"type": "string"},
                     "name": {"type": "string", "pattern": "^[A-Za-z ]{1,40}$"},
                     "email": {"type": "string", "format": "email"},
                     "when": {"type": "string", "format": "date-time"},
                     "count": {"type": "integer", "minimum": 0, "maximum": 1000},
                     "pet": {"anyOf": [
                         {"type": "object", "properties": {"name": {"type": "string"},
                                                           "meows": {"type": "boolean"}}},
                         {"type": "object", "properties": {"name": {"type": "string"},
                                                           "barks": {"type": "integer"}}}]}}})"));
  // Keys under propertyNames (a dict with constrained keys), and a GBNF grammar of JSON-like text.
  const auto named_keys = JsonSchema::compile(nlohmann::json::parse(R"({"type": "object",
      "propertyNames": {"pattern": "^[a-z_]{1,20}$"}, "additionalProperties": {"type": "integer"}})"));
  const auto grammar = JsonSchema::text_grammar(R"(root ::= "{" ws pair ("," ws pair)* ws "}"
pair ::= str ws ":" ws val
val  ::= str | num | "true" | "false" | "null"
str  ::= "\"" [^"\\]* "\""
num  ::= "-"? [0-9]+
ws   ::= [ \n]{0,4})");
  struct Case {
    const char* name;
    const JsonSchema* schema;
    const char* text;
  };
  const std::vector<Case> cases = {
      {"json mode, after '{'", any.get(), "{"},
      {"json mode, in a string", any.get(), "{\"a\": \"x"},
      {"plain string property", schema.get(), "{\"plain\": \"x"},
      {"pattern ^[A-Za-z ]{1,40}$, 1 char in", schema.get(), "{\"name\": \"x"},
      {"format email, in the domain", schema.get(), "{\"email\": \"ab@c"},
      {"format date-time, in the date", schema.get(), "{\"when\": \"2024-0"},
      {"integer in [0, 1000], after 1", schema.get(), "{\"count\": 1"},
      {"untagged union of 2 objects, in a key", schema.get(), "{\"pet\": {\"na"},
      {"untagged union of 2 objects, in a value", schema.get(), "{\"pet\": {\"name\": \"x"},
      {"propertyNames pattern, in a key", named_keys.get(), "{\"ab"},
      {"GBNF grammar, before a value", grammar.get(), "{\"a\": "},
      {"GBNF grammar, in a string", grammar.get(), "{\"a\": \"x"},
  };
  for (const Case& c : cases) {
    if (!options.wants_case(c.name)) continue;
    JsonSchemaPrefix prefix(*c.schema);
    QUENCH_REQUIRE(prefix.feed(c.text), "json_masks bench: the case text is refused: ", c.text);
    std::vector<double> ms;
    int64_t allowed = 0;
    for (int rep = 0; rep < 5; ++rep) {
      JsonTokenMasks masks(tokenizer, {});  // an empty cache: each build is timed
      const auto start = std::chrono::steady_clock::now();
      const std::vector<uint32_t>& bits = masks.allowed_bits(prefix);
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count());
      allowed = 0;
      for (uint32_t w : bits)
        allowed += __builtin_popcount(w);
    }
    std::sort(ms.begin(), ms.end());
    BenchRecord r;
    r.bench = "json_masks";
    r.case_name = c.name;
    r.metric = "ms";
    r.value = ms[ms.size() / 2];
    r.note = "allowed=" + std::to_string(allowed) + " of " + std::to_string(kVocabSize) +
             " vocab (synthetic), one host thread";
    reporter.record(r);
  }
}

QUENCH_REGISTER_HOST_BENCH("json_masks", run_json_masks_bench);

}  // namespace
}  // namespace quench::bench
