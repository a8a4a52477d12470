#include "quench/ops/rope_quant_append/rope_append_path.h"

#include "quench/core/error.h"
#include "quench/ops/rope_quant_append/rope_quant_append.h"

namespace quench {

const char* rope_append_path_name(RopeAppendPath path) {
  return path == RopeAppendPath::kFused ? "fused" : "unfused";
}

RopeAppendPath parse_rope_append_path(const std::string& name) {
  if (name == "fused") return RopeAppendPath::kFused;
  if (name == "unfused") return RopeAppendPath::kUnfused;
  fail(str_cat("unknown rope_quant_append path '", name, "'; allowed: fused, unfused"));
}

void run_rope_quant_append(const RopeQuantAppendParams& p, RopeAppendPath path, cudaStream_t stream,
                           const RopeAppendWorkspace& workspace) {
  if (path == RopeAppendPath::kFused) {
    rope_quant_append_cuda(p, stream);
  } else {
    rope_quant_append_unfused_cuda(p, workspace, stream);
  }
}

}  // namespace quench
