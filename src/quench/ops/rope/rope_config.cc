#include "quench/ops/rope/rope_config.h"

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
  QUENCH_REQUIRE(rotary_dim > 0 && rotary_dim % 2 == 0 && rotary_dim <= head_dim, "rotary_dim ",
                 rotary_dim, " must be even and in [2, head_dim=", head_dim, "]");
  QUENCH_REQUIRE(theta > 1.0f, "rope theta ", theta, " must be > 1");
  if (llama3_factor > 0.0f) {
    QUENCH_REQUIRE(llama3_high_freq_factor > llama3_low_freq_factor, "llama3 high_freq_factor ",
                   llama3_high_freq_factor, " must exceed low_freq_factor ",
                   llama3_low_freq_factor);
    QUENCH_REQUIRE(llama3_original_max_position > 0, "llama3 original_max_position_embeddings ",
                   llama3_original_max_position, " must be > 0");
  }
}

}  // namespace quench
