#include "quench/ops/rope/rope_config.h"

#include <cmath>

#include "quench/core/error.h"

namespace quench {

const char* rope_style_name(RopeStyle style) {
  return style == RopeStyle::kNeox ? "neox" : "gptj";
}

RopeStyle parse_rope_style(const std::string& name) {
  if (name == "neox") return RopeStyle::kNeox;
  if (name == "gptj") return RopeStyle::kGptj;
  fail(str_cat("unknown RoPE style '", name, "'; allowed: neox, gptj"));
}

void RopeConfig::validate(int32_t head_dim) const {
  // rope_pair_index reads any style other than kNeox as gptj.
  QUENCH_REQUIRE(style == RopeStyle::kNeox || style == RopeStyle::kGptj, "RoPE style ",
                 static_cast<int>(style), " is not supported; allowed: neox (",
                 static_cast<int>(RopeStyle::kNeox), "), gptj (",
                 static_cast<int>(RopeStyle::kGptj), ")");
  QUENCH_REQUIRE(rotary_dim > 0 && rotary_dim % 2 == 0 && rotary_dim <= head_dim, "rotary_dim ",
                 rotary_dim, " must be even and in [2, head_dim=", head_dim, "]");
  QUENCH_REQUIRE(std::isfinite(theta) && theta > 1.0f, "rope theta ", theta,
                 " must be finite and > 1");
  // NaN compares false with 0, so it would turn the scaling off silently.
  QUENCH_REQUIRE(!std::isnan(llama3_factor) && llama3_factor != INFINITY, "llama3 factor ",
                 llama3_factor, " is invalid; allowed: <= 0 (no llama3 scaling) or finite and > 0");
  if (llama3_factor > 0.0f) {
    QUENCH_REQUIRE(std::isfinite(llama3_low_freq_factor) && llama3_low_freq_factor > 0.0f,
                   "llama3 low_freq_factor ", llama3_low_freq_factor,
                   " must be finite and > 0 (it divides original_max_position_embeddings)");
    QUENCH_REQUIRE(
        std::isfinite(llama3_high_freq_factor) && llama3_high_freq_factor > llama3_low_freq_factor,
        "llama3 high_freq_factor ", llama3_high_freq_factor,
        " must be finite and exceed low_freq_factor ", llama3_low_freq_factor);
    QUENCH_REQUIRE(llama3_original_max_position > 0, "llama3 original_max_position_embeddings ",
                   llama3_original_max_position, " must be > 0");
  }
}

}  // namespace quench
