// The picks of one step's logit rows on the GPU, as plan_row_picks lays them out
// (row_picks_plan.h): per pass, the edited rows kept aside where their logprobs are asked and
// then edited in place, argmax rows, draws, then the logprobs rows (prompt rows' known tokens,
// and argmax or draw rows that ask for their picked token's, read from the pool of ids the picks
// wrote). Only the results cross to the host, and kLogits rows' logits. Internal to the GPU model
// runner (device_decoder_model.cc).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <span>
#include <vector>

#include "quench/model/device_step_memory.h"
#include "quench/model/model_runner.h"
#include "quench/model/row_picks_plan.h"

namespace quench {

class DeviceRowPicks {
 public:
  DeviceRowPicks() = default;
  DeviceRowPicks(const DeviceRowPicks&) = delete;
  DeviceRowPicks& operator=(const DeviceRowPicks&) = delete;

  // Plans a step (plan_row_picks) and sizes the device scratch for its largest pass now (a
  // buffer that grows frees the old one, which a pass before may still be reading). The spans
  // must outlive finish().
  void begin_step(std::span<const RowPick> picks, std::span<const int32_t> device_rows,
                  int32_t per_pass, int32_t vocab);
  int32_t passes() const { return static_cast<int32_t>(plan_.passes.size()); }
  // Enqueues pass p's picks over its logits (after its lm_head, on the same stream) and the copies
  // of their results to the host. The edits change the buffer's rows in place.
  void enqueue_pass(int32_t pass, float* logits, cudaStream_t stream);
  // After the stream's synchronize: the step's picks, logprobs and kLogits rows.
  StepLogits finish();

 private:
  std::span<const RowPick> picks_;
  RowPicksPlan plan_;
  std::vector<RowPicksPassResults> results_;
  std::vector<std::vector<const float*>> row_logits_host_;  // per pass, uploaded at enqueue
  StepLogits out_;
  size_t logits_written_ = 0;  // kLogits rows copied so far
  int64_t generation_ = 0;     // growth here concerns no graph: picks run after a replay
  GrowingBuffer pool_{&generation_}, draw_rows_{&generation_}, draw_samplers_{&generation_},
      draw_workspace_{&generation_}, logprobs_upload_{&generation_}, logprob_{&generation_},
      top_ids_{&generation_}, top_logprobs_{&generation_}, row_logits_{&generation_},
      edit_ints_{&generation_}, edits_{&generation_}, allowed_bits_{&generation_},
      saved_{&generation_};
};

}  // namespace quench
