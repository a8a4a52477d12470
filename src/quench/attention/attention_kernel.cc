#include "quench/attention/attention_kernel.h"

namespace quench {

const char* support_level_name(SupportLevel level) {
  switch (level) {
    case SupportLevel::kMust:
      return "must";
    case SupportLevel::kMustNot:
      return "must not";
    case SupportLevel::kMay:
      return "may";
  }
  return "?";
}

}  // namespace quench
