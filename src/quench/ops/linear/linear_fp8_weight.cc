#include "quench/ops/linear/linear_fp8_weight.h"

#include "quench/core/error.h"
#include "quench/ops/linear/linear_skinny.h"
#include "quench/ops/quantize/quantize_fp8_dynamic.h"

namespace quench {
namespace {

// The GEMM's rows for `tokens`: padded to kBlockGemmTokenMultiple on the block-scaled kernels.
int32_t gemm_rows(int32_t tokens, bool blockwise) {
  if (!blockwise) return tokens;
  return (tokens + kBlockGemmTokenMultiple - 1) / kBlockGemmTokenMultiple * kBlockGemmTokenMultiple;
}

}  // namespace

bool linear_fp8_streams(int32_t tokens, int32_t in_features, int32_t out_features) {
  if (tokens <= 2) return true;
  return tokens <= 4 && int64_t{out_features} < 4 * int64_t{in_features} &&
         int64_t{in_features} * out_features <= kFp8StreamMaxElementsFewTokens;
}

int32_t fp8_gemm_rows(int32_t tokens, int32_t in_features, int32_t out_features,
                      const LinearWeight& w) {
  return gemm_rows(tokens, fp8_gemm_blockwise(w, tokens, in_features, out_features));
}

bool linear_fp8_takes_gemm(int32_t tokens, int32_t in_features, int32_t out_features,
                           const uint16_t* x, const LinearWeight& w) {
  return !(linear_fp8_streams(tokens, in_features, out_features) &&
           linear_skinny_supported(tokens, in_features, x, w));
}

Fp8RowsOut fp8_gemm_input(int32_t tokens, int32_t in_features, int32_t out_features,
                          const LinearWeight& w, const Fp8ActivationScratch& scratch) {
  // One kernel choice for the group, the padding and the scale order (fp8_activation_group's).
  const bool blockwise = fp8_gemm_blockwise(w, tokens, in_features, out_features);
  const int32_t group = blockwise ? kFp8GemmScaleGroup : in_features;
  const int32_t rows = gemm_rows(tokens, blockwise);
  const int64_t xq_bytes = int64_t{rows} * in_features;
  const int64_t scale_count = int64_t{rows} * (in_features / group);
  QUENCH_REQUIRE(xq_bytes <= scratch.xq_bytes && scale_count <= scratch.scale_count,
                 "linear_fp8_gemm: the activation scratch holds ", scratch.xq_bytes, " bytes and ",
                 scratch.scale_count, " scales; ", rows, " rows x ", in_features, " inputs need ",
                 xq_bytes, " and ", scale_count);
  Fp8RowsOut input;
  input.data = scratch.xq;
  input.scales = scratch.scales;
  input.group = group;
  input.layout.padded_rows = rows;
  input.layout.scales_by_group = blockwise;
  return input;
}

void linear_fp8_gemm_quantized_cuda(const Fp8Gemm& gemm, int32_t tokens, int32_t in_features,
                                    int32_t out_features, const LinearWeight& w,
                                    const Fp8ActivationScratch& scratch, void* out,
                                    int32_t out_rows, DType out_dtype, cudaStream_t stream) {
  QUENCH_REQUIRE(tokens >= 0, "linear_fp8_gemm: tokens ", tokens, " must be >= 0");
  if (tokens == 0) return;
  const int32_t rows = fp8_gemm_rows(tokens, in_features, out_features, w);
  QUENCH_REQUIRE(out_rows >= rows, "linear_fp8_gemm: the output holds ", out_rows, " rows; ",
                 tokens, " tokens over ", weight_scaling_name(w.scaling), " weights need ", rows);
  gemm.run(rows, in_features, out_features, scratch.xq, scratch.scales, w, out, out_dtype, stream);
}

void linear_fp8_gemm_cuda(const Fp8Gemm& gemm, int32_t tokens, int32_t in_features,
                          int32_t out_features, const uint16_t* x, const LinearWeight& w,
                          const Fp8ActivationScratch& scratch, void* out, int32_t out_rows,
                          DType out_dtype, cudaStream_t stream) {
  QUENCH_REQUIRE(tokens >= 0, "linear_fp8_gemm: tokens ", tokens, " must be >= 0");
  if (tokens == 0) return;
  const Fp8RowsOut input = fp8_gemm_input(tokens, in_features, out_features, w, scratch);
  quantize_fp8_dynamic_rows_cuda(tokens, in_features, input.group, x, input.data, input.scales,
                                 input.layout, stream);
  linear_fp8_gemm_quantized_cuda(gemm, tokens, in_features, out_features, w, scratch, out, out_rows,
                                 out_dtype, stream);
}

void linear_fp8_weight_cuda(const Fp8Gemm& gemm, int32_t tokens, int32_t in_features,
                            int32_t out_features, const uint16_t* x, const LinearWeight& w,
                            const Fp8ActivationScratch& scratch, void* out, int32_t out_rows,
                            DType out_dtype, cudaStream_t stream) {
  QUENCH_REQUIRE(w.fp8(), "linear_fp8_weight: the weight is ", dtype_name(w.dtype),
                 "; allowed: fp8_e4m3");
  QUENCH_REQUIRE(tokens >= 0, "linear_fp8_weight: tokens ", tokens, " must be >= 0");
  if (tokens == 0) return;
  if (!linear_fp8_takes_gemm(tokens, in_features, out_features, x, w)) {
    linear_skinny_cuda(tokens, in_features, out_features, x, w, out, out_dtype, stream);
    return;
  }
  linear_fp8_gemm_cuda(gemm, tokens, in_features, out_features, x, w, scratch, out, out_rows,
                       out_dtype, stream);
}

}  // namespace quench
