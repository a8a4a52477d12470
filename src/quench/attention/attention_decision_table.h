// The human-readable table of a backend selection, as `quench explain` prints it:
//   phase    kernel     q dtype  KV dtype  out dtype  reason
#pragma once

#include <string>

#include "quench/attention/attention_kernel_selection.h"

namespace quench {

// A heading line with config.describe(), then one row per phase (prefill, decode), each line
// ending in '\n'.
std::string format_attention_decision_table(const AttentionBackendSelection& selection);

}  // namespace quench
