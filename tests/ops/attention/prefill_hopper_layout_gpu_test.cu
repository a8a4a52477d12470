// Layout probe of the Hopper prefill kernel: runs one KV tile's S = Q K^T and O = P V through
// the kernel's own device steps (shared-memory tile layouts, prepare_kv_operands, issue_qk,
// pack_p, issue_pv, and for bf16 P V issue_pv_v_mn_major (over FP8 V widened by widen_fp8_tile),
// with the kernel's shared-memory offsets
// and both warpgroups) on small integers, where every product and sum is exact, and compares S
// and O with the host's exact values bit for bit. When the attention tests fail, this says whether
// the wgmma descriptors, swizzle, V^T permutation or fragment layouts are wrong (and where: row %
// 16 = accumulator row within a warp's 16, column % 8 = accumulator column pair) before any softmax
// is involved.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "harness/device_buffer.h"
#include "harness/random_inputs.h"
#include "prefill_test_support.h"
#include "quench/core/error.h"
#include "quench/numerics/bf16.h"
#include "quench/numerics/fp8.h"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_tile.cuh"

namespace quench::testing_support {
namespace {

using prefill_hopper::HopperConfig;
using prefill_hopper::HopperKind;

// q: [kBlockM][D] (MMA operand dtype), k, v: [kBlockN][D] (cache dtype), p: [kBlockM][kBlockN];
// s_out: [kBlockM][kBlockN], o_out: [kBlockM][D] (O divided by the P scale); o_mn_major_out
// (16-bit P V only): [kBlockM][D], O from V in its cached layout (bf16, or FP8 widened to the
// 16-bit operand type) as the MN-major B operand (the warp-specialized kernel's 16-bit P V).
template <HopperKind kKind, int kHeadDim>
__global__ void __launch_bounds__(256, 1)
    hopper_layout_probe_kernel(const uint8_t* q, const uint8_t* k, const uint8_t* v, const float* p,
                               float* s_out, float* o_out, float* o_mn_major_out) {
#ifdef QUENCH_SM90A_ENABLED
  using Cfg = HopperConfig<kKind, kHeadDim>;
  constexpr int kBlockM = Cfg::kBlockM;
  constexpr int kBlockN = Cfg::kBlockN;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw_address = sm90::smem_address(smem_raw);
  unsigned char* smem = smem_raw + ((1024u - raw_address % 1024u) % 1024u);
  unsigned char* q_tile = smem + Cfg::kQOffset;
  unsigned char* k_stage = smem + Cfg::kKStageOffset;
  unsigned char* v_stage = smem + Cfg::kVStageOffset;
  unsigned char* vt = smem + Cfg::kVtOffset;
  const int tid = static_cast<int>(threadIdx.x);

  constexpr int kQChunks = kHeadDim * Cfg::kQkBytes / 16;
  for (int idx = tid; idx < kBlockM * kQChunks; idx += Cfg::kThreads) {
    const int row = idx / kQChunks;
    const int chunk = idx % kQChunks;
    *reinterpret_cast<uint4*>(q_tile + prefill_hopper::block_tile_offset(kBlockM, row, chunk)) =
        *reinterpret_cast<const uint4*>(q + row * kQChunks * 16 + chunk * 16);
  }
  constexpr int kKvChunks = kHeadDim * Cfg::kKvBytes / 16;
  for (int idx = tid; idx < kBlockN * kKvChunks; idx += Cfg::kThreads) {
    const int row = idx / kKvChunks;
    const int chunk = idx % kKvChunks;
    const int dst = prefill_hopper::block_tile_offset(kBlockN, row, chunk);
    *reinterpret_cast<uint4*>(k_stage + dst) =
        *reinterpret_cast<const uint4*>(k + row * kKvChunks * 16 + chunk * 16);
    *reinterpret_cast<uint4*>(v_stage + dst) =
        *reinterpret_cast<const uint4*>(v + row * kKvChunks * 16 + chunk * 16);
  }
  __syncthreads();
  // FP8 V^T is built by one warpgroup (transpose_v_fp8 is the producer's).
  constexpr int kWorkers = Cfg::kFp8Pv ? 128 : Cfg::kThreads;
  const unsigned char* k_operand = k_stage;
  if (tid < kWorkers) {
    k_operand = prefill_hopper::prepare_kv_operands<Cfg, kWorkers>(
        k_stage, v_stage, smem + Cfg::kKWideOffset, vt, tid);
  }
  sm90::fence_proxy_async_shared();
  __syncthreads();

  const int warpgroup = tid / 128;
  const int warp = tid % 128 / 32;
  const int lane = tid % 32;
  float s[kBlockN / 2];
  prefill_hopper::QOperand<Cfg> q_operand = prefill_hopper::q_operand_at<Cfg>(q_tile, warpgroup);
  // Two-term Q's fragments (or, at head_dim 256, its rows rewritten in shared memory) carry the
  // warp's power of two; q_factor takes it back out (exact).
  float q_factor = 1.0f;
  if constexpr (Cfg::kQTwoTermInSmem) {
    q_factor = prefill_hopper::q_rows_to_two_term<Cfg>(q_tile, warpgroup, tid % 128);
    sm90::fence_proxy_async_shared();
    __syncthreads();
  }
  q_factor *= prefill_hopper::load_q_fragments<Cfg>(q_operand, q_tile, warpgroup, tid % 128);
  sm90::wgmma_fence();
  prefill_hopper::issue_qk<Cfg>(s, q_operand, sm90::smem_address(k_operand));
  sm90::wgmma_commit_group();
  sm90::wgmma_wait_group<0>();
  sm90::fence_registers(s);
  prefill_hopper::fence_q_operand<Cfg>(q_operand);
  for (int nt = 0; nt < kBlockN / 8; ++nt) {
    for (int e = 0; e < 4; ++e) {
      const int row = 64 * warpgroup + 16 * warp + lane / 4 + 8 * (e / 2);
      const int col = 8 * nt + 2 * (lane % 4) + (e & 1);
      s_out[row * kBlockN + col] = s[4 * nt + e] * q_factor;
      s[4 * nt + e] = p[row * kBlockN + col];
    }
  }
  uint32_t p_frag[Cfg::kPvSteps][4];
  prefill_hopper::pack_p<Cfg>(s, p_frag);
  float o[kHeadDim / 2] = {};
  sm90::fence_registers(o);
  sm90::wgmma_fence();
  prefill_hopper::issue_pv<Cfg>(o, p_frag, sm90::smem_address(vt));
  sm90::wgmma_commit_group();
  sm90::wgmma_wait_group<0>();
  sm90::fence_registers(o);
  sm90::fence_registers(p_frag);
  for (int dt = 0; dt < kHeadDim / 8; ++dt) {
    for (int e = 0; e < 4; ++e) {
      const int row = 64 * warpgroup + 16 * warp + lane / 4 + 8 * (e / 2);
      const int col = 8 * dt + 2 * (lane % 4) + (e & 1);
      o_out[row * kHeadDim + col] = o[4 * dt + e] / Cfg::kPScale;
    }
  }
  if constexpr (!Cfg::kFp8Pv) {
    // bf16 V as cached, or FP8 V widened to bf16 over the (consumed) K stages.
    const unsigned char* v_operand = v_stage;
    if constexpr (Cfg::kFp8Kv) {
      __syncthreads();
      prefill_hopper::widen_fp8_tile<Cfg::kThreads, kHeadDim, kBlockN>(v_stage, k_stage, tid);
      sm90::fence_proxy_async_shared();
      __syncthreads();
      v_operand = k_stage;
    }
    float o_mn[kHeadDim / 2] = {};
    sm90::fence_registers(o_mn);
    sm90::wgmma_fence();
    prefill_hopper::issue_pv_v_mn_major<Cfg>(o_mn, p_frag, sm90::smem_address(v_operand));
    sm90::wgmma_commit_group();
    sm90::wgmma_wait_group<0>();
    sm90::fence_registers(o_mn);
    sm90::fence_registers(p_frag);
    for (int dt = 0; dt < kHeadDim / 8; ++dt) {
      for (int e = 0; e < 4; ++e) {
        const int row = 64 * warpgroup + 16 * warp + lane / 4 + 8 * (e / 2);
        const int col = 8 * dt + 2 * (lane % 4) + (e & 1);
        o_mn_major_out[row * kHeadDim + col] = o_mn[4 * dt + e];
      }
    }
  }
#endif  // QUENCH_SM90A_ENABLED
}

// Stores integer-valued x as FP8 e4m3 (1 byte), bf16 or (f16) f16 (2 bytes), exactly.
std::vector<uint8_t> encode(const std::vector<float>& x, int bytes_per_element, bool f16 = false) {
  std::vector<uint8_t> out(x.size() * static_cast<size_t>(bytes_per_element));
  for (size_t i = 0; i < x.size(); ++i) {
    if (bytes_per_element == 1) {
      out[i] = float_to_fp8_e4m3(x[i]);
    } else {
      const uint16_t b = f16 ? float_to_f16_bits(x[i]) : float_to_bf16_bits(x[i]);
      out[2 * i] = static_cast<uint8_t>(b & 0xff);
      out[2 * i + 1] = static_cast<uint8_t>(b >> 8);
    }
  }
  return out;
}

// Integers in [lo, hi] (exact in e4m3 and bf16 for |x| <= 16).
std::vector<float> small_integers(size_t n, int lo, int hi, RandomInputs& random) {
  std::vector<float> x(n);
  for (float& value : x)
    value = static_cast<float>(random.uniform_int(lo, hi));
  return x;
}

// Compares exactly and describes where mismatches sit.
void expect_exact(const char* what, const std::vector<float>& actual,
                  const std::vector<float>& expected, int rows, int cols,
                  const std::string& context) {
  int64_t mismatches = 0;
  std::vector<int64_t> by_row16(16, 0), by_col8(8, 0), by_warpgroup(2, 0);
  std::string first;
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      const size_t i = static_cast<size_t>(r) * static_cast<size_t>(cols) + static_cast<size_t>(c);
      if (actual[i] == expected[i]) continue;
      ++mismatches;
      ++by_row16[static_cast<size_t>(r % 16)];
      ++by_col8[static_cast<size_t>(c % 8)];
      ++by_warpgroup[static_cast<size_t>(r / 64)];
      if (mismatches <= 8) {
        first +=
            str_cat("  [", r, "][", c, "] actual ", actual[i], " expected ", expected[i], "\n");
      }
    }
  }
  if (mismatches == 0) return;
  const auto counts = [](const std::vector<int64_t>& v) {
    std::string s;
    for (const int64_t n : v)
      s += str_cat(" ", n);
    return s;
  };
  ADD_FAILURE() << context << ": " << what << " has " << mismatches << " of " << rows * cols
                << " elements wrong\n"
                << first << "  mismatches by row % 16:" << counts(by_row16)
                << "\n  by column % 8:" << counts(by_col8)
                << "\n  by warpgroup:" << counts(by_warpgroup);
}

