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
  device_rows_ = device_rows;
  vocab_ = vocab;
  plans_.clear();
  const size_t rows = picks.size();
  const auto pass_rows = static_cast<size_t>(std::max(per_pass, 1));
  for (size_t first = 0; first < rows; first += pass_rows) {
    Plan plan;
    plan.first = first;
    plan.end = std::min(rows, first + pass_rows);
    plans_.push_back(std::move(plan));
  }
  // The pool's parts are sized by the largest pass, so each pass's counts come first.
  most_argmax_ = most_draws_ = most_logprobs_ = 0;
  size_t most_known = 0, full_rows = 0;
  for (Plan& plan : plans_) {
    size_t draws = 0, known = 0, logprobs = 0;
    for (size_t i = plan.first; i < plan.end; ++i) {
      const RowPick& pick = picks[i];
      if (pick.kind == RowPick::Kind::kArgmax)
        plan.argmax_rows = std::max(plan.argmax_rows, buffer_row(i, plan) + 1);
      draws += pick.kind == RowPick::Kind::kDraw ? 1 : 0;
      known += pick.kind == RowPick::Kind::kLogprobs ? 1 : 0;
      logprobs += pick.wants_logprobs() ? 1 : 0;
      full_rows += pick.kind == RowPick::Kind::kLogits ? 1 : 0;
    }
    most_argmax_ = std::max(most_argmax_, static_cast<size_t>(plan.argmax_rows));
    most_draws_ = std::max(most_draws_, draws);
    most_known = std::max(most_known, known);
    most_logprobs_ = std::max(most_logprobs_, logprobs);
  }
  most_saved_ = 0;
  size_t most_edit_ints = 0, most_edits = 0, most_words = 0;
  for (Plan& plan : plans_) {
    std::vector<int32_t> token_places;
    // Edited rows: their buffer rows, then edit offsets, then mask offsets (joined below).
    std::vector<int32_t> edit_rows, edit_offsets = {0}, allowed_offsets;
    for (size_t i = plan.first; i < plan.end; ++i) {
      const RowPick& pick = picks[i];
      int32_t saved = -1;
      if (pick.edits != nullptr) {
        const RowLogitEdits& e = *pick.edits;
        edit_rows.push_back(buffer_row(i, plan));
        plan.edits.insert(plan.edits.end(), e.edits.begin(), e.edits.end());
        edit_offsets.push_back(static_cast<int32_t>(plan.edits.size()));
        allowed_offsets.push_back(e.has_allowed ? static_cast<int32_t>(plan.allowed_bits.size())
                                                : -1);
        if (e.has_allowed) {
          // Every mask of a launch has the same words: the longest, zero-padded (masked).
          plan.allowed_words =
              std::max(plan.allowed_words, static_cast<int32_t>(e.allowed_bits.size()));
        }
        if (pick.wants_logprobs()) {
          saved = static_cast<int32_t>(plan.saved_rows.size());
          plan.saved_rows.push_back(buffer_row(i, plan));
        }
      }
      size_t place = 0;  // in the pool
      if (pick.kind == RowPick::Kind::kArgmax) {
        place = static_cast<size_t>(buffer_row(i, plan));
      } else if (pick.kind == RowPick::Kind::kDraw) {
        place = most_argmax_ + plan.draw_rows.size();
        plan.draw_rows.push_back(buffer_row(i, plan));
        plan.draw_samplers.push_back(pick.sampler);
      } else if (pick.kind == RowPick::Kind::kLogprobs) {
        place = most_argmax_ + most_draws_ + plan.known_tokens.size();
        plan.known_tokens.push_back(pick.token);
      }
      if (!pick.wants_logprobs()) continue;
      plan.logprobs_rows_and_tokens.push_back(buffer_row(i, plan));
      plan.logprobs_saved.push_back(saved);
      token_places.push_back(static_cast<int32_t>(place));
      plan.logprobs_top = std::max(plan.logprobs_top, pick.top);
    }
    plan.logprobs_rows_and_tokens.insert(plan.logprobs_rows_and_tokens.end(), token_places.begin(),
                                         token_places.end());
    // The masks, each padded to the launch's words.
    for (size_t k = 0, i = plan.first; i < plan.end; ++i) {
      const RowLogitEdits* e = picks[i].edits;
      if (e == nullptr) continue;
      if (e->has_allowed) {
        allowed_offsets[k] = static_cast<int32_t>(plan.allowed_bits.size());
        plan.allowed_bits.insert(plan.allowed_bits.end(), e->allowed_bits.begin(),
                                 e->allowed_bits.end());
        plan.allowed_bits.resize(
            plan.allowed_bits.size() +
            (static_cast<size_t>(plan.allowed_words) - e->allowed_bits.size()));
      }
      ++k;
    }
    plan.edit_rows = static_cast<int32_t>(edit_rows.size());
    plan.edit_ints = std::move(edit_rows);
    plan.edit_ints.insert(plan.edit_ints.end(), edit_offsets.begin(), edit_offsets.end());
    plan.edit_ints.insert(plan.edit_ints.end(), allowed_offsets.begin(), allowed_offsets.end());
    most_saved_ = std::max(most_saved_, plan.saved_rows.size());
    most_edit_ints = std::max(most_edit_ints, plan.edit_ints.size());
    most_edits = std::max(most_edits, plan.edits.size());
    most_words = std::max(most_words, plan.allowed_bits.size());
  }
  if (most_edit_ints > 0) edit_ints_.get<int32_t>(most_edit_ints);
  if (most_edits > 0) edits_.get<LogitEdit>(most_edits);
  if (most_words > 0) allowed_bits_.get<uint32_t>(most_words);
  if (most_saved_ > 0) saved_.get<float>(most_saved_ * static_cast<size_t>(vocab));
  const size_t pool = most_argmax_ + most_draws_ + most_known;
  if (pool > 0) pool_.get<int32_t>(pool);
  if (most_draws_ > 0) {
    draw_rows_.get<int32_t>(most_draws_);
    draw_samplers_.get<RowSampler>(most_draws_);
    draw_workspace_.get<uint8_t>(sample_rows_workspace_bytes(static_cast<int32_t>(most_draws_)));
  }
  if (most_logprobs_ > 0) {
    logprobs_upload_.get<int32_t>(2 * most_logprobs_);
    row_logits_.get<const float*>(most_logprobs_);
    logprob_.get<float>(most_logprobs_);
    top_ids_.get<int32_t>(most_logprobs_ * kMaxTopLogprobs);
    top_logprobs_.get<float>(most_logprobs_ * kMaxTopLogprobs);
  }
  out_ = StepLogits{};
  out_.picked.assign(rows, -1);
  out_.logits.resize(full_rows * static_cast<size_t>(vocab));
  logits_written_ = 0;
}

