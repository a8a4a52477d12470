// The GPU logit edits against apply_logit_edits_reference, bit for bit: random rows at non-unit
// scales, random edits (bias, repetition on positive and negative logits, subtractions, masks),
// allowed masks shorter than the row (ids past them masked) on some rows, rows edited out of
// order, a row with no edits.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "quench/core/device_buffer.h"
#include "quench/ops/sampling/apply_logit_edits.h"
#include "quench/ops/sampling/logit_edits.h"

namespace quench {
namespace {

TEST(ApplyLogitEditsGpu, MatchesTheReferenceBitForBit) {
  std::mt19937 rng(41);
  for (const int32_t vocab : {37, 1000, 128256}) {
    const int32_t num_rows = 6;
    std::normal_distribution<float> logit(0.5f, 6.0f);
    std::vector<float> logits(static_cast<size_t>(num_rows) * vocab);
    for (float& x : logits)
      x = logit(rng);
    std::uniform_int_distribution<int32_t> token(0, vocab - 1);
    std::uniform_real_distribution<float> unit(-2.0f, 2.0f);
    const std::vector<int32_t> rows = {4, 0, 2, 5, 1};  // row 3 untouched
    std::vector<RowLogitEdits> per_row(rows.size());
    for (size_t r = 0; r < rows.size(); ++r) {
      RowLogitEdits& e = per_row[r];
      if (r == 3) continue;  // a row with nothing to do
      std::set<int32_t> tokens;
      for (int k = 0; k < 40; ++k)
        tokens.insert(token(rng));
      for (int32_t t : tokens) {
        LogitEdit edit;
        edit.token = t;
        edit.bias = t % 3 == 0 ? unit(rng) : 0.0f;
        edit.repetition = t % 2 == 0 ? 1.3f : 1.0f;
        edit.subtract = t % 5 == 0 ? unit(rng) * 0.7f : 0.0f;
        edit.masked = t % 11 == 0 ? 1u : 0u;
        e.edits.push_back(edit);
      }
      if (r % 2 == 1) {  // a mask over the first 80% of the ids, every other one allowed
        e.has_allowed = true;
        const auto ids = static_cast<size_t>(vocab) * 4 / 5;
        e.allowed_bits.assign((ids + 31) / 32, 0u);
        for (size_t t = 0; t < ids; t += 2)
          e.allowed_bits[t / 32] |= 1u << (t % 32);
      }
    }
    // The launch's arrays: rows, offsets, masks padded to the longest.
    std::vector<int32_t> offsets = {0}, allowed_offsets;
    std::vector<LogitEdit> edits;
    std::vector<uint32_t> bits;
    int32_t words = 0;
    for (const RowLogitEdits& e : per_row)
      if (e.has_allowed) words = std::max(words, static_cast<int32_t>(e.allowed_bits.size()));
    for (const RowLogitEdits& e : per_row) {
      edits.insert(edits.end(), e.edits.begin(), e.edits.end());
      offsets.push_back(static_cast<int32_t>(edits.size()));
      allowed_offsets.push_back(e.has_allowed ? static_cast<int32_t>(bits.size()) : -1);
      if (e.has_allowed) {
        bits.insert(bits.end(), e.allowed_bits.begin(), e.allowed_bits.end());
        bits.resize(bits.size() + (static_cast<size_t>(words) - e.allowed_bits.size()), 0u);
      }
    }
    std::vector<float> want = logits;
    for (size_t r = 0; r < rows.size(); ++r)
      apply_logit_edits_reference(
          std::span<float>(want.data() + static_cast<size_t>(rows[r]) * vocab,
                           static_cast<size_t>(vocab)),
          per_row[r]);
    const DeviceBuffer d_logits = upload(logits), d_rows = upload(rows),
                       d_offsets = upload(offsets), d_allowed = upload(allowed_offsets);
    const DeviceBuffer d_edits = upload(edits);
    const DeviceBuffer d_bits = upload(bits.empty() ? std::vector<uint32_t>{0u} : bits);
    LogitEditsArgs a;
    a.logits = d_logits.as<float>();
    a.vocab = vocab;
    a.rows = d_rows.as<int32_t>();
    a.n = static_cast<int32_t>(rows.size());
    a.edit_offsets = d_offsets.as<int32_t>();
    a.edits = d_edits.as<LogitEdit>();
    a.allowed_offsets = d_allowed.as<int32_t>();
    a.allowed_bits = d_bits.as<uint32_t>();
    a.allowed_words = words;
    apply_logit_edits_cuda(a, nullptr);
    std::vector<float> got(logits.size());
    check_cuda(cudaMemcpy(got.data(), d_logits.as<void>(), got.size() * sizeof(float),
                          cudaMemcpyDeviceToHost),
               "download");
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
        << "vocab " << vocab;
    // The test's power: the edits changed the rows.
    EXPECT_NE(std::memcmp(logits.data(), want.data(), got.size() * sizeof(float)), 0);
  }
}

}  // namespace
}  // namespace quench
