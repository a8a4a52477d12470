#include "quench/model/device_row_picks.h"

#include <algorithm>

#include "quench/core/cuda_device.h"
#include "quench/ops/argmax/argmax.h"
#include "quench/ops/logprobs/row_logprobs.h"
#include "quench/ops/sampling/apply_logit_edits.h"
#include "quench/ops/sampling/sample_rows.h"

namespace quench {
namespace {

template <typename T>
void to_device(T* device, const std::vector<T>& host, cudaStream_t stream, const char* what) {
  if (host.empty()) return;
  check_cuda(
      cudaMemcpyAsync(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice, stream),
      what);
}

template <typename T>
void to_host(std::vector<T>& host, const T* device, size_t count, cudaStream_t stream,
             const char* what) {
  host.resize(count);
  if (count == 0) return;
  check_cuda(
      cudaMemcpyAsync(host.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost, stream),
      what);
}

}  // namespace

void DeviceRowPicks::begin_step(std::span<const RowPick> picks,
                                std::span<const int32_t> device_rows, int32_t per_pass,
                                int32_t vocab) {
  picks_ = picks;
  plan_ = plan_row_picks(picks, device_rows, per_pass, vocab);
  results_.assign(plan_.passes.size(), RowPicksPassResults{});
  row_logits_host_.assign(plan_.passes.size(), {});
  const RowPicksPlan& p = plan_;
  if (const size_t pool = p.most_argmax + p.most_draws + p.most_known; pool > 0)
    pool_.get<int32_t>(pool);
  if (p.most_draws > 0) {
    draw_rows_.get<int32_t>(p.most_draws);
    draw_samplers_.get<RowSampler>(p.most_draws);
    draw_workspace_.get<uint8_t>(sample_rows_workspace_bytes(static_cast<int32_t>(p.most_draws)));
  }
  if (p.most_logprobs > 0) {
    logprobs_upload_.get<int32_t>(2 * p.most_logprobs);
    row_logits_.get<const float*>(p.most_logprobs);
    logprob_.get<float>(p.most_logprobs);
    top_ids_.get<int32_t>(p.most_logprobs * kMaxTopLogprobs);
    top_logprobs_.get<float>(p.most_logprobs * kMaxTopLogprobs);
  }
  if (p.most_edit_ints > 0) edit_ints_.get<int32_t>(p.most_edit_ints);
  if (p.most_edits > 0) edits_.get<LogitEdit>(p.most_edits);
  if (p.most_words > 0) allowed_bits_.get<uint32_t>(p.most_words);
  if (p.most_saved > 0) saved_.get<float>(p.most_saved * static_cast<size_t>(vocab));
  out_ = StepLogits{};
  out_.logits.resize(p.full_rows * static_cast<size_t>(vocab));
  logits_written_ = 0;
}

void DeviceRowPicks::enqueue_pass(int32_t pass_index, float* logits, cudaStream_t stream) {
  const RowPicksPass& pass = plan_.passes.at(static_cast<size_t>(pass_index));
  RowPicksPassResults& r = results_[static_cast<size_t>(pass_index)];
  int32_t* pool = pool_.buffer().as<int32_t>();
  const auto vocab = static_cast<size_t>(plan_.vocab);
  // Edited rows whose logprobs are asked: the model's logits kept aside, then the edits in place.
  float* saved = saved_.buffer().as<float>();
  for (size_t k = 0; k < pass.saved_rows.size(); ++k) {
    check_cuda(
        cudaMemcpyAsync(saved + k * vocab, logits + static_cast<size_t>(pass.saved_rows[k]) * vocab,
                        vocab * sizeof(float), cudaMemcpyDeviceToDevice, stream),
        "cudaMemcpyAsync a row kept aside before its edits");
  }
  if (pass.edit_rows > 0) {
    auto* ints = edit_ints_.buffer().as<int32_t>();
    to_device(ints, pass.edit_ints, stream, "cudaMemcpyAsync edited rows to device");
    to_device(edits_.buffer().as<LogitEdit>(), pass.edits, stream,
              "cudaMemcpyAsync logit edits to device");
    to_device(allowed_bits_.buffer().as<uint32_t>(), pass.allowed_bits, stream,
              "cudaMemcpyAsync allowed masks to device");
    LogitEditsArgs e;
    e.logits = logits;
    e.vocab = plan_.vocab;
    e.rows = ints;
    e.n = pass.edit_rows;
    e.edit_offsets = ints + pass.edit_offsets_at();
    e.edits = edits_.buffer().as<LogitEdit>();
    e.allowed_offsets = ints + pass.allowed_offsets_at();
    e.allowed_bits = allowed_bits_.buffer().as<uint32_t>();
    e.allowed_words = pass.allowed_words;
    apply_logit_edits_cuda(e, stream);
  }
  if (pass.argmax_rows > 0) {
    argmax_rows_cuda(logits, pass.argmax_rows, plan_.vocab, pool, stream);
    to_host(r.argmax_ids, pool, static_cast<size_t>(pass.argmax_rows), stream,
            "cudaMemcpyAsync argmax to host");
  }
  // The draws: each sampled row's logits row and sampler up, its token back.
  if (const size_t n = pass.draw_rows.size(); n > 0) {
    auto* rows = draw_rows_.buffer().as<int32_t>();
    auto* samplers = draw_samplers_.buffer().as<RowSampler>();
    to_device(rows, pass.draw_rows, stream, "cudaMemcpyAsync draw rows to device");
    to_device(samplers, pass.draw_samplers, stream, "cudaMemcpyAsync samplers to device");
    int32_t* drawn = pool + plan_.most_argmax;
    sample_rows_cuda(logits, plan_.vocab, rows, samplers, static_cast<int32_t>(n),
                     draw_workspace_.buffer().as<void>(), drawn, stream,
                     sample_rows_cutoffs(pass.draw_samplers, plan_.vocab));
    to_host(r.drawn, drawn, n, stream, "cudaMemcpyAsync draws to host");
  }
  // The logprobs rows, after the picks whose tokens they read from the pool.
  if (const size_t n = pass.logprobs_rows_and_tokens.size() / 2; n > 0) {
    to_device(pool + plan_.most_argmax + plan_.most_draws, pass.known_tokens, stream,
              "cudaMemcpyAsync prompt tokens to device");
    auto* upload = logprobs_upload_.buffer().as<int32_t>();
    to_device(upload, pass.logprobs_rows_and_tokens, stream,
              "cudaMemcpyAsync logprobs rows to device");
    // Each row's logits: the buffer's row, or its copy kept aside before the edits.
    std::vector<const float*>& row_logits = row_logits_host_[static_cast<size_t>(pass_index)];
    row_logits.resize(n);
    for (size_t k = 0; k < n; ++k) {
      row_logits[k] = pass.logprobs_saved[k] >= 0
                          ? saved + static_cast<size_t>(pass.logprobs_saved[k]) * vocab
                          : logits + static_cast<size_t>(pass.logprobs_rows_and_tokens[k]) * vocab;
    }
    auto* d_row_logits = row_logits_.buffer().as<const float*>();
    to_device(d_row_logits, row_logits, stream, "cudaMemcpyAsync logprobs rows' logits to device");
    RowLogprobsArgs a;
    a.logits = logits;
    a.vocab = plan_.vocab;
    a.rows = upload;
    a.row_logits = d_row_logits;
    a.tokens = pool;
    a.token_index = upload + n;
    a.n = static_cast<int32_t>(n);
    a.top = plan_.launch_top(pass);
    a.logprob = logprob_.buffer().as<float>();
    a.top_ids = top_ids_.buffer().as<int32_t>();
    a.top_logprobs = top_logprobs_.buffer().as<float>();
    row_logprobs_cuda(a, stream);
    const size_t top = n * static_cast<size_t>(a.top);
    to_host(r.logprob, a.logprob, n, stream, "cudaMemcpyAsync logprobs to host");
    to_host(r.top_ids, a.top_ids, top, stream, "cudaMemcpyAsync top ids to host");
    to_host(r.top_logprobs, a.top_logprobs, top, stream, "cudaMemcpyAsync top logprobs to host");
  }
  // The full rows, one copy per run of consecutive buffer rows.
  const auto is_logits = [&](size_t i) { return picks_[i].kind == RowPick::Kind::kLogits; };
  const std::vector<int32_t>& device_rows = plan_.device_rows;
  for (size_t i = pass.first; i < pass.end;) {
    if (!is_logits(i)) {
      ++i;
      continue;
    }
    size_t run = 1;
    while (i + run < pass.end && is_logits(i + run) &&
           device_rows[i + run] == device_rows[i] + static_cast<int32_t>(run))
      ++run;
    check_cuda(cudaMemcpyAsync(out_.logits.data() + logits_written_ * vocab,
                               logits + static_cast<size_t>(plan_.buffer_row(i, pass)) * vocab,
                               run * vocab * sizeof(float), cudaMemcpyDeviceToHost, stream),
               "cudaMemcpyAsync logits to host");
    logits_written_ += run;
    i += run;
  }
}

StepLogits DeviceRowPicks::finish() {
  collect_row_picks(plan_, picks_, results_, out_);
  plan_ = RowPicksPlan{};
  return std::move(out_);
}

}  // namespace quench
