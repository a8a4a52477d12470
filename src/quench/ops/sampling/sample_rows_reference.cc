#include "quench/ops/sampling/sample_rows_reference.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "quench/core/error.h"

// The draw's exp and ln take ~20 fused multiply-adds a token. On the x86-64 baseline std::fma is
// a library call; a clone of the draw built for CPUs with FMA units runs the same arithmetic (a
// fused multiply-add rounds once either way, so the tokens do not change) several times faster.
// The file is compiled with -ffp-contract=off (CMakeLists.txt), so that the clone fuses only what
// the code asks to fuse, as the GPU does.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define QUENCH_FMA_CLONES __attribute__((target_clones("fma", "default")))
#define QUENCH_ALWAYS_INLINE __attribute__((always_inline))
#else
#define QUENCH_FMA_CLONES
#define QUENCH_ALWAYS_INLINE
#endif

namespace quench {

void check_row_sampler(const RowSampler& s) {
  QUENCH_REQUIRE(std::isfinite(s.temperature) && s.temperature >= 0.0f, "temperature ",
                 s.temperature, " must be finite and >= 0 (0 = greedy)");
  QUENCH_REQUIRE(s.top_k >= 0, "top_k ", s.top_k, " must be >= 0 (0 = all tokens)");
  QUENCH_REQUIRE(std::isfinite(s.top_p) && s.top_p > 0.0f && s.top_p <= 1.0f, "top_p ", s.top_p,
                 " must be in (0, 1]");
  QUENCH_REQUIRE(std::isfinite(s.min_p) && s.min_p >= 0.0f && s.min_p <= 1.0f, "min_p ", s.min_p,
                 " must be in [0, 1]");
}

// Only the kept tokens are ordered: the top_k first by nth_element and a sort of those k; for
// top_p a ranked prefix that grows 4x until it holds the nucleus (a few hundred tokens at usual
// temperatures). A full sort of a 128k vocabulary per token would cost ~10 ms of host time.
QUENCH_FMA_CLONES int32_t sample_row_reference(std::span<const float> logits,
                                               const RowSampler& sampler) {
  QUENCH_REQUIRE(!logits.empty(), "sample_row_reference: empty logits");
  check_row_sampler(sampler);
  for (float x : logits)
    if (!std::isfinite(x)) return -1;
  const size_t vocab = logits.size();
  const auto top = std::max_element(logits.begin(), logits.end());
  if (sampling_is_greedy(sampler.temperature)) return static_cast<int32_t>(top - logits.begin());
  const float max_logit = *top;
  const float inv_t = 1.0f / sampler.temperature;
  // Inlined, so that the clone's fused multiply-adds reach the exp (a lambda is a function of its
  // own, built for the baseline).
  const auto weight = [&](int32_t id) QUENCH_ALWAYS_INLINE {
    return sampling_weight(logits[static_cast<size_t>(id)], max_logit, inv_t, sampler.min_p);
  };
  const auto ranks_before = [&](int32_t a, int32_t b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  // order[0, ranked) is the ranking's prefix, in order; `kept` of it (or of all) are candidates.
  const auto rank_more = [&](size_t from, size_t to) {
    const auto first = order.begin() + static_cast<std::ptrdiff_t>(from);
    const auto last = order.begin() + static_cast<std::ptrdiff_t>(to);
    if (to < vocab) std::nth_element(first, last, order.end(), ranks_before);
    std::sort(first, last, ranks_before);
  };
  size_t kept = vocab;
  size_t ranked = 0;
  if (sampler.top_k > 0 && static_cast<size_t>(sampler.top_k) < vocab) {
    kept = static_cast<size_t>(sampler.top_k);
    rank_more(0, kept);
    ranked = kept;
  }
  if (sampler.top_p < 1.0f) {
    uint64_t total = 0;
    for (size_t i = 0; i < kept; ++i)
      total += sampling_fixed_weight(weight(order[i]));
    const uint64_t target = sampling_nucleus_target(sampler.top_p, total);
    uint64_t sum = 0;
    size_t nucleus = 0;
    while (true) {
      if (nucleus == ranked) {
        const size_t more = std::min(std::max<size_t>(256, ranked * 4), kept);
        rank_more(ranked, more);
        ranked = more;
      }
      sum += sampling_fixed_weight(weight(order[nucleus]));
      ++nucleus;
      if (sum >= target || nucleus == kept) break;
    }
    kept = nucleus;
  }
  int32_t best = -1;
  float best_score = 0.0f;
  for (size_t i = 0; i < kept; ++i) {
    const int32_t id = order[i];
    const float w = weight(id);
    if (w == 0.0f) continue;
    const float score = sampling_score(w, sampler.key, id);
    if (best < 0 || score > best_score || (score == best_score && id < best)) {
      best = id;
      best_score = score;
    }
  }
  return best;
}

}  // namespace quench