// wide_q (two-term Q, Cfg::kQTwoTerm): q takes integers in [-31, 31] (5 significant bits, so
// that most elements need both e4m3 terms) and one 128 in the first row of each warp's 16 (the
// warp's scale is then 2^0); the sums stay below 2^14, exact in the FP8 tensor cores' sums
// (at head_dim 256 the bound is 2^15, but these seeded draws stay far below 2^14).
template <HopperKind kKind, int kHeadDim>
void run_layout_probe(const char* name, bool wide_q = false) {
  using Cfg = HopperConfig<kKind, kHeadDim>;
  constexpr int kM = Cfg::kBlockM;
  constexpr int kN = Cfg::kBlockN;
  const std::string context =
      str_cat(name, " head_dim ", kHeadDim, " (", kN, "-key tile", wide_q ? ", wide q" : "", ")");
  RandomInputs random(static_cast<uint64_t>(kHeadDim) * 7 + static_cast<uint64_t>(kKind));
  std::vector<float> q = small_integers(static_cast<size_t>(kM) * kHeadDim, wide_q ? -31 : -4,
                                        wide_q ? 31 : 4, random);
  if (wide_q) {
    for (int r = 0; r < kM; r += 16)
      q[static_cast<size_t>(r) * kHeadDim] = 128.0f;
  }
  const std::vector<float> k = small_integers(static_cast<size_t>(kN) * kHeadDim, -4, 4, random);
  const std::vector<float> v = small_integers(static_cast<size_t>(kN) * kHeadDim, -4, 4, random);
  // P * kPScale are integers 0..7 (exact in e4m3 and bf16).
  std::vector<float> p = small_integers(static_cast<size_t>(kM) * kN, 0, 7, random);
  for (float& x : p)
    x /= Cfg::kPScale;

  std::vector<float> s_expected(static_cast<size_t>(kM) * kN, 0.0f);
  std::vector<float> o_expected(static_cast<size_t>(kM) * kHeadDim, 0.0f);
  for (int r = 0; r < kM; ++r) {
    for (int j = 0; j < kN; ++j) {
      float dot = 0.0f;
      for (int d = 0; d < kHeadDim; ++d)
        dot += q[static_cast<size_t>(r * kHeadDim + d)] * k[static_cast<size_t>(j * kHeadDim + d)];
      s_expected[static_cast<size_t>(r * kN + j)] = dot;
    }
    for (int d = 0; d < kHeadDim; ++d) {
      float sum = 0.0f;
      for (int j = 0; j < kN; ++j)
        sum += p[static_cast<size_t>(r * kN + j)] * v[static_cast<size_t>(j * kHeadDim + d)];
      o_expected[static_cast<size_t>(r * kHeadDim + d)] = sum;
    }
  }

  // Q in its operand dtype: f16 Q K^T takes the tile q_rows_to_f16 leaves (unscaled here: |q| <=
  // 31); two-term Q takes the bf16 tile (its terms are the fragments' business).
  DeviceBuffer d_q = DeviceBuffer::from_host(encode(q, Cfg::kQkBytes, Cfg::kWidenK));
  DeviceBuffer d_k = DeviceBuffer::from_host(encode(k, Cfg::kKvBytes));
  DeviceBuffer d_v = DeviceBuffer::from_host(encode(v, Cfg::kKvBytes));
  DeviceBuffer d_p = DeviceBuffer::from_host(p);
  DeviceBuffer d_s = DeviceBuffer::from_host(std::vector<float>(s_expected.size(), NAN));
  DeviceBuffer d_o = DeviceBuffer::from_host(std::vector<float>(o_expected.size(), NAN));
  DeviceBuffer d_o_mn_major = DeviceBuffer::from_host(std::vector<float>(o_expected.size(), NAN));
  const auto kernel = hopper_layout_probe_kernel<kKind, kHeadDim>;
  QUENCH_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes));
  kernel<<<1, Cfg::kThreads, Cfg::kSmemBytes>>>(d_q.as<uint8_t>(), d_k.as<uint8_t>(),
                                                d_v.as<uint8_t>(), d_p.as<float>(), d_s.as<float>(),
                                                d_o.as<float>(), d_o_mn_major.as<float>());
  QUENCH_CUDA_CHECK(cudaGetLastError());
  QUENCH_CUDA_CHECK(cudaDeviceSynchronize());
  expect_exact("S = Q K^T", d_s.to_host<float>(), s_expected, kM, kN, context);
  expect_exact("O = P V", d_o.to_host<float>(), o_expected, kM, kHeadDim, context);
  if constexpr (!Cfg::kFp8Pv) {
    expect_exact("O = P V (V MN-major)", d_o_mn_major.to_host<float>(), o_expected, kM, kHeadDim,
                 context);
  }
}

