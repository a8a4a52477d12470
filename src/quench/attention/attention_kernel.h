// The interface every attention kernel implements (the CPU reference today, the GPU kernels as
// they land). A kernel states which phases it serves, which query dtype it needs, and whether it
// can serve a configuration; the backend selection (attention_kernel_selection.h) decides from
// these answers once, at initialisation.
#pragma once

#include <cstddef>

#include <cstdint>
#include <string>
#include <utility>

#include "quench/attention/attention_config.h"
#include "quench/ops/attention/attention_params.h"

namespace quench {

// Answer of a support check (SPEC §1.1). kMust: this kernel is required (e.g. only it handles
// attention sinks); kMustNot: it cannot serve the configuration; kMay: no constraint either way.
enum class SupportLevel : uint8_t { kMust, kMustNot, kMay };

const char* support_level_name(SupportLevel level);  // "must", "must not", "may"

struct SupportCheck {
  SupportLevel level = SupportLevel::kMay;
  std::string reason;  // a sentence a user can act on, e.g. "SM90 is not supported for prefill."

  static SupportCheck must(std::string reason) { return {SupportLevel::kMust, std::move(reason)}; }
  static SupportCheck must_not(std::string reason) {
    return {SupportLevel::kMustNot, std::move(reason)};
  }
  static SupportCheck may(std::string reason) { return {SupportLevel::kMay, std::move(reason)}; }
};

// Scratch memory handed to a kernel's run().
struct KernelWorkspace {
  void* data = nullptr;
  size_t bytes = 0;
};

// Where the buffers a kernel reads and writes live.
enum class MemorySpace : uint8_t { kHost, kDevice };

class AttentionKernel {
 public:
  virtual ~AttentionKernel() = default;

  // Unique name, as users type it in kernel overrides ("reference", "decode_gqa", ...).
  virtual std::string name() const = 0;
  virtual bool serves(AttentionPhase phase) const = 0;
  virtual MemorySpace memory_space() const = 0;
  // The default policy picks, among kernels that answer kMay, the one with the highest priority.
  virtual int32_t priority() const = 0;

  // The query dtype this kernel needs in `phase` for config.kv_dtype, config.model_dtype and
  // config.allow_fp8_query (config.q_dtype is ignored). Must be config.model_dtype when
  // allow_fp8_query is false; the selection rejects a kernel that breaks this.
  virtual DType query_dtype(const AttentionConfig& config, AttentionPhase phase) const = 0;

  // Whether this kernel can serve `phase` of `config`, config.q_dtype being the query dtype it
  // will receive (the one query_dtype returned).
  virtual SupportCheck check(const AttentionConfig& config, AttentionPhase phase) const = 0;

  // Whether run() also writes params.out_fp8 (the o projection's e4m3 rows, attention_params.h)
  // for `config` with bf16 output; a kernel that cannot refuses params that ask for it.
  virtual bool writes_fp8_rows(const AttentionConfig& config) const {
    (void)config;
    return false;
  }
  // Scratch memory run() needs for `params` (in the kernel's memory space), e.g. split-KV
  // partials; 0 for most kernels. The caller allocates it once, before any graph capture, and
  // zeroes it then: a kernel may keep state there that each run leaves as it found it (decode's
  // split-merge counters).
  virtual size_t workspace_bytes(const AttentionParams& params) const {
    (void)params;
    return 0;
  }

  // Computes attention as attention_params.h specifies. Pointers are host memory for a kHost
  // kernel and device memory for a kDevice kernel; `stream` is a cudaStream_t for device
  // kernels (nullptr = the default stream) and unused by host kernels. `workspace` holds at
  // least workspace_bytes(params) bytes (a kernel may run slower, never wrong, with less). Must
  // not allocate or synchronize, so that device kernels can be captured in CUDA graphs.
  virtual void run(const AttentionParams& params, const KernelWorkspace& workspace,
                   void* stream) const = 0;
};

}  // namespace quench
