// The SM clock, power draw and clock-limit reasons while a benchmark's timed loop runs, so that
// a figure carries the clock it was measured at. Sustained FP8 prefill on an H100 runs at the
// board's 700 W limit with the SM clock at 1710-1800 MHz instead of 1980 (bench/LOG.md,
// forty-sixth session): two runs of the same kernel can differ by the clock they got, and an A/B
// reads truer per clock.
//
// The readings come from NVML (libnvidia-ml.so.1 of the GPU driver), loaded at run time: the
// build machine has no driver, and a machine without it gets no reading (an empty note), never a
// failure.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

namespace quench::bench {

struct ClockReading {
  int samples = 0;  // 0: NVML was not available
  double sm_mhz_mean = 0.0;
  int sm_mhz_min = 0;
  int sm_mhz_max = 0;
  // NVML's power reading, which on Hopper averages about the last second: a lone 10-50 ms loop
  // after an idle GPU read 77-161 W at full clock, while in a sweep of back-to-back cases it reads
  // the draw. The board's energy counter is no better over one loop: it advanced in steps of 70+
  // ms on the H100 (0 mJ over some 74 ms loops, 1.1 kW over others; bench/LOG.md, forty-seventh
  // session).
  double power_w_mean = 0.0;
  // Samples in which each clock-limit reason (NVML's clocks-event bits, bit i) was active.
  int reason_samples[16] = {};
};

// " sm_mhz=1755 (1710-1800) power_w=699 sw_power_cap=90%" for a note (the reasons other than an
// idle GPU, with the share of samples they were active in); "" without samples.
std::string clock_note(const ClockReading& reading);

// Samples the current CUDA device every 5 ms on a thread of its own from construction to stop().
class GpuClockWatch {
 public:
  GpuClockWatch();
  ~GpuClockWatch();
  GpuClockWatch(const GpuClockWatch&) = delete;
  GpuClockWatch& operator=(const GpuClockWatch&) = delete;

  // Ends the sampling; later calls return the same reading.
  ClockReading stop();

 private:
  void sample_until_stopped(void* device);

  std::atomic<bool> stopping_{false};
  std::thread thread_;
  ClockReading reading_;
};

}  // namespace quench::bench