void DeviceRowPicks::enqueue_pass(int32_t pass, float* logits, cudaStream_t stream) {
  Plan& plan = plans_.at(static_cast<size_t>(pass));
  int32_t* pool = pool_.buffer().as<int32_t>();
  const auto vocab = static_cast<size_t>(vocab_);
  // Edited rows whose logprobs are asked: the model's logits kept aside, then the edits in place.
  float* saved = saved_.buffer().as<float>();
  for (size_t k = 0; k < plan.saved_rows.size(); ++k) {
    check_cuda(
        cudaMemcpyAsync(saved + k * vocab, logits + static_cast<size_t>(plan.saved_rows[k]) * vocab,
                        vocab * sizeof(float), cudaMemcpyDeviceToDevice, stream),
        "cudaMemcpyAsync a row kept aside before its edits");
  }
  if (plan.edit_rows > 0) {
    auto* ints = edit_ints_.buffer().as<int32_t>();
    to_device(ints, plan.edit_ints, stream, "cudaMemcpyAsync edited rows to device");
    to_device(edits_.buffer().as<LogitEdit>(), plan.edits, stream,
              "cudaMemcpyAsync logit edits to device");
    to_device(allowed_bits_.buffer().as<uint32_t>(), plan.allowed_bits, stream,
              "cudaMemcpyAsync allowed masks to device");
    LogitEditsArgs e;
    e.logits = logits;
    e.vocab = vocab_;
    e.rows = ints;
    e.n = plan.edit_rows;
    e.edit_offsets = ints + plan.edit_rows;
    e.edits = edits_.buffer().as<LogitEdit>();
    e.allowed_offsets = ints + 2 * plan.edit_rows + 1;
    e.allowed_bits = allowed_bits_.buffer().as<uint32_t>();
    e.allowed_words = plan.allowed_words;
    apply_logit_edits_cuda(e, stream);
  }
  if (plan.argmax_rows > 0) {
    argmax_rows_cuda(logits, plan.argmax_rows, vocab_, pool, stream);
    to_host(plan.argmax_ids, pool, static_cast<size_t>(plan.argmax_rows), stream,
            "cudaMemcpyAsync argmax to host");
  }
  // The draws: each sampled row's logits row and sampler up, its token back.
  if (const size_t n = plan.draw_rows.size(); n > 0) {
    auto* rows = draw_rows_.buffer().as<int32_t>();
    auto* samplers = draw_samplers_.buffer().as<RowSampler>();
    to_device(rows, plan.draw_rows, stream, "cudaMemcpyAsync draw rows to device");
    to_device(samplers, plan.draw_samplers, stream, "cudaMemcpyAsync samplers to device");
    int32_t* drawn = pool + most_argmax_;
    sample_rows_cuda(logits, vocab_, rows, samplers, static_cast<int32_t>(n),
                     draw_workspace_.buffer().as<void>(), drawn, stream,
                     sample_rows_cutoffs(plan.draw_samplers, vocab_));
    to_host(plan.drawn, drawn, n, stream, "cudaMemcpyAsync draws to host");
  }
  // The logprobs rows, after the picks whose tokens they read from the pool.
  if (const size_t n = plan.logprobs_rows_and_tokens.size() / 2; n > 0) {
    to_device(pool + most_argmax_ + most_draws_, plan.known_tokens, stream,
              "cudaMemcpyAsync prompt tokens to device");
    auto* upload = logprobs_upload_.buffer().as<int32_t>();
    to_device(upload, plan.logprobs_rows_and_tokens, stream,
              "cudaMemcpyAsync logprobs rows to device");
    // Each row's logits: the buffer's row, or its copy kept aside before the edits.
    std::vector<const float*>& row_logits = plan.logprobs_row_logits;
    row_logits.resize(n);
    for (size_t k = 0; k < n; ++k) {
      row_logits[k] = plan.logprobs_saved[k] >= 0
                          ? saved + static_cast<size_t>(plan.logprobs_saved[k]) * vocab
                          : logits + static_cast<size_t>(plan.logprobs_rows_and_tokens[k]) * vocab;
    }
    auto* d_row_logits = row_logits_.buffer().as<const float*>();
    to_device(d_row_logits, row_logits, stream, "cudaMemcpyAsync logprobs rows' logits to device");
    RowLogprobsArgs a;
    a.logits = logits;
    a.vocab = vocab_;
    a.rows = upload;
    a.row_logits = d_row_logits;
    a.tokens = pool;
    a.token_index = upload + n;
    a.n = static_cast<int32_t>(n);
    a.top = launch_top(plan);
    a.logprob = logprob_.buffer().as<float>();
    a.top_ids = top_ids_.buffer().as<int32_t>();
    a.top_logprobs = top_logprobs_.buffer().as<float>();
    row_logprobs_cuda(a, stream);
    const size_t top = n * static_cast<size_t>(a.top);
    to_host(plan.logprob, a.logprob, n, stream, "cudaMemcpyAsync logprobs to host");
    to_host(plan.top_ids, a.top_ids, top, stream, "cudaMemcpyAsync top ids to host");
    to_host(plan.top_logprobs, a.top_logprobs, top, stream, "cudaMemcpyAsync top logprobs to host");
  }
  // The full rows, one copy per run of consecutive buffer rows.
  const auto is_logits = [&](size_t i) { return picks_[i].kind == RowPick::Kind::kLogits; };
  for (size_t i = plan.first; i < plan.end;) {
    if (!is_logits(i)) {
      ++i;
      continue;
    }
    size_t run = 1;
    while (i + run < plan.end && is_logits(i + run) &&
           device_rows_[i + run] == device_rows_[i] + static_cast<int32_t>(run))
      ++run;
    check_cuda(cudaMemcpyAsync(out_.logits.data() + logits_written_ * vocab,
                               logits + static_cast<size_t>(buffer_row(i, plan)) * vocab,
                               run * vocab * sizeof(float), cudaMemcpyDeviceToHost, stream),
               "cudaMemcpyAsync logits to host");
    logits_written_ += run;
    i += run;
  }
}

