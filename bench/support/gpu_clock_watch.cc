#include "support/gpu_clock_watch.h"

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "quench/core/error.h"

namespace quench::bench {
namespace {

// The few NVML entry points the watch calls, declared from NVML's documented C API (nvml.h is
// not installed on the build machine). Every call returns 0 (NVML_SUCCESS) on success.
using NvmlDevice = void*;
using NvmlInit = int (*)();
using NvmlHandleByPciBusId = int (*)(const char*, NvmlDevice*);
using NvmlClockInfo = int (*)(NvmlDevice, int, unsigned int*);
using NvmlPowerUsage = int (*)(NvmlDevice, unsigned int*);
using NvmlClockReasons = int (*)(NvmlDevice, unsigned long long*);
constexpr int kNvmlClockSm = 1;  // nvmlClockType_t NVML_CLOCK_SM

struct Nvml {
  NvmlClockInfo clock_info = nullptr;
  NvmlPowerUsage power_usage = nullptr;
  NvmlClockReasons clock_reasons = nullptr;
  NvmlHandleByPciBusId handle_by_pci_bus_id = nullptr;
  bool ready = false;
};

// Loaded and initialised once per process; not ready where the library or a symbol is missing.
const Nvml& nvml() {
  static const Nvml loaded = [] {
    Nvml n;
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return n;
    const auto init = reinterpret_cast<NvmlInit>(dlsym(lib, "nvmlInit_v2"));
    n.handle_by_pci_bus_id =
        reinterpret_cast<NvmlHandleByPciBusId>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    n.clock_info = reinterpret_cast<NvmlClockInfo>(dlsym(lib, "nvmlDeviceGetClockInfo"));
    n.power_usage = reinterpret_cast<NvmlPowerUsage>(dlsym(lib, "nvmlDeviceGetPowerUsage"));
    // Renamed in newer drivers; the older name stays exported for compatibility.
    n.clock_reasons =
        reinterpret_cast<NvmlClockReasons>(dlsym(lib, "nvmlDeviceGetCurrentClocksEventReasons"));
    if (n.clock_reasons == nullptr) {
      n.clock_reasons = reinterpret_cast<NvmlClockReasons>(
          dlsym(lib, "nvmlDeviceGetCurrentClocksThrottleReasons"));
    }
    n.ready = init != nullptr && n.handle_by_pci_bus_id != nullptr && n.clock_info != nullptr &&
              n.power_usage != nullptr && n.clock_reasons != nullptr && init() == 0;
    return n;
  }();
  return loaded;
}

// The NVML handle of the current CUDA device (matched by PCI bus id: NVML's and CUDA's device
// orders may differ), or nullptr.
NvmlDevice current_device() {
  if (!nvml().ready) return nullptr;
  int device = 0;
  char bus_id[32] = {};
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), device) != cudaSuccess) {
    return nullptr;
  }
  NvmlDevice handle = nullptr;
  return nvml().handle_by_pci_bus_id(bus_id, &handle) == 0 ? handle : nullptr;
}

// NVML's clocks-event reason bits, by bit position (nvml.h's nvmlClocksEventReason*).
constexpr const char* kReasonNames[] = {
    "idle",       "app_clocks", "sw_power_cap",   "hw_slowdown",    "sync_boost",
    "sw_thermal", "hw_thermal", "hw_power_brake", "display_clocks",
};
constexpr int kIdleReason = 0;

}  // namespace

std::string clock_note(const ClockReading& r) {
  if (r.samples == 0) return "";
  std::string note = str_cat(" sm_mhz=", std::lround(r.sm_mhz_mean), " (", r.sm_mhz_min, "-",
                             r.sm_mhz_max, ") power_w=", std::lround(r.power_w_mean));
  for (int bit = 0; bit < 16; ++bit) {
    if (bit == kIdleReason || r.reason_samples[bit] == 0) continue;
    const int bits_named = static_cast<int>(sizeof(kReasonNames) / sizeof(kReasonNames[0]));
    const std::string name = bit < bits_named ? kReasonNames[bit] : str_cat("reason_bit", bit);
    note += str_cat(" ", name, "=", std::lround(100.0 * r.reason_samples[bit] / r.samples), "%");
  }
  return note;
}

GpuClockWatch::GpuClockWatch() {
  NvmlDevice device = current_device();
  if (device != nullptr) thread_ = std::thread([this, device] { sample_until_stopped(device); });
}

GpuClockWatch::~GpuClockWatch() {
  stop();
}

ClockReading GpuClockWatch::stop() {
  stopping_.store(true);
  if (thread_.joinable()) thread_.join();
  return reading_;
}

void GpuClockWatch::sample_until_stopped(void* device) {
  const Nvml& n = nvml();
  double mhz_sum = 0.0;
  double watts_sum = 0.0;
  int power_samples = 0;
  // At least one sample, even where the timed loop ends within the first interval.
  do {
    unsigned int mhz = 0;
    unsigned int milliwatts = 0;
    unsigned long long reasons = 0;
    if (n.clock_info(device, kNvmlClockSm, &mhz) == 0) {
      const int m = static_cast<int>(mhz);
      reading_.sm_mhz_min = reading_.samples == 0 ? m : std::min(reading_.sm_mhz_min, m);
      reading_.sm_mhz_max = std::max(reading_.sm_mhz_max, m);
      ++reading_.samples;
      mhz_sum += mhz;
      // Power and the limit reasons where the board reports them (a sample counts either way).
      if (n.power_usage(device, &milliwatts) == 0) {
        ++power_samples;
        watts_sum += milliwatts * 1e-3;
      }
      if (n.clock_reasons(device, &reasons) == 0) {
        for (int bit = 0; bit < 16; ++bit) {
          if (reasons >> bit & 1ull) ++reading_.reason_samples[bit];
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  } while (!stopping_.load());
  if (reading_.samples > 0) {
    reading_.sm_mhz_mean = mhz_sum / reading_.samples;
    reading_.power_w_mean = power_samples > 0 ? watts_sum / power_samples : 0.0;
  }
}

}  // namespace quench::bench
