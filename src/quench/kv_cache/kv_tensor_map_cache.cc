#include "quench/kv_cache/kv_tensor_map_cache.h"

#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>

namespace quench {
namespace {

// Every input of make_kv_tensor_maps.
using MapKey =
    std::tuple<const void*, const void*, int32_t, int32_t, int32_t, int32_t, DType, KvLayout>;

// Layers x live caches stay far below this; a process that keeps creating caches starts over.
constexpr size_t kMaxEntries = 512;

}  // namespace

KvTensorMaps cached_kv_tensor_maps(const void* k_cache, const void* v_cache,
                                   const KvCacheLayout& kv) {
  static std::mutex mutex;
  static std::map<MapKey, KvTensorMaps> cache;
  const MapKey key{k_cache,         v_cache,     kv.num_pages, kv.page_size,
                   kv.num_kv_heads, kv.head_dim, kv.dtype,     kv.layout};
  const std::lock_guard<std::mutex> lock(mutex);
  if (const auto it = cache.find(key); it != cache.end()) return it->second;
  const KvTensorMaps maps = make_kv_tensor_maps(k_cache, v_cache, kv);
  if (cache.size() >= kMaxEntries) cache.clear();
  cache.emplace(key, maps);
  return maps;
}

}  // namespace quench
