// The attention op's device path: the in-op query quantization kernel against the host version
// (bit for bit), and which rows the op quantizes and hands to a device kernel.
#include <gtest/gtest.h>

#include <cmath>

#include "harness/device_buffer.h"
#include "harness/fake_attention_kernel.h"
#include "harness/log_capture.h"
#include "harness/random_inputs.h"
#include "quench/attention/attention_op.h"
#include "quench/attention/query_quantize.h"
#include "quench/numerics/bf16.h"

namespace quench {
namespace {

using testing_support::DeviceBuffer;

// Reports the first few mismatches and the count; returns the count.
int64_t count_mismatches(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want,
                         const std::vector<uint16_t>& input, const char* what) {
  int64_t mismatches = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i] == want[i]) continue;
    if (++mismatches <= 5) {
      ADD_FAILURE() << what << ": element " << i << " input bits 0x" << std::hex << input[i]
                    << " got 0x" << int{got[i]} << " want 0x" << int{want[i]} << std::dec;
    }
  }
  return mismatches;
}

TEST(QueryQuantizeGpu, MatchesHostBitForBit) {
  testing_support::RandomInputs rng(17);
  std::vector<uint16_t> q;
  for (float x : rng.normal(1 << 16, 0.0f, 3.0f))
    q.push_back(float_to_bf16_bits(x));
  for (float x : {0.0f, -0.0f, 1e30f, -1e30f, 5.6f, -5.61f, 1e-9f})
    q.push_back(float_to_bf16_bits(x));
  std::vector<uint16_t> q_f16;
  for (uint16_t b : q)
    q_f16.push_back(float_to_f16_bits(bf16_bits_to_float(b)));
  const DeviceBuffer d_bf16 = DeviceBuffer::from_host(q);
  const DeviceBuffer d_f16 = DeviceBuffer::from_host(q_f16);
  DeviceBuffer d_out(q.size());
  for (const DType src : {DType::kBF16, DType::kF16}) {
    for (const DType dst : {DType::kFP8E4M3, DType::kFP8E5M2}) {
      const std::vector<uint16_t>& input = src == DType::kBF16 ? q : q_f16;
      std::vector<uint8_t> want(q.size());
      quantize_query_host(input.data(), src, want.data(), dst, static_cast<int64_t>(q.size()),
                          0.0125f);
      quantize_query_device((src == DType::kBF16 ? d_bf16 : d_f16).as<uint16_t>(), src,
                            d_out.as<uint8_t>(), dst, static_cast<int64_t>(q.size()), 0.0125f,
                            nullptr);
      QUENCH_CUDA_CHECK(cudaDeviceSynchronize());
      std::vector<uint8_t> got(q.size());
      QUENCH_CUDA_CHECK(cudaMemcpy(got.data(), d_out.get(), got.size(), cudaMemcpyDeviceToHost));
      EXPECT_EQ(count_mismatches(got, want, input, dtype_name(dst)), 0)
          << dtype_name(src) << " -> " << dtype_name(dst);
    }
  }
}

