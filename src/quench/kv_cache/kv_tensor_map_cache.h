// make_kv_tensor_maps, memoised per (K address, V address, layout). Every decode and prefill step
// runs attention once per layer over that layer's own cache tensors, and encoding two maps costs a
// few microseconds of host time (driver calls) per launch; the cached copy costs a lock and a
// lookup. A map depends on these inputs only, so an entry stays right as long as the addresses hold
// tensors of that layout, and a tensor freed and reallocated at the same address with the same
// layout is described by the same map.
#pragma once

#include "quench/kv_cache/kv_cache_layout.h"
#include "quench/kv_cache/kv_tensor_map.h"

namespace quench {

// Same contract and errors as make_kv_tensor_maps (nothing is cached when it throws).
// Thread-safe. Holds at most a few hundred entries (it starts over when full).
KvTensorMaps cached_kv_tensor_maps(const void* k_cache, const void* v_cache,
                                   const KvCacheLayout& kv);

}  // namespace quench
