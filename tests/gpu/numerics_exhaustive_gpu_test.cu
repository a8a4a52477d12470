// Holds quench's host conversions to CUDA's device conversions on ALL 2^32 float bit patterns
// (bf16, f16, fp8 e4m3/e5m2 with __NV_SATFINITE, e2m1), plus the decode of every fp8 / e2m1
// code. The device side uses CUDA's intrinsics directly; the host side is quench's portable
// code, computed on all host cores. Prints one summary line per format (the record for the issue).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp4.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "quench/core/parallel_for.h"
#include "quench/numerics/bf16.h"
#include "quench/numerics/fp8.h"
#include "quench/numerics/nvfp4.h"

namespace quench {
namespace {

void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
  }
}

constexpr int kFormats = 5;
const char* const kFormatNames[kFormats] = {"bf16", "f16", "fp8_e4m3", "fp8_e5m2", "e2m1"};

// Device results for one chunk of consecutive bit patterns starting at `first`.
struct DeviceResults {
  uint16_t* bf16;
  uint16_t* f16;
  uint8_t* e4m3;
  uint8_t* e5m2;
  uint8_t* e2m1;
};

__global__ void convert_with_cuda_intrinsics(uint32_t first, int64_t count, DeviceResults out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const float x = __uint_as_float(first + static_cast<uint32_t>(i));
  out.bf16[i] = __bfloat16_as_ushort(__float2bfloat16_rn(x));
  out.f16[i] = __half_as_ushort(__float2half_rn(x));
  out.e4m3[i] = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
  out.e5m2[i] = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2);
  out.e2m1[i] = __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest);
}

struct Mismatch {
  uint32_t input, device, host;
};

struct FormatTally {
  std::atomic<int64_t> count{0};
  std::mutex mutex;
  std::vector<Mismatch> firsts;

  void add(int64_t local_count, const std::vector<Mismatch>& local) {
    if (local_count == 0) return;
    count += local_count;
    std::lock_guard<std::mutex> lock(mutex);
    firsts.insert(firsts.end(), local.begin(), local.end());
  }
};

uint32_t host_conversion(int format, float x) {
  switch (format) {
    case 0:
      return float_to_bf16_bits(x);
    case 1:
      return float_to_f16_bits(x);
    case 2:
      return float_to_fp8_e4m3(x);
    case 3:
      return float_to_fp8_e5m2(x);
    default:
      return float_to_e2m1(x);
  }
}

TEST(NumericsExhaustiveGpu, AllFloatPatternsMatchCudaIntrinsics) {
  const auto start = std::chrono::steady_clock::now();
  constexpr int64_t kChunk = int64_t{1} << 28;
  constexpr int64_t kTotal = int64_t{1} << 32;
  DeviceResults device{};
  check_cuda(cudaMalloc(&device.bf16, kChunk * 2), "cudaMalloc");
  check_cuda(cudaMalloc(&device.f16, kChunk * 2), "cudaMalloc");
  check_cuda(cudaMalloc(&device.e4m3, kChunk), "cudaMalloc");
  check_cuda(cudaMalloc(&device.e5m2, kChunk), "cudaMalloc");
  check_cuda(cudaMalloc(&device.e2m1, kChunk), "cudaMalloc");
  DeviceResults host{};
  check_cuda(cudaMallocHost(&host.bf16, kChunk * 2), "cudaMallocHost");
  check_cuda(cudaMallocHost(&host.f16, kChunk * 2), "cudaMallocHost");
  check_cuda(cudaMallocHost(&host.e4m3, kChunk), "cudaMallocHost");
  check_cuda(cudaMallocHost(&host.e5m2, kChunk), "cudaMallocHost");
  check_cuda(cudaMallocHost(&host.e2m1, kChunk), "cudaMallocHost");

  FormatTally tallies[kFormats];
  for (int64_t first = 0; first < kTotal; first += kChunk) {
    // Poison the device outputs so that an unwritten element cannot pass.
    check_cuda(cudaMemset(device.bf16, 0xa5, kChunk * 2), "cudaMemset");
    check_cuda(cudaMemset(device.f16, 0xa5, kChunk * 2), "cudaMemset");
    check_cuda(cudaMemset(device.e4m3, 0xa5, kChunk), "cudaMemset");
    check_cuda(cudaMemset(device.e5m2, 0xa5, kChunk), "cudaMemset");
    check_cuda(cudaMemset(device.e2m1, 0xa5, kChunk), "cudaMemset");
    constexpr int kThreads = 256;
    convert_with_cuda_intrinsics<<<static_cast<unsigned>(kChunk / kThreads), kThreads>>>(
        static_cast<uint32_t>(first), kChunk, device);
    check_cuda(cudaGetLastError(), "kernel launch");
    check_cuda(cudaMemcpy(host.bf16, device.bf16, kChunk * 2, cudaMemcpyDeviceToHost), "copy");
    check_cuda(cudaMemcpy(host.f16, device.f16, kChunk * 2, cudaMemcpyDeviceToHost), "copy");
    check_cuda(cudaMemcpy(host.e4m3, device.e4m3, kChunk, cudaMemcpyDeviceToHost), "copy");
    check_cuda(cudaMemcpy(host.e5m2, device.e5m2, kChunk, cudaMemcpyDeviceToHost), "copy");
    check_cuda(cudaMemcpy(host.e2m1, device.e2m1, kChunk, cudaMemcpyDeviceToHost), "copy");

    constexpr int64_t kSlice = int64_t{1} << 16;
    parallel_for(kChunk / kSlice, [&](int64_t slice) {
      for (int format = 0; format < kFormats; ++format) {
        std::vector<Mismatch> local;
        int64_t local_count = 0;
        for (int64_t i = slice * kSlice; i < (slice + 1) * kSlice; ++i) {
          const uint32_t bits = static_cast<uint32_t>(first + i);
          const uint32_t want = host_conversion(format, bits_to_float(bits));
          uint32_t got = 0;
          switch (format) {
            case 0:
              got = host.bf16[i];
              break;
            case 1:
              got = host.f16[i];
              break;
            case 2:
              got = host.e4m3[i];
              break;
            case 3:
              got = host.e5m2[i];
              break;
            default:
              got = host.e2m1[i];
              break;
          }
          if (got != want) {
            ++local_count;
            if (local.size() < 5) local.push_back({bits, got, want});
          }
        }
        tallies[format].add(local_count, local);
      }
    });
  }
  for (void* p : {static_cast<void*>(device.bf16), static_cast<void*>(device.f16),
                  static_cast<void*>(device.e4m3), static_cast<void*>(device.e5m2),
                  static_cast<void*>(device.e2m1)}) {
    check_cuda(cudaFree(p), "cudaFree");
  }
  for (void* p :
       {static_cast<void*>(host.bf16), static_cast<void*>(host.f16), static_cast<void*>(host.e4m3),
        static_cast<void*>(host.e5m2), static_cast<void*>(host.e2m1)}) {
    check_cuda(cudaFreeHost(p), "cudaFreeHost");
  }

  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (int format = 0; format < kFormats; ++format) {
    FormatTally& tally = tallies[format];
    std::sort(tally.firsts.begin(), tally.firsts.end(),
              [](const Mismatch& a, const Mismatch& b) { return a.input < b.input; });
    std::string line = std::string("exhaustive ") + kFormatNames[format] + ": " +
                       std::to_string(tally.count.load()) + " mismatches of 2^32 inputs";
    char buf[96];
    for (size_t k = 0; k < std::min<size_t>(5, tally.firsts.size()); ++k) {
      std::snprintf(buf, sizeof(buf), " [x=0x%08x device=0x%x host=0x%x]", tally.firsts[k].input,
                    tally.firsts[k].device, tally.firsts[k].host);
      line += buf;
    }
    std::printf("%s\n", line.c_str());
    EXPECT_EQ(tally.count.load(), 0) << line;
  }
  std::printf("exhaustive numerics check: %.1f s on %d host threads\n", seconds,
              parallel_threads());
}

