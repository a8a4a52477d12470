#include "quench/layer/layer_workload.h"

#include <algorithm>
#include <cmath>
#include <random>

#include <unistd.h>

#include "quench/core/dtype.h"
#include "quench/core/error.h"
#include "quench/kv_cache/page_allocator.h"
#include "quench/numerics/bf16.h"
#include "quench/numerics/fp8.h"
#include "quench/ops/rope/rope_reference.h"

namespace quench {
namespace {

int32_t pages_for(int32_t tokens, int32_t page_size) {
  return (tokens + page_size - 1) / page_size;
}

std::vector<uint16_t> random_bf16(size_t count, float bound, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> dist(-bound, bound);
  std::vector<uint16_t> values(count);
  for (uint16_t& x : values)
    x = float_to_bf16_bits(dist(rng));
  return values;
}

float amax_bf16(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  float amax = 0.0f;
  for (uint16_t x : a)
    amax = std::max(amax, std::fabs(bf16_bits_to_float(x)));
  for (uint16_t x : b)
    amax = std::max(amax, std::fabs(bf16_bits_to_float(x)));
  return amax;
}

// Refuses a step whose host arrays would not fit this machine's memory, before allocating any of
// them: within the flags' bounds a step can still ask for terabytes, which ended in
// std::bad_alloc. Counted: the prefix's bf16 K/V with its positions and slots, the new tokens'
// bf16 q/k/v, both runs' caches (the KV dtype's and bf16) and a few output rows per token.
void check_host_memory(const LayerWorkload& w, const LayerDemoOptions& o) {
  double prefix_tokens = 0.0, new_tokens = 0.0;
  for (const auto* group : {&w.decode_steps, &w.prefill_chunks}) {
    for (const ScheduledSequence& s : *group) {
      prefix_tokens += s.num_cached_tokens;
      new_tokens += s.num_new_tokens;
    }
  }
  const double kv_row = static_cast<double>(o.num_kv_heads) * o.head_dim;
  const double q_row = static_cast<double>(o.num_q_heads) * o.head_dim;
  const double cache_bytes_per_row = static_cast<double>(dtype_bytes(o.kv_dtype, 1)) + 2.0;
  const double bytes =
      prefix_tokens * (kv_row * 2 * 2 + 12) + new_tokens * (q_row + 2 * kv_row) * 2 +
      static_cast<double>(w.num_pages) * o.page_size * kv_row * 2 * cache_bytes_per_row +
      new_tokens * q_row * 4 * 4;
  const double available =
      static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  QUENCH_REQUIRE(available <= 0.0 || bytes <= available, "quench layer: this step needs about ",
                 bytes / kGiB, " GiB of host memory (", prefix_tokens, " cached and ", new_tokens,
                 " new tokens, ", w.num_pages, " pages per cache), more than this machine's ",
                 available / kGiB,
                 " GiB; allowed: a smaller --context, --chunk, --decode-seqs or --prefill-seqs");
}

}  // namespace

LayerWorkload make_layer_workload(const LayerDemoOptions& o) {
  LayerWorkload w;
  w.num_q_heads = o.num_q_heads;
  w.num_kv_heads = o.num_kv_heads;
  w.head_dim = o.head_dim;
  w.page_size = o.page_size;
  w.layout = o.layout;
  w.rope = llama3_rope_config(o.head_dim);

  for (int32_t i = 0; i < o.decode_seqs; ++i) {
    ScheduledSequence s;
    s.num_cached_tokens = o.context + i * o.context / (2 * o.decode_seqs);
    s.num_new_tokens = 1;
    w.decode_steps.push_back(s);
  }
  for (int32_t j = 0; j < o.prefill_seqs; ++j) {
    ScheduledSequence s;
    s.num_cached_tokens = j % 2 == 0 ? 0 : o.context / 2;
    s.num_new_tokens = o.chunk;
    w.prefill_chunks.push_back(s);
  }
  int32_t pages_needed = 0;
  int32_t max_seq_len = 0;
  for (const auto* group : {&w.decode_steps, &w.prefill_chunks}) {
    for (const ScheduledSequence& s : *group) {
      pages_needed += pages_for(s.num_cached_tokens + s.num_new_tokens, o.page_size);
      max_seq_len = std::max(max_seq_len, s.num_cached_tokens + s.num_new_tokens);
    }
  }
  w.num_pages = pages_needed + 1;
  check_host_memory(w, o);
  PageAllocator allocator(w.num_pages);
  for (auto* group : {&w.decode_steps, &w.prefill_chunks}) {
    for (ScheduledSequence& s : *group) {
      s.pages = allocator.allocate(pages_for(s.num_cached_tokens + s.num_new_tokens, o.page_size));
      for (int32_t p = 0; p < s.num_cached_tokens; ++p) {
        w.prefix_positions.push_back(p);
        w.prefix_slots.push_back(
            static_cast<int64_t>(s.pages[static_cast<size_t>(p / o.page_size)]) * o.page_size +
            p % o.page_size);
      }
    }
  }
  w.metadata = build_attention_metadata(w.decode_steps, w.prefill_chunks, o.page_size, w.num_pages);

  std::mt19937_64 rng(o.seed);
  const size_t kv_row = static_cast<size_t>(o.num_kv_heads) * static_cast<size_t>(o.head_dim);
  const size_t q_row = static_cast<size_t>(o.num_q_heads) * static_cast<size_t>(o.head_dim);
  const auto prefix = static_cast<size_t>(w.num_prefix_tokens());
  const auto tokens = static_cast<size_t>(w.num_tokens());
  w.prefix_k = random_bf16(prefix * kv_row, 2.0f, rng);
  w.prefix_v = random_bf16(prefix * kv_row, 1.0f, rng);
  w.q = random_bf16(tokens * q_row, 2.0f, rng);
  w.k = random_bf16(tokens * kv_row, 2.0f, rng);
  w.v = random_bf16(tokens * kv_row, 1.0f, rng);

  w.cache_positions = max_seq_len;
  w.cos_sin_cache = build_rope_cos_sin_cache(w.rope, w.cache_positions);

  const float fp8_range = o.kv_dtype == DType::kFP8E5M2 ? kFp8E5M2Max : kFp8E4M3Max;
  const float rotation_bound = std::sqrt(2.0f);
  // The query's FP8 format is the prefill kernel's choice; e4m3's smaller range is safe for both.
  w.scales.q_scale = std::vector<float>{rotation_bound * amax_bf16(w.q, {}) / kFp8E4M3Max};
  w.scales.k_scale = std::vector<float>{rotation_bound * amax_bf16(w.prefix_k, w.k) / fp8_range};
  w.scales.v_scale = std::vector<float>{amax_bf16(w.prefix_v, w.v) / fp8_range};
  w.scales.o_scale = std::vector<float>{1.0f};
  return w;
}

}  // namespace quench
