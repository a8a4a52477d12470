// The QUENCH_HD numerics functions, called from a kernel, give exactly the host results on
// random inputs (random bit patterns and random values over many magnitudes).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

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

constexpr int kFields = 14;
const char* const kFieldNames[kFields] = {"float_to_bf16_bits",
                                          "float_to_f16_bits",
                                          "float_to_fp8_e4m3",
                                          "float_to_fp8_e5m2",
                                          "float_to_e2m1",
                                          "bf16_bits_to_float",
                                          "f16_bits_to_float",
                                          "fp8_e4m3_to_float",
                                          "fp8_e5m2_to_float",
                                          "e2m1_to_float",
                                          "nvfp4_block_scale",
                                          "nvfp4_element_factor",
                                          "nvfp4_dequantize_element",
                                          "nvfp4_scale_offset"};

// All results for one input, as raw bits so that the comparison is exact.
struct Results {
  uint64_t field[kFields];
};

QUENCH_HD Results compute_all(uint32_t bits, float global_scale) {
  const float x = bits_to_float(bits);
  const auto low8 = static_cast<uint8_t>(bits & 0xffu);
  const auto low16 = static_cast<uint16_t>(bits & 0xffffu);
  const auto nibble = static_cast<uint8_t>((bits >> 8) & 0xfu);
  const auto scale_byte = static_cast<uint8_t>((bits >> 12) & 0x7fu);  // non-negative e4m3
  Results r;
  r.field[0] = float_to_bf16_bits(x);
  r.field[1] = float_to_f16_bits(x);
  r.field[2] = float_to_fp8_e4m3(x);
  r.field[3] = float_to_fp8_e5m2(x);
  r.field[4] = float_to_e2m1(x);
  r.field[5] = float_to_bits(bf16_bits_to_float(low16));
  r.field[6] = float_to_bits(f16_bits_to_float(low16));
  r.field[7] = float_to_bits(fp8_e4m3_to_float(low8));
  r.field[8] = float_to_bits(fp8_e5m2_to_float(low8));
  r.field[9] = float_to_bits(e2m1_to_float(nibble));
  r.field[10] = nvfp4_block_scale(x < 0.0f ? -x : x, global_scale);
  r.field[11] = float_to_bits(nvfp4_element_factor(scale_byte, global_scale));
  r.field[12] = float_to_bits(nvfp4_dequantize_element(nibble, scale_byte, global_scale));
  r.field[13] = static_cast<uint64_t>(
      nvfp4_scale_offset(bits % 1000u, (bits >> 10) % 40u, 1u + (bits >> 20) % 40u));
  return r;
}

__global__ void compute_on_device(const uint32_t* bits, const float* global_scales, int64_t n,
                                  Results* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = compute_all(bits[i], global_scales[i]);
}

TEST(NumericsHostDeviceGpu, DeviceFunctionsEqualHostFunctions) {
  constexpr int64_t n = 1 << 20;
  std::mt19937_64 engine(2026);
  std::vector<uint32_t> bits(n);
  std::vector<float> global_scales(n);
  std::normal_distribution<float> normal(0.5f, 1.0f);
  std::uniform_int_distribution<int> exponent(-30, 30);
  std::uniform_real_distribution<float> gs(0.1f, 100.0f);
  for (int64_t i = 0; i < n; ++i) {
    // Half raw bit patterns (NaN, inf, subnormals included), half values over many magnitudes.
    bits[i] = i % 2 ? static_cast<uint32_t>(engine())
                    : float_to_bits(std::ldexp(normal(engine), exponent(engine)));
    global_scales[i] = gs(engine);
  }
  uint32_t* d_bits = nullptr;
  float* d_gs = nullptr;
  Results* d_out = nullptr;
  check_cuda(cudaMalloc(&d_bits, n * sizeof(uint32_t)), "cudaMalloc");
  check_cuda(cudaMalloc(&d_gs, n * sizeof(float)), "cudaMalloc");
  check_cuda(cudaMalloc(&d_out, n * sizeof(Results)), "cudaMalloc");
  check_cuda(cudaMemset(d_out, 0xa5, n * sizeof(Results)), "cudaMemset");
  check_cuda(cudaMemcpy(d_bits, bits.data(), n * sizeof(uint32_t), cudaMemcpyHostToDevice), "copy");
  check_cuda(cudaMemcpy(d_gs, global_scales.data(), n * sizeof(float), cudaMemcpyHostToDevice),
             "copy");
  compute_on_device<<<static_cast<unsigned>((n + 255) / 256), 256>>>(d_bits, d_gs, n, d_out);
  check_cuda(cudaGetLastError(), "kernel launch");
  std::vector<Results> device(n);
  check_cuda(cudaMemcpy(device.data(), d_out, n * sizeof(Results), cudaMemcpyDeviceToHost), "copy");
  for (void* p :
       {static_cast<void*>(d_bits), static_cast<void*>(d_gs), static_cast<void*>(d_out)}) {
    check_cuda(cudaFree(p), "cudaFree");
  }

  int64_t mismatches[kFields] = {};
  std::string report;
  for (int64_t i = 0; i < n; ++i) {
    const Results host = compute_all(bits[i], global_scales[i]);
    for (int f = 0; f < kFields; ++f) {
      if (host.field[f] == device[i].field[f]) continue;
      if (++mismatches[f] <= 5) {
        char buf[160];
        std::snprintf(buf, sizeof(buf), "  %s: input 0x%08x gs %.9g device 0x%llx host 0x%llx\n",
                      kFieldNames[f], bits[i], global_scales[i],
                      static_cast<unsigned long long>(device[i].field[f]),
                      static_cast<unsigned long long>(host.field[f]));
        report += buf;
      }
    }
  }
  for (int f = 0; f < kFields; ++f) {
    EXPECT_EQ(mismatches[f], 0) << kFieldNames[f] << ": " << mismatches[f] << " of " << n
                                << " differ";
  }
  if (!report.empty()) std::printf("first mismatches:\n%s", report.c_str());
}

}  // namespace
}  // namespace quench
