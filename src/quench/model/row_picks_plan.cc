#include "quench/model/row_picks_plan.h"

namespace quench {

RowPicksPlan plan_row_picks(std::span<const RowPick> picks, std::span<const int32_t> device_rows,
                            int32_t per_pass, int32_t vocab) {
  RowPicksPlan plan;
  plan.device_rows.assign(device_rows.begin(), device_rows.end());
  plan.vocab = vocab;
  const size_t rows = picks.size();
  const auto pass_rows = static_cast<size_t>(std::max(per_pass, 1));
  for (size_t first = 0; first < rows; first += pass_rows) {
    RowPicksPass pass;
    pass.first = first;
    pass.end = std::min(rows, first + pass_rows);
    plan.passes.push_back(std::move(pass));
  }
  // The pool's parts are sized by the largest pass, so each pass's counts come first.
  for (RowPicksPass& pass : plan.passes) {
    size_t draws = 0, known = 0, logprobs = 0;
    for (size_t i = pass.first; i < pass.end; ++i) {
      const RowPick& pick = picks[i];
      if (pick.kind == RowPick::Kind::kArgmax)
        pass.argmax_rows = std::max(pass.argmax_rows, plan.buffer_row(i, pass) + 1);
      draws += pick.kind == RowPick::Kind::kDraw ? 1 : 0;
      known += pick.kind == RowPick::Kind::kLogprobs ? 1 : 0;
      logprobs += pick.wants_logprobs() ? 1 : 0;
      plan.full_rows += pick.kind == RowPick::Kind::kLogits ? 1 : 0;
    }
    plan.most_argmax = std::max(plan.most_argmax, static_cast<size_t>(pass.argmax_rows));
    plan.most_draws = std::max(plan.most_draws, draws);
    plan.most_known = std::max(plan.most_known, known);
    plan.most_logprobs = std::max(plan.most_logprobs, logprobs);
  }
  for (RowPicksPass& pass : plan.passes) {
    std::vector<int32_t> token_places;
    std::vector<int32_t> edit_rows, edit_offsets = {0}, allowed_offsets;
    for (size_t i = pass.first; i < pass.end; ++i) {
      const RowPick& pick = picks[i];
      const int32_t row = plan.buffer_row(i, pass);
      int32_t saved = -1;
      if (pick.edits != nullptr) {
        const RowLogitEdits& e = *pick.edits;
        edit_rows.push_back(row);
        pass.edits.insert(pass.edits.end(), e.edits.begin(), e.edits.end());
        edit_offsets.push_back(static_cast<int32_t>(pass.edits.size()));
        allowed_offsets.push_back(e.has_allowed ? 0 : -1);  // placed below
        if (e.has_allowed)
          pass.allowed_words =
              std::max(pass.allowed_words, static_cast<int32_t>(e.allowed_bits.size()));
        if (pick.wants_logprobs()) {
          saved = static_cast<int32_t>(pass.saved_rows.size());
          pass.saved_rows.push_back(row);
        }
      }
      size_t place = 0;  // in the pool
      if (pick.kind == RowPick::Kind::kArgmax) {
        place = static_cast<size_t>(row);
      } else if (pick.kind == RowPick::Kind::kDraw) {
        place = plan.most_argmax + pass.draw_rows.size();
        pass.draw_rows.push_back(row);
        pass.draw_samplers.push_back(pick.sampler);
      } else if (pick.kind == RowPick::Kind::kLogprobs) {
        place = plan.most_argmax + plan.most_draws + pass.known_tokens.size();
        pass.known_tokens.push_back(pick.token);
      }
      if (!pick.wants_logprobs()) continue;
      pass.logprobs_rows_and_tokens.push_back(row);
      pass.logprobs_saved.push_back(saved);
      token_places.push_back(static_cast<int32_t>(place));
      pass.logprobs_top = std::max(pass.logprobs_top, pick.top);
    }
    pass.logprobs_rows_and_tokens.insert(pass.logprobs_rows_and_tokens.end(), token_places.begin(),
                                         token_places.end());
    // The masks, each padded to the pass's longest (the padding's ids are masked).
    for (size_t k = 0, i = pass.first; i < pass.end; ++i) {
      const RowLogitEdits* e = picks[i].edits;
      if (e == nullptr) continue;
      if (e->has_allowed) {
        allowed_offsets[k] = static_cast<int32_t>(pass.allowed_bits.size());
        pass.allowed_bits.insert(pass.allowed_bits.end(), e->allowed_bits.begin(),
                                 e->allowed_bits.end());
        pass.allowed_bits.resize(
            pass.allowed_bits.size() +
            (static_cast<size_t>(pass.allowed_words) - e->allowed_bits.size()));
      }
      ++k;
    }
    pass.edit_rows = static_cast<int32_t>(edit_rows.size());
    pass.edit_ints = std::move(edit_rows);
    pass.edit_ints.insert(pass.edit_ints.end(), edit_offsets.begin(), edit_offsets.end());
    pass.edit_ints.insert(pass.edit_ints.end(), allowed_offsets.begin(), allowed_offsets.end());
    plan.most_saved = std::max(plan.most_saved, pass.saved_rows.size());
    plan.most_edit_ints = std::max(plan.most_edit_ints, pass.edit_ints.size());
    plan.most_edits = std::max(plan.most_edits, pass.edits.size());
    plan.most_words = std::max(plan.most_words, pass.allowed_bits.size());
  }
  return plan;
}

void collect_row_picks(const RowPicksPlan& plan, std::span<const RowPick> picks,
                       std::span<const RowPicksPassResults> results, StepLogits& out) {
  out.picked.assign(picks.size(), -1);
  out.logprobs.clear();
  for (size_t p = 0; p < plan.passes.size(); ++p) {
    const RowPicksPass& pass = plan.passes[p];
    const RowPicksPassResults& r = results[p];
    size_t draw = 0, logprobs = 0;
    const auto top_per_row = static_cast<size_t>(plan.launch_top(pass));
    for (size_t i = pass.first; i < pass.end; ++i) {
      const RowPick& pick = picks[i];
      if (pick.kind == RowPick::Kind::kArgmax) {
        out.picked[i] = r.argmax_ids[static_cast<size_t>(plan.buffer_row(i, pass))];
      } else if (pick.kind == RowPick::Kind::kDraw) {
        out.picked[i] = r.drawn[draw++];
      }
      if (!pick.wants_logprobs()) continue;
      TokenLogprobs lp;
      lp.logprob = r.logprob[logprobs];
      // A row without a softmax (ids -1) has no top list, as in the reference.
      for (size_t k = 0; k < std::min(static_cast<size_t>(pick.top), top_per_row); ++k) {
        const size_t o = logprobs * top_per_row + k;
        if (r.top_ids[o] < 0) break;
        lp.top.emplace_back(r.top_ids[o], r.top_logprobs[o]);
      }
      out.logprobs.push_back(std::move(lp));
      ++logprobs;
    }
  }
}

}  // namespace quench
