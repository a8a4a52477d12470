// Fused RoPE + quantize + paged KV append for large batches on sm_90: a persistent kernel whose
// token rows reach shared memory through bulk asynchronous copies (1-D TMA), so HBM sees ~100 KB
// of loads in flight per SM instead of the 32-48 KB that register-held rows allow.
//
// Per CTA: one producer warp and kConsumerWarps consumer warps around a ring of kStages stages.
// A stage holds a chunk of consecutive tokens, each as its q, k and v rows back to back (one bulk
// copy per run: a token's q row is one contiguous run of Hq*D*2 bytes, k and v one each) followed
// by the chunk's cos/sin rows (one per token, when a cos/sin cache is given), plus each token's
// slot and position. Producer lane j owns token j of a chunk: it reads the token's slot and
// position (loaded one chunk ahead, so the position -> cos/sin dependence costs no stall), writes
// them to the stage, announces its bytes on the stage's "full" barrier and issues its copies.
// Padding tokens (slot -1 or outside the cache) and positions outside the cos/sin cache copy
// nothing and are marked slot -1: consumers write nothing of them. Consumers wait for "full",
// spread the stage's head rows over their lane groups (row r of the stage: token r / heads, head
// r % heads), finish each row exactly as the register kernel does (finish_row) and store q and the
// K/V cache rows straight to global memory; each consumer warp then arrives on the stage's
// "empty" barrier, which the producer waits for before refilling the stage. CTAs take chunks
// blockIdx.x, blockIdx.x + gridDim.x, ...; chunk i of a CTA uses stage i % kStages, and the
// barriers' phase parity is (i / kStages) % 2.
#include "quench/ops/rope_quant_append/rope_quant_append_bulk.h"

#include <algorithm>

#include "quench/core/error.h"
#include "quench/core/sm90_async.cuh"
#include "quench/ops/rope_quant_append/rope_quant_append_row.cuh"