__global__ void decode_with_cuda_intrinsics(float* e4m3, float* e5m2, float* e2m1) {
  const int code = static_cast<int>(threadIdx.x);
  const auto v = static_cast<__nv_fp8_storage_t>(code);
  e4m3[code] = __half2float(__half(__nv_cvt_fp8_to_halfraw(v, __NV_E4M3)));
  e5m2[code] = __half2float(__half(__nv_cvt_fp8_to_halfraw(v, __NV_E5M2)));
  if (code < 16) {
    e2m1[code] = __half2float(
        __half(__nv_cvt_fp4_to_halfraw(static_cast<__nv_fp4_storage_t>(code), __NV_E2M1)));
  }
}

// Equal bits, or both NaN: the payload of a decoded NaN is not part of the contract.
bool same_value(float a, float b) {
  return float_to_bits(a) == float_to_bits(b) || (std::isnan(a) && std::isnan(b));
}

TEST(NumericsExhaustiveGpu, EveryFp8AndE2m1CodeDecodesLikeCuda) {
  float* device = nullptr;
  check_cuda(cudaMalloc(&device, 3 * 256 * sizeof(float)), "cudaMalloc");
  check_cuda(cudaMemset(device, 0xff, 3 * 256 * sizeof(float)), "cudaMemset");
  decode_with_cuda_intrinsics<<<1, 256>>>(device, device + 256, device + 512);
  check_cuda(cudaGetLastError(), "kernel launch");
  std::vector<float> got(3 * 256);
  check_cuda(cudaMemcpy(got.data(), device, got.size() * sizeof(float), cudaMemcpyDeviceToHost),
             "copy");
  check_cuda(cudaFree(device), "cudaFree");
  for (int code = 0; code < 256; ++code) {
    const auto v = static_cast<uint8_t>(code);
    EXPECT_TRUE(same_value(got[code], fp8_e4m3_to_float(v)))
        << "e4m3 code 0x" << std::hex << code << " device " << got[code] << " host "
        << fp8_e4m3_to_float(v);
    EXPECT_TRUE(same_value(got[256 + code], fp8_e5m2_to_float(v)))
        << "e5m2 code 0x" << std::hex << code << " device " << got[256 + code] << " host "
        << fp8_e5m2_to_float(v);
  }
  for (int code = 0; code < 16; ++code) {
    const float host = e2m1_to_float(static_cast<uint8_t>(code));
    EXPECT_EQ(float_to_bits(got[512 + code]), float_to_bits(host))
        << "e2m1 code 0x" << std::hex << code << " device " << got[512 + code] << " host " << host;
  }
}

}  // namespace
}  // namespace quench
