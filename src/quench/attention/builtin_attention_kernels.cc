// The one list of attention kernels compiled into quench. Each kernel file owns its support
// check and exposes a registration function; adding a kernel is one line here. (An explicit list
// rather than static self-registration: quench_lib is a static library, and the linker would
// drop a kernel object file that nothing references.)
#include "quench/attention/attention_kernel_registry.h"
#include "quench/attention/cpu_attention_kernel.h"
#include "quench/attention/decode_gqa_attention_kernel.h"
#include "quench/attention/prefill_hopper_attention_kernel.h"
#include "quench/attention/prefill_mma_attention_kernel.h"
#include "quench/attention/reference_attention_kernel.h"

namespace quench {

void register_builtin_attention_kernels(AttentionKernelRegistry& registry) {
  register_reference_attention_kernel(registry);
  register_cpu_attention_kernel(registry);
  register_prefill_mma_attention_kernel(registry);
  register_decode_gqa_attention_kernel(registry);
  register_prefill_hopper_attention_kernel(registry);
}

}  // namespace quench