namespace quench {
namespace {

constexpr int32_t kConsumerWarps = 8;
constexpr int32_t kThreads = (kConsumerWarps + 1) * 32;  // the last warp produces
constexpr int32_t kStages = 4;
constexpr int32_t kMaxChunkTokens = 8;  // producer lanes that own a token
// Two CTAs per SM (their chunks interleave, so one CTA's compute overlaps the other's waits),
// each with a ring of at most 104 KB: 2 x (104 KB + ~1 KB static + 1 KB reserved) fits the
// 228 KB of an H100/H200 SM. With one stage being consumed, up to 3 x 26 KB per CTA, ~150 KB
// per SM, stay in flight.
constexpr int32_t kBlocksPerSm = 2;
constexpr int64_t kRingBytes = 104 * 1024;

// Shared-memory ring state besides the stage bytes.
struct RingControl {
  uint64_t full[kStages];                  // producer warp's 32 arrivals + the stage's copied bytes
  uint64_t empty[kStages];                 // one arrival per consumer warp
  int64_t slot[kStages][kMaxChunkTokens];  // -1: write nothing of the token
  int32_t pos[kStages][kMaxChunkTokens];
};

// Byte geometry of one stage: token j's rows at j * token_row_bytes (head h of it at
// h * head_dim * 2 further), its cos/sin row at rows_bytes + j * angle_bytes.
struct StageGeometry {
  int32_t chunk_tokens;
  int32_t token_row_bytes;  // (Hq + 2*Hkv) * head_dim * 2
  int32_t angle_bytes;      // rotary_dim * 4 with a cos/sin cache, else 0
  int32_t rows_bytes;       // chunk_tokens * token_row_bytes
  int32_t stage_bytes;      // rows_bytes + chunk_tokens * angle_bytes
};

StageGeometry make_stage_geometry(const RopeQuantAppendParams& p, int32_t chunk_tokens) {
  StageGeometry s;
  s.chunk_tokens = chunk_tokens;
  s.token_row_bytes = (p.num_q_heads + 2 * p.num_kv_heads) * p.head_dim * 2;
  s.angle_bytes = p.cos_sin_cache != nullptr ? p.rope.rotary_dim * 4 : 0;
  s.rows_bytes = chunk_tokens * s.token_row_bytes;
  s.stage_bytes = s.rows_bytes + chunk_tokens * s.angle_bytes;
  return s;
}

#ifdef QUENCH_SM90_ASYNC_ENABLED

// The producer warp: fills stage i % kStages with chunk i of this CTA once its consumers have
// released the stage's previous chunk.
template <bool kFromCache>
__device__ __forceinline__ void produce(const FusedArgs& args, const StageGeometry& geo,
                                        int32_t num_chunks, RingControl& control, uint8_t* ring) {
  const RopeQuantAppendParams& p = args.p;
  const int32_t lane = static_cast<int32_t>(threadIdx.x) & 31;
  const auto stride = static_cast<int32_t>(gridDim.x);
  auto owns_token = [&](int32_t chunk) {
    return lane < geo.chunk_tokens && chunk < num_chunks &&
           chunk * geo.chunk_tokens + lane < p.num_tokens;
  };
  int32_t chunk = static_cast<int32_t>(blockIdx.x);
  int64_t next_slot = -1;
  int32_t next_pos = 0;
  if (owns_token(chunk)) {
    next_slot = __ldg(p.slot_mapping + chunk * geo.chunk_tokens + lane);
    next_pos = __ldg(p.positions + chunk * geo.chunk_tokens + lane);
  }
  for (int32_t i = 0; chunk < num_chunks; ++i, chunk += stride) {
    const int64_t slot = next_slot;
    const int32_t pos = next_pos;
    const bool has_token = owns_token(chunk);
    // The next chunk's slot and position load while this chunk waits for its stage.
    if (owns_token(chunk + stride)) {
      next_slot = __ldg(p.slot_mapping + (chunk + stride) * geo.chunk_tokens + lane);
      next_pos = __ldg(p.positions + (chunk + stride) * geo.chunk_tokens + lane);
    }
    const int32_t stage = i % kStages;
    if (i >= kStages) {
      sm90_async::mbarrier_wait(&control.empty[stage],
                                static_cast<uint32_t>((i / kStages - 1) & 1));
    }
    const bool writes = has_token && slot >= 0 && slot < args.cache_slots && pos >= 0 &&
                        (!kFromCache || pos < p.cos_sin_cache_positions);
    if (lane < geo.chunk_tokens) {
      control.slot[stage][lane] = writes ? slot : -1;
      control.pos[stage][lane] = pos;
    }
    if (!writes) {
      sm90_async::mbarrier_arrive(&control.full[stage]);
      continue;
    }
    sm90_async::mbarrier_arrive_expect_bytes(
        &control.full[stage], static_cast<uint32_t>(geo.token_row_bytes + geo.angle_bytes));
    const int32_t t = chunk * geo.chunk_tokens + lane;
    uint8_t* rows = ring + stage * geo.stage_bytes + lane * geo.token_row_bytes;
    const int32_t q_bytes = p.num_q_heads * p.head_dim * 2;
    const int32_t kv_bytes = p.num_kv_heads * p.head_dim * 2;
    sm90_async::bulk_copy_to_shared(rows, p.q + t * p.q_row_stride, static_cast<uint32_t>(q_bytes),
                                    &control.full[stage]);
    sm90_async::bulk_copy_to_shared(rows + q_bytes, p.k + t * p.k_row_stride,
                                    static_cast<uint32_t>(kv_bytes), &control.full[stage]);
    sm90_async::bulk_copy_to_shared(rows + q_bytes + kv_bytes, p.v + t * p.v_row_stride,
                                    static_cast<uint32_t>(kv_bytes), &control.full[stage]);
    if constexpr (kFromCache) {
      sm90_async::bulk_copy_to_shared(
          ring + stage * geo.stage_bytes + geo.rows_bytes + lane * geo.angle_bytes,
          p.cos_sin_cache + static_cast<int64_t>(pos) * p.rope.rotary_dim,
          static_cast<uint32_t>(geo.angle_bytes), &control.full[stage]);
    }
  }
}

// The consumer warps: finish every head row of each chunk of this CTA from shared memory.
template <bool kFromCache, bool kQkNorm>
__device__ __forceinline__ void consume(const FusedArgs& args, const StageGeometry& geo,
                                        int32_t num_chunks, RingControl& control,
                                        const uint8_t* ring, const float* smem_inv_freq) {
  const RopeQuantAppendParams& p = args.p;
  const LaneGroup g = make_lane_group(p.head_dim);
  const int32_t groups = kConsumerWarps * 32 / g.lanes;
  const int32_t group = static_cast<int32_t>(threadIdx.x) / g.lanes;
  const int32_t heads = p.num_q_heads + 2 * p.num_kv_heads;
  const int32_t rotating_heads = p.num_q_heads + p.num_kv_heads;
  const int32_t row_bytes = p.head_dim * 2;
  uint4 q_norm_bits = make_uint4(0u, 0u, 0u, 0u);
  uint4 k_norm_bits = make_uint4(0u, 0u, 0u, 0u);
  if constexpr (kQkNorm) {
    q_norm_bits = __ldg(reinterpret_cast<const uint4*>(p.q_norm_weight) + g.lane);
    k_norm_bits = __ldg(reinterpret_cast<const uint4*>(p.k_norm_weight) + g.lane);
  }
  RopeLaneAngles angles;
  int32_t chunk = static_cast<int32_t>(blockIdx.x);
  for (int32_t i = 0; chunk < num_chunks; ++i, chunk += static_cast<int32_t>(gridDim.x)) {
    const int32_t stage = i % kStages;
    sm90_async::mbarrier_wait(&control.full[stage], static_cast<uint32_t>((i / kStages) & 1));
    const uint8_t* rows = ring + stage * geo.stage_bytes;
    const int32_t first_token = chunk * geo.chunk_tokens;
    const int32_t stage_rows = std::min(geo.chunk_tokens, p.num_tokens - first_token) * heads;
    // Row r of the stage is head h of chunk token j (r = j * heads + h); a group steps r by
    // `groups`, tracking (j, h) without a division. Consecutive rows of a group mostly share a
    // token, so its cos/sin are loaded once per run (angles_token: the token they belong to).
    int32_t angles_token = -1;
    int32_t j = group / heads;
    int32_t h = group - j * heads;
    for (int32_t r = group; r < stage_rows; r += groups) {
      if (r != group) {
        h += groups;
        while (h >= heads) {
          h -= heads;
          ++j;
        }
      }
      const int64_t slot = control.slot[stage][j];
      if (slot < 0) continue;
      const uint4 raw = *(reinterpret_cast<const uint4*>(rows + r * row_bytes) + g.lane);
      if (h < rotating_heads && angles_token != j) {
        if constexpr (kFromCache) {
          load_rope_lane_angles_from_row(
              g, args.angles,
              reinterpret_cast<const float*>(rows + geo.rows_bytes + j * geo.angle_bytes), angles);
        } else {
          load_rope_lane_angles<false>(g, args.angles, smem_inv_freq, control.pos[stage][j],
                                       angles);
        }
        angles_token = j;
      }
      finish_row<kQkNorm>(args, g, first_token + j, h, slot, raw, angles, q_norm_bits, k_norm_bits);
    }
    __syncwarp();
    if ((threadIdx.x & 31) == 0) sm90_async::mbarrier_arrive(&control.empty[stage]);
  }
}

#endif  // QUENCH_SM90_ASYNC_ENABLED

// kFromCache: cos/sin from the cache (copied into the ring) or computed by sincos; kQkNorm: q and
// k RMSNorm weights given. Dynamic shared memory: kStages * geo.stage_bytes.
template <bool kFromCache, bool kQkNorm>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    rope_quant_append_bulk_kernel(const FusedArgs args, const StageGeometry geo,
                                  int32_t num_chunks) {
#ifdef QUENCH_SM90_ASYNC_ENABLED
  __shared__ RingControl control;
  __shared__ float smem_inv_freq[kMaxRopePairs];
  extern __shared__ __align__(128) uint8_t ring[];
  if (threadIdx.x == 0) {
    for (int32_t s = 0; s < kStages; ++s) {
      sm90_async::mbarrier_init(&control.full[s], 32);
      sm90_async::mbarrier_init(&control.empty[s], kConsumerWarps);
    }
    sm90_async::mbarrier_init_fence();
  }
  if constexpr (!kFromCache) {
    stage_inv_freq(args.angles, smem_inv_freq);  // ends with a block barrier
  } else {
    __syncthreads();
  }
  if (static_cast<int32_t>(threadIdx.x) / 32 == kConsumerWarps) {
    produce<kFromCache>(args, geo, num_chunks, control, ring);
  } else {
    consume<kFromCache, kQkNorm>(args, geo, num_chunks, control, ring, smem_inv_freq);
  }
#endif
}

template <bool kFromCache, bool kQkNorm>
void launch_variant(const FusedArgs& args, const StageGeometry& geo, int32_t num_chunks,
                    unsigned blocks, cudaStream_t stream) {
  const int32_t smem_bytes = kStages * geo.stage_bytes;
  const auto kernel = rope_quant_append_bulk_kernel<kFromCache, kQkNorm>;
  cudaError_t status =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
  // All of the unified L1/shared storage as shared memory, so kBlocksPerSm rings fit (the kernel
  // reads nothing through L1 but its slots and positions, once each).
  if (status == cudaSuccess) {
    status = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                  cudaSharedmemCarveoutMaxShared);
  }
  QUENCH_REQUIRE(status == cudaSuccess, "rope_quant_append: reserving ", smem_bytes,
                 " bytes of dynamic shared memory failed: ", cudaGetErrorString(status));
  rope_quant_append_bulk_kernel<kFromCache, kQkNorm>
      <<<blocks, kThreads, static_cast<size_t>(smem_bytes), stream>>>(args, geo, num_chunks);
}

}  // namespace