// A device kernel that only records: the op must quantize exactly the prefill rows, on the
// device, and hand the kernel device pointers into its own slices.
TEST(AttentionOpGpu, QuantizesOnlyPrefillRowsOnDevice) {
  constexpr int32_t kHq = 4, kHkv = 2, kD = 64;
  auto runs = std::make_shared<std::vector<AttentionParams>>();
  AttentionKernelRegistry registry;
  testing_support::FakeKernelSpec decode;
  decode.name = "dev_decode";
  decode.prefill = false;
  decode.memory_space = MemorySpace::kDevice;
  decode.run_reference = false;
  decode.runs = runs;
  registry.add(testing_support::make_fake_kernel(decode));
  testing_support::FakeKernelSpec prefill = decode;
  prefill.name = "dev_prefill";
  prefill.prefill = true;
  prefill.decode = false;
  prefill.query_dtype = testing_support::fp8_query_over_fp8_kv;
  registry.add(testing_support::make_fake_kernel(prefill));

  AttentionConfig config;
  config.compute_capability = 90;
  config.num_q_heads = kHq;
  config.num_kv_heads = kHkv;
  config.head_dim_qk = config.head_dim_vo = kD;
  config.kv_dtype = DType::kFP8E4M3;
  testing_support::LogCapture quiet;
  CheckpointAttentionScales ckpt;
  ckpt.q_scale = std::vector<float>{0.02f};
  ckpt.k_scale = ckpt.v_scale = std::vector<float>{0.03f};
  const AttentionOp op(AttentionBackendSelection::decide(config, {}, {}, registry),
                       AttentionScales::from_checkpoint(ckpt, kHkv, DType::kBF16, "l"),
                       {0.125f, nullptr});

  const std::vector<ScheduledSequence> decodes = {{{1}, 5, 1}, {{2}, 9, 1}};
  const std::vector<ScheduledSequence> prefills = {{{3, 4}, 10, 12}};
  const AttentionMetadata m = build_attention_metadata(decodes, prefills, 16, 5);
  const int64_t row = kHq * kD;
  testing_support::RandomInputs rng(3);
  std::vector<uint16_t> q;
  for (float x : rng.uniform(static_cast<size_t>(m.num_tokens * row), -2, 2)) {
    q.push_back(float_to_bf16_bits(x));
  }
  const DeviceBuffer d_q = DeviceBuffer::from_host(q);
  const DeviceBuffer d_q_fp8 = DeviceBuffer::from_host(std::vector<uint8_t>(q.size(), 0x5a));
  const DeviceBuffer d_out(q.size() * 2);
  KvCacheLayout kv{5, 16, kHkv, kD, DType::kFP8E4M3, KvLayout::kNHD};
  const DeviceBuffer d_k(static_cast<size_t>(kv.tensor_bytes()));
  const DeviceBuffer d_v(static_cast<size_t>(kv.tensor_bytes()));
  const DeviceBuffer d_q_offsets = DeviceBuffer::from_host(m.q_offsets);
  const DeviceBuffer d_prefill_q_offsets = DeviceBuffer::from_host(m.prefill_q_offsets);
  const DeviceBuffer d_seq_lens = DeviceBuffer::from_host(m.seq_lens);
  const DeviceBuffer d_block_table = DeviceBuffer::from_host(m.block_table);

  AttentionOpArgs args;
  args.q = d_q.get();
  args.q_fp8 = d_q_fp8.as<uint8_t>();
  args.k_cache = d_k.get();
  args.v_cache = d_v.get();
  args.kv = kv;
  args.metadata = host_metadata_view(m);
  args.metadata.q_offsets = d_q_offsets.as<int32_t>();
  args.metadata.prefill_q_offsets = d_prefill_q_offsets.as<int32_t>();
  args.metadata.seq_lens = d_seq_lens.as<int32_t>();
  args.metadata.block_table = d_block_table.as<int32_t>();
  args.out = d_out.get();
  op.run(args, nullptr);
  QUENCH_CUDA_CHECK(cudaDeviceSynchronize());

  ASSERT_EQ(runs->size(), 2u);
  EXPECT_EQ((*runs)[0].q, d_q.get());
  EXPECT_EQ((*runs)[1].q, d_q_fp8.as<uint8_t>() + 2 * row);
  EXPECT_EQ((*runs)[1].q_offsets, d_prefill_q_offsets.as<int32_t>());
  EXPECT_EQ((*runs)[1].seq_lens, d_seq_lens.as<int32_t>() + 2);
  std::vector<uint8_t> got(q.size());
  QUENCH_CUDA_CHECK(cudaMemcpy(got.data(), d_q_fp8.get(), got.size(), cudaMemcpyDeviceToHost));
  std::vector<uint8_t> want(q.size(), 0x5a);  // decode rows stay untouched
  quantize_query_host(q.data() + 2 * row, DType::kBF16, want.data() + 2 * row, DType::kFP8E4M3,
                      m.num_prefill_tokens * row, 0.02f);
  EXPECT_EQ(count_mismatches(got, want, q, "q_fp8"), 0);
}

}  // namespace
}  // namespace quench
