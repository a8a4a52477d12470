#include "quench/model/device_row_picks.h"

#include <algorithm>

#include "quench/core/cuda_device.h"
#include "quench/ops/argmax/argmax.h"
#include "quench/ops/logprobs/row_logprobs.h"
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
  for (Plan& plan : plans_) {
    std::vector<int32_t> token_places;
    for (size_t i = plan.first; i < plan.end; ++i) {
      const RowPick& pick = picks[i];
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
      token_places.push_back(static_cast<int32_t>(place));
      plan.logprobs_top = std::max(plan.logprobs_top, pick.top);
    }
    plan.logprobs_rows_and_tokens.insert(plan.logprobs_rows_and_tokens.end(), token_places.begin(),
                                         token_places.end());
  }
  const size_t pool = most_argmax_ + most_draws_ + most_known;
  if (pool > 0) pool_.get<int32_t>(pool);
  if (most_draws_ > 0) {
    draw_rows_.get<int32_t>(most_draws_);
    draw_samplers_.get<RowSampler>(most_draws_);
    draw_workspace_.get<uint8_t>(sample_rows_workspace_bytes(static_cast<int32_t>(most_draws_)));
  }
  if (most_logprobs_ > 0) {
    logprobs_upload_.get<int32_t>(2 * most_logprobs_);
    logprob_.get<float>(most_logprobs_);
    top_ids_.get<int32_t>(most_logprobs_ * kMaxTopLogprobs);
    top_logprobs_.get<float>(most_logprobs_ * kMaxTopLogprobs);
  }
  out_ = StepLogits{};
  out_.picked.assign(rows, -1);
  out_.logits.resize(full_rows * static_cast<size_t>(vocab));
  logits_written_ = 0;
}

void DeviceRowPicks::enqueue_pass(int32_t pass, const float* logits, cudaStream_t stream) {
  Plan& plan = plans_.at(static_cast<size_t>(pass));
  int32_t* pool = pool_.buffer().as<int32_t>();
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
    RowLogprobsArgs a;
    a.logits = logits;
    a.vocab = vocab_;
    a.rows = upload;
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
  const auto vocab = static_cast<size_t>(vocab_);
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
