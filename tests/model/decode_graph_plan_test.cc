// Which decode steps run under a CUDA graph and what the graph reads: the ladder of sizes, the
// steps that qualify, the padded metadata with the captured block-table stride; and on the CPU
// decoder, that the padding a graph adds changes nothing: the real rows' logits are bit-equal and
// the next step sees the same cache.
#include "quench/model/decode_graph_plan.h"

#include <gtest/gtest.h>

#include <random>

#include "harness/expect_error.h"
#include "harness/scratch_dir.h"
#include "quench/kv_cache/block_table.h"
#include "quench/model/decoder_model.h"
#include "quench/model/tiny_model.h"

namespace quench {
namespace {

TEST(DecodeGraphPlan, LadderIsOneTwoFourThenEightsUpToMaxNumSeqs) {
  EXPECT_EQ(decode_graph_batch_sizes(1), (std::vector<int32_t>{1}));
  EXPECT_EQ(decode_graph_batch_sizes(6), (std::vector<int32_t>{1, 2, 4, 6}));
  EXPECT_EQ(decode_graph_batch_sizes(16), (std::vector<int32_t>{1, 2, 4, 8, 16}));
  EXPECT_EQ(decode_graph_batch_sizes(20), (std::vector<int32_t>{1, 2, 4, 8, 16, 20}));
  const std::vector<int32_t> big = decode_graph_batch_sizes(256);
  EXPECT_EQ(big.size(), 35u);
  EXPECT_EQ(big.back(), 256);
  EXPECT_THROW(decode_graph_batch_sizes(0), Error);
}

AttentionMetadata decode_step(const std::vector<int32_t>& seq_lens, int32_t max_pages = 0) {
  std::vector<ScheduledSequence> decode;
  int32_t page = 1;
  for (int32_t len : seq_lens) {
    std::vector<int32_t> pages;
    for (int64_t i = 0; i < pages_for_tokens(len, 16); ++i)
      pages.push_back(page++);
    decode.push_back({pages, len - 1, 1});
  }
  return build_attention_metadata(decode, {}, 16, 64, max_pages);
}

TEST(DecodeGraphPlan, OnlyDecodeOnlyStepsWithinTheLadderQualify) {
  const std::vector<int32_t> sizes = decode_graph_batch_sizes(16);
  EXPECT_EQ(decode_graph_batch_for(decode_step({5, 40, 17}), sizes, 8), 4);
  EXPECT_EQ(decode_graph_batch_for(decode_step({5}), sizes, 8), 1);
  EXPECT_EQ(decode_graph_batch_for(decode_step(std::vector<int32_t>(9, 3)), sizes, 8), 16);
  EXPECT_EQ(decode_graph_batch_for(decode_step(std::vector<int32_t>(17, 3)), sizes, 8), 0);
  // A block table wider than the captured stride.
  EXPECT_EQ(decode_graph_batch_for(decode_step({5, 200}), sizes, 8), 0);
  // Prefill rows, or a multi-token decode row (speculative), run eagerly.
  const std::vector<ScheduledSequence> one_decode = {{{1}, 4, 1}}, one_prefill = {{{2}, 0, 7}};
  const AttentionMetadata mixed = build_attention_metadata(one_decode, one_prefill, 16, 64);
  EXPECT_EQ(decode_graph_batch_for(mixed, sizes, 8), 0);
  AttentionMetadata two_rows = decode_step({5});  // as a speculative step's host values say
  two_rows.max_decode_q_len = two_rows.max_q_len = 2;
  EXPECT_EQ(decode_graph_batch_for(two_rows, sizes, 8), 0);
  // Already padded (by someone else): eager.
  EXPECT_EQ(decode_graph_batch_for(pad_attention_metadata(decode_step({5}), 2, 2), sizes, 8), 0);
}

TEST(DecodeGraphPlan, StepMetadataIsPaddedAndRestridedPageForPage) {
  const AttentionMetadata m = decode_step({5, 40, 17});  // stride 3
  ASSERT_EQ(m.max_pages, 3);
  const AttentionMetadata g = decode_graph_step_metadata(m, 4, 8);
  EXPECT_EQ(g.num_seqs, 4);
  EXPECT_EQ(g.num_tokens, 4);
  EXPECT_EQ(g.max_pages, 8);
  ASSERT_EQ(g.block_table.size(), 32u);
  for (int32_t s = 0; s < 4; ++s)
    for (int32_t p = 0; p < 8; ++p) {
      const int32_t want = s < 3 && p < 3 ? m.block_table[static_cast<size_t>(s * 3 + p)] : 0;
      EXPECT_EQ(g.block_table[static_cast<size_t>(s * 8 + p)], want) << s << "," << p;
    }
  EXPECT_EQ(g.seq_lens, (std::vector<int32_t>{5, 40, 17, 0}));
  EXPECT_EQ(g.slot_mapping[3], -1);
  EXPECT_EQ(g.q_offsets, (std::vector<int32_t>{0, 1, 2, 3, 3}));
  EXPECT_QUENCH_ERROR(decode_graph_step_metadata(m, 4, 2), {"stride 3", "captured 2"});
}

TEST(DecodeGraphPlan, CaptureMetadataHasTheGraphsHostValuesAndTouchesNothing) {
  const AttentionMetadata c = decode_graph_capture_metadata(8, 16, 4096, 256);
  EXPECT_EQ(c.num_decode_seqs, 8);
  EXPECT_EQ(c.num_decode_tokens, 8);
  EXPECT_EQ(c.max_decode_q_len, 1);
  EXPECT_EQ(c.max_decode_seq_len, 4096);  // the split count of the longest sequence
  EXPECT_EQ(c.max_pages, 256);
  for (int32_t len : c.seq_lens)
    EXPECT_EQ(len, 0);
  for (int64_t slot : c.slot_mapping)
    EXPECT_EQ(slot, -1);
  EXPECT_THROW(decode_graph_capture_metadata(8, 16, 4096, 255), Error);
}

// The shape of a decode step with drafts (q_len rows per sequence), for sizing at start.
TEST(DecodeGraphPlan, CaptureMetadataTakesMultiTokenDecodeRows) {
  const AttentionMetadata c = decode_graph_capture_metadata(3, 16, 4096, 256, 5);
  EXPECT_EQ(c.num_decode_seqs, 3);
  EXPECT_EQ(c.num_tokens, 15);
  EXPECT_EQ(c.num_decode_tokens, 15);
  EXPECT_EQ(c.max_decode_q_len, 5);
  EXPECT_EQ(c.q_offsets, (std::vector<int32_t>{0, 5, 10, 15}));
  EXPECT_EQ(c.slot_mapping.size(), 15u);
  EXPECT_EQ(c.positions.size(), 15u);
  EXPECT_QUENCH_ERROR(decode_graph_capture_metadata(3, 16, 4096, 256, 9), {"q_len 9", "1 to 8"});
  EXPECT_QUENCH_ERROR(decode_graph_capture_metadata(3, 16, 4096, 256, 0), {"q_len 0"});
}

// On the CPU decoder: a step padded as a graph pads it gives the real rows' logits bit for bit,
// and the decode step after it equals the one after the unpadded step (nothing was written where
// it should not be).
TEST(DecodeGraphPlan, PaddingChangesNothingOnTheCpuDecoder) {
  const std::string dir = testing_support::scratch_dir("quench_decode_graph_plan_test", "tiny");
  write_tiny_model(dir, TinyModelSpec{});
  const Checkpoint checkpoint(dir);
  const ModelConfig config = read_model_config(checkpoint.config_path());
  const ModelWeights weights = ModelWeights::load(config, checkpoint);
  DecoderModelOptions o;
  o.kv_dtype = DType::kFP8E4M3;
  o.num_pages = 64;
  o.max_model_len = 256;
  DecoderModel plain(config, weights, o);
  DecoderModel padded(config, weights, o);
  std::mt19937 rng(3);
  std::uniform_int_distribution<int32_t> id(6, 500);
  const std::vector<int32_t> lengths = {5, 40, 17};
  std::vector<ScheduledSequence> prefill;
  std::vector<int32_t> ids, rows;
  int32_t page = 1;
  std::vector<std::vector<int32_t>> pages;
  for (int32_t len : lengths) {
    pages.push_back({page, page + 1, page + 2, page + 3});
    page += 4;
    prefill.push_back({pages.back(), 0, len - 1});
    for (int32_t i = 0; i < len - 1; ++i)
      ids.push_back(id(rng));
    rows.push_back(static_cast<int32_t>(ids.size()) - 1);
  }
  const AttentionMetadata pm = build_attention_metadata({}, prefill, 16, 64, 16);
  plain.forward(ids, pm, rows);
  padded.forward(ids, pm, rows);
  for (int32_t step = 0; step < 2; ++step) {
    std::vector<ScheduledSequence> decode;
    std::vector<int32_t> tokens;
    for (size_t i = 0; i < lengths.size(); ++i) {
      decode.push_back({pages[i], lengths[i] - 1 + step, 1});
      tokens.push_back(id(rng));
    }
    const AttentionMetadata m = build_attention_metadata(decode, {}, 16, 64, 16);
    const std::vector<int32_t> out_rows = {0, 1, 2};
    const std::vector<float> want = plain.forward(tokens, m, out_rows);
    std::vector<int32_t> padded_tokens = tokens;
    padded_tokens.resize(8, 0);
    const std::vector<float> got =
        padded.forward(padded_tokens, decode_graph_step_metadata(m, 8, 16), out_rows);
    EXPECT_EQ(got, want) << "step " << step;
  }
}

}  // namespace
}  // namespace quench
