#include "quench/attention/attention_decision_table.h"

#include <algorithm>
#include <array>
#include <vector>

namespace quench {
namespace {

using Row = std::array<std::string, 6>;

Row row_of(const AttentionPhaseDecision& d) {
  return {attention_phase_name(d.phase), d.kernel->name(),        dtype_name(d.q_dtype),
          dtype_name(d.kv_dtype),        dtype_name(d.out_dtype), d.reason};
}

}  // namespace

std::string format_attention_decision_table(const AttentionBackendSelection& selection) {
  const std::vector<Row> rows = {{"phase", "kernel", "q dtype", "KV dtype", "out dtype", "reason"},
                                 row_of(selection.prefill()),
                                 row_of(selection.decode())};
  std::array<size_t, 6> width{};
  for (const Row& r : rows) {
    for (size_t c = 0; c < r.size(); ++c)
      width[c] = std::max(width[c], r[c].size());
  }
  std::string text = "Attention backend for " + selection.config().describe() + "\n";
  for (const Row& r : rows) {
    for (size_t c = 0; c + 1 < r.size(); ++c) {
      text += r[c] + std::string(width[c] - r[c].size() + 2, ' ');
    }
    text += r.back() + "\n";
  }
  return text;
}

}  // namespace quench