StepLogits DeviceRowPicks::finish() {
  for (const Plan& plan : plans_) {
    size_t draw = 0, logprobs = 0;
    const auto top_per_row = static_cast<size_t>(launch_top(plan));
    for (size_t i = plan.first; i < plan.end; ++i) {
      const RowPick& pick = picks_[i];
      if (pick.kind == RowPick::Kind::kArgmax) {
        out_.picked[i] = plan.argmax_ids[static_cast<size_t>(buffer_row(i, plan))];
      } else if (pick.kind == RowPick::Kind::kDraw) {
        out_.picked[i] = plan.drawn[draw++];
      }
      if (!pick.wants_logprobs()) continue;
      TokenLogprobs lp;
      lp.logprob = plan.logprob[logprobs];
      // A row without a softmax (ids -1) has no top list, as in the reference.
      for (size_t k = 0; k < std::min(static_cast<size_t>(pick.top), top_per_row); ++k) {
        const size_t o = logprobs * top_per_row + k;
        if (plan.top_ids[o] < 0) break;
        lp.top.emplace_back(plan.top_ids[o], plan.top_logprobs[o]);
      }
      out_.logprobs.push_back(std::move(lp));
      ++logprobs;
    }
  }
  plans_.clear();
  return std::move(out_);
}

}  // namespace quench