bool rope_quant_append_bulk_kernel_available() {
  cudaFuncAttributes attributes;
  const cudaError_t status =
      cudaFuncGetAttributes(&attributes, rope_quant_append_bulk_kernel<true, false>);
  QUENCH_REQUIRE(status == cudaSuccess, "rope_quant_append: bulk kernel attribute query failed: ",
                 cudaGetErrorString(status));
  return attributes.ptxVersion >= 90;
}

int32_t rope_quant_append_bulk_chunk_tokens(const RopeQuantAppendParams& p, bool kernel_available,
                                            int64_t sm_count) {
  if (!kernel_available) return 0;
  const StageGeometry one = make_stage_geometry(p, 1);
  const auto fit = static_cast<int32_t>(
      std::min<int64_t>(kMaxChunkTokens, kRingBytes / (kStages * int64_t{one.stage_bytes})));
  if (fit == 0) return 0;
  // Small batches: smaller chunks, so every CTA gets work (and, where the batch allows, every
  // stage of its ring).
  const int64_t ring_slots = sm_count * kBlocksPerSm * kStages;
  const auto wanted = static_cast<int32_t>(
      std::max<int64_t>(1, (int64_t{p.num_tokens} + ring_slots - 1) / ring_slots));
  return std::min(fit, wanted);
}

void launch_rope_quant_append_bulk(const FusedArgs& args, int32_t chunk_tokens, int64_t sm_count,
                                   cudaStream_t stream) {
  const StageGeometry geo = make_stage_geometry(args.p, chunk_tokens);
  const int32_t num_chunks = (args.p.num_tokens + chunk_tokens - 1) / chunk_tokens;
  const auto blocks = static_cast<unsigned>(std::min<int64_t>(num_chunks, sm_count * kBlocksPerSm));
  const bool from_cache = args.p.cos_sin_cache != nullptr;
  const bool qk_norm = args.p.q_norm_weight != nullptr;
  if (from_cache && qk_norm) {
    launch_variant<true, true>(args, geo, num_chunks, blocks, stream);
  } else if (from_cache) {
    launch_variant<true, false>(args, geo, num_chunks, blocks, stream);
  } else if (qk_norm) {
    launch_variant<false, true>(args, geo, num_chunks, blocks, stream);
  } else {
    launch_variant<false, false>(args, geo, num_chunks, blocks, stream);
  }
}

}  // namespace quench
