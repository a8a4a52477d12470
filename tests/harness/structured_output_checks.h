// The structured-output tests' shared checks: schemas of one object (one string property, or
// closed properties), a prefix's byte-exact
// refusal, a vocabulary mask against the prefix token by token, and a request's greedy and
// sampled outputs on the tiny engine.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "quench/engine/llm_engine.h"
#include "quench/engine/structured_output/json_schema.h"
#include "quench/engine/structured_output/json_schema_prefix.h"
#include "quench/engine/structured_output/json_token_masks.h"
#include "quench/ops/sampling/logit_edits.h"
#include "quench/tokenizer/tokenizer.h"

namespace quench::testing_support {

// An object with one required string property "s" under `constraint` (e.g. "maxLength": 3).
inline std::shared_ptr<const JsonSchema> string_property_schema(const std::string& constraint) {
  return JsonSchema::compile(
      nlohmann::json::parse(R"({"type": "object", "properties": {"s": {"type": "string", )" +
                            constraint + R"(}}, "required": ["s"]})"));
}

// An object schema of exactly these properties, `required` of them required.
inline nlohmann::json closed_object(const nlohmann::json& properties,
                                    const nlohmann::json& required) {
  return {{"type", "object"},
          {"properties", properties},
          {"required", required},
          {"additionalProperties", false}};
}

// {key: <a value of `property`>}, nothing else.
inline std::shared_ptr<const JsonSchema> one_property_object(const std::string& key,
                                                             const nlohmann::json& property) {
  return JsonSchema::compile(closed_object({{key, property}}, {key}));
}

// The texts of every object of at most two distinct keys among `keys` (written as given between
// the quotes), each with one of `values` (JSON texts), the empty object first.
inline std::vector<std::string> objects_of_two_keys_at_most(
    const std::vector<std::string>& keys, const std::vector<std::string>& values) {
  std::vector<std::string> texts = {"{}"};
  for (const std::string& k1 : keys) {
    for (const std::string& v1 : values) {
      const std::string one = "{\"" + k1 + "\": " + v1;
      texts.push_back(one + "}");
      for (const std::string& k2 : keys) {
        if (k2 == k1) continue;
        for (const std::string& v2 : values)
          texts.push_back(one + ", \"" + k2 + "\": " + v2 + "}");
      }
    }
  }
  return texts;
}

// The whole text is accepted and complete.
inline bool admits_whole(const JsonSchema& schema, const std::string& text) {
  JsonSchemaPrefix p(schema);
  return p.feed(text) && p.complete();
}

// `text` is refused at byte `at` (the bytes before it are accepted).
inline void expect_refused_at(const JsonSchema& schema, const std::string& text, size_t at) {
  JsonSchemaPrefix p(schema);
  ASSERT_TRUE(p.feed(text.substr(0, at))) << text << " refused before byte " << at;
  EXPECT_FALSE(p.feed(text.substr(at, 1))) << text << " accepted byte " << at;
}

// For every token, the mask allows it exactly where a copy of the prefix accepts its bytes
// (special tokens and tokens without bytes: never, but for the stop tokens where the prefix may
// stop). Returns the mask (`label` names the prefix).
inline std::vector<uint32_t> expect_mask_follows_prefix(const Tokenizer& tokenizer,
                                                        JsonTokenMasks& masks,
                                                        const JsonSchemaPrefix& prefix,
                                                        const std::vector<int32_t>& stop_ids,
                                                        const std::string& label) {
  const std::vector<uint32_t> bits = masks.allowed_bits(prefix);
  const auto words = static_cast<int32_t>(bits.size());
  EXPECT_EQ(bits.size(), (static_cast<size_t>(tokenizer.vocab_size()) + 31) / 32) << label;
  int32_t allowed = 0;
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    bool accepts;
    if (tokenizer.is_special(id)) {
      accepts =
          prefix.may_stop() && std::find(stop_ids.begin(), stop_ids.end(), id) != stop_ids.end();
    } else {
      JsonSchemaPrefix next = prefix;
      const std::string bytes = tokenizer.token_bytes(id, true, true);
      accepts = !bytes.empty() && next.feed(bytes);
    }
    EXPECT_EQ(logit_allowed(bits.data(), words, id), accepts) << label << " token " << id;
    allowed += accepts ? 1 : 0;
  }
  EXPECT_GT(allowed, 0) << label << ": the mask allows nothing";
  return bits;
}

// The decoded outputs and finish reasons of two prompts under each of `params`.
inline std::vector<std::pair<std::string, FinishReason>> outputs_of(
    LlmEngine& engine, const std::vector<SamplingParams>& params) {
  std::vector<std::pair<std::string, FinishReason>> outputs;
  for (const SamplingParams& p : params) {
    for (const RequestOutput& out : engine.generate({{5, 6, 7}, {9, 10, 11, 12}}, p))
      outputs.emplace_back(engine.tokenizer()->decode(out.output, true), out.finish_reason);
  }
  return outputs;
}

// outputs_of `params` as given (greedy, say) and again sampled at temperature 1 with `seed`.
inline std::vector<std::pair<std::string, FinishReason>> greedy_and_sampled_outputs(
    LlmEngine& engine, const SamplingParams& params, uint64_t seed) {
  SamplingParams sampled = params;
  sampled.temperature = 1.0f;
  sampled.seed = seed;
  return outputs_of(engine, {params, sampled});
}

}  // namespace quench::testing_support