TEST(PrefillHopperLayout, Fp8) {
  SKIP_UNLESS_SM90();
  run_layout_probe<HopperKind::kFp8, 128>("fp8");
}

TEST(PrefillHopperLayout, Fp8QkF16Pv) {
  SKIP_UNLESS_SM90();
  run_layout_probe<HopperKind::kFp8QkF16Pv, 128>("fp8 q·k, f16 p·v");
}

TEST(PrefillHopperLayout, Bf16) {
  SKIP_UNLESS_SM90();
  run_layout_probe<HopperKind::kBf16, 64>("bf16");
  run_layout_probe<HopperKind::kBf16, 128>("bf16");
  run_layout_probe<HopperKind::kBf16, 256>("bf16");
}

TEST(PrefillHopperLayout, Bf16QueryFp8Kv) {
  SKIP_UNLESS_SM90();
  run_layout_probe<HopperKind::kBf16QFp8Kv, 64>("bf16q_fp8kv");
  run_layout_probe<HopperKind::kBf16QFp8Kv, 128>("bf16q_fp8kv");
  run_layout_probe<HopperKind::kBf16QFp8Kv, 256>("bf16q_fp8kv");
  if constexpr (HopperConfig<HopperKind::kBf16QFp8Kv, 64>::kQTwoTerm) {
    run_layout_probe<HopperKind::kBf16QFp8Kv, 64>("bf16q_fp8kv", /*wide_q=*/true);
  }
  if constexpr (HopperConfig<HopperKind::kBf16QFp8Kv, 128>::kQTwoTerm) {
    run_layout_probe<HopperKind::kBf16QFp8Kv, 128>("bf16q_fp8kv", /*wide_q=*/true);
  }
  if constexpr (HopperConfig<HopperKind::kBf16QFp8Kv, 256>::kQTwoTerm) {
    run_layout_probe<HopperKind::kBf16QFp8Kv, 256>("bf16q_fp8kv", /*wide_q=*/true);
  }
}

}  // namespace
}  // namespace quench::testing_support
