// The structured-output tests' one check of a vocabulary mask: for every token, the mask allows
// it exactly where a copy of the prefix accepts its bytes (special tokens and tokens without
// bytes: never, but for the stop tokens where the prefix may stop).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "quench/engine/structured_output/json_schema_prefix.h"
#include "quench/engine/structured_output/json_token_masks.h"
#include "quench/ops/sampling/logit_edits.h"
#include "quench/tokenizer/tokenizer.h"

namespace quench::testing_support {

// Returns the mask's allowed tokens, after checking each of them (`label` names the prefix).
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

}  // namespace quench::testing_support
