// The GPU runner's state that lives across steps and CUDA graphs: device buffers that grow and
// tell when they moved (a captured graph holds their old addresses), page-locked staging for a
// step's host inputs, the layout of those inputs in their one transfer, a graph executable's
// ownership and the events that time a step. Internal to the GPU model runner
// (device_decoder_model.cc).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "quench/attention/attention_metadata.h"
#include "quench/core/device_buffer.h"

namespace quench {

// A device buffer that grows to the largest request (contents are not kept across growth). Every
// growth bumps the runner's generation: a captured graph holds the old address and is stale.
class GrowingBuffer {
 public:
  explicit GrowingBuffer(int64_t* generation) : generation_(generation) {}
  template <typename T>
  T* get(size_t count) {
    if (buffer_.bytes() < count * sizeof(T)) {
      buffer_ = DeviceBuffer();  // free first: the old and new sizes need not fit together
      buffer_ = DeviceBuffer(count * sizeof(T));
      ++*generation_;
    }
    return buffer_.as<T>();
  }
  DeviceBuffer& buffer() { return buffer_; }

 private:
  DeviceBuffer buffer_;
  int64_t* generation_;
};

// A captured decode step.
class GraphExec {
 public:
  GraphExec() = default;
  explicit GraphExec(cudaGraphExec_t exec) : exec_(exec) {}
  GraphExec(GraphExec&& other) noexcept : exec_(std::exchange(other.exec_, nullptr)) {}
  GraphExec& operator=(GraphExec&& other) noexcept {
    std::swap(exec_, other.exec_);
    return *this;
  }
  GraphExec(const GraphExec&) = delete;
  GraphExec& operator=(const GraphExec&) = delete;
  ~GraphExec() {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
  }
  cudaGraphExec_t get() const { return exec_; }

 private:
  cudaGraphExec_t exec_ = nullptr;
};

// Where a step's host inputs sit in its one transfer, in bytes (each 16-byte aligned; ids first,
// at offset 0): sized by the step's counts, so steps of one shape (a graph's) use one layout.
struct StepInputsLayout {
  StepInputsLayout() = default;
  StepInputsLayout(const AttentionMetadata& m, int32_t logit_rows) {
    const auto t = static_cast<size_t>(std::max(m.num_tokens, 1));
    const auto seqs = static_cast<size_t>(std::max(m.num_seqs, 1));
    ids = take(t * 4);
    positions = take(t * 4);
    slots = take(t * 8);
    q_offsets = take((seqs + 1) * 4);
    prefill_q_offsets = take((static_cast<size_t>(m.num_prefill_seqs) + 1) * 4);
    seq_lens = take(seqs * 4);
    block_table = take(seqs * static_cast<size_t>(std::max(m.max_pages, 1)) * 4);
    gather = take(static_cast<size_t>(std::max(logit_rows, 1)) * 4);
  }
  // Bytes from `offset` to the next slot (or the end).
  size_t capacity(size_t offset) const {
    size_t next = bytes;
    for (size_t o :
         {ids, positions, slots, q_offsets, prefill_q_offsets, seq_lens, block_table, gather})
      if (o > offset) next = std::min(next, o);
    return next - offset;
  }
  size_t ids = 0, positions = 0, slots = 0, q_offsets = 0, prefill_q_offsets = 0, seq_lens = 0,
         block_table = 0, gather = 0;
  size_t bytes = 0;

 private:
  size_t take(size_t n) {
    const size_t at = bytes;
    bytes += (n + 15) / 16 * 16;
    return at;
  }
};

// A pair of CUDA events around a step's work on a stream: elapsed_ms() once the stream passed
// the stop (after the step's synchronize).
class StepEvents {
 public:
  StepEvents() {
    check_cuda(cudaEventCreate(&start_), "cudaEventCreate");
    check_cuda(cudaEventCreate(&stop_), "cudaEventCreate");
  }
  StepEvents(const StepEvents&) = delete;
  StepEvents& operator=(const StepEvents&) = delete;
  ~StepEvents() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  void start(cudaStream_t stream) {
    check_cuda(cudaEventRecord(start_, stream), "cudaEventRecord");
  }
  void stop(cudaStream_t stream) { check_cuda(cudaEventRecord(stop_, stream), "cudaEventRecord"); }
  double elapsed_ms() const {
    float ms = 0.0f;
    check_cuda(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    return ms;
  }

 private:
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

// Page-locked host memory that grows (contents not kept): host-to-device copies from it are
// true asynchronous DMA.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() { cudaFreeHost(data_); }
  uint8_t* get(size_t bytes) {
    if (bytes_ < bytes) {
      cudaFreeHost(data_);
      data_ = nullptr;
      bytes_ = 0;
      void* p = nullptr;
      check_cuda(cudaHostAlloc(&p, bytes, cudaHostAllocDefault), "cudaHostAlloc(step inputs)");
      data_ = static_cast<uint8_t*>(p);
      bytes_ = bytes;
    }
    return data_;
  }

 private:
  uint8_t* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace quench
