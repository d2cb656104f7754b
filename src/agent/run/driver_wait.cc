#include "agent/run/driver_wait.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <mutex>

#include "agent/plan/nvml_start.h"
#include "agent/run/metrics_server.h"
#include "agent/run/mode_runner.h"
#include "agent/run/signals.h"
#include "base/backoff.h"
#include "base/duration.h"
#include "base/log.h"
#include "base/prom_text.h"
#include "base/strings.h"
#include "base/version.h"

namespace gpu_agent {

namespace {

// What a driver still being installed looks like: no library yet, or a
// library whose kernel side is not loaded (or not the same version) yet.
// A library without NVML's functions, no permission, or an internal error
// is not mended by waiting.
bool DriverMayStillCome(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kNotFound:            // no libnvidia-ml.so.1; GPU not found
    case absl::StatusCode::kFailedPrecondition:  // driver not loaded, RM version mismatch
    case absl::StatusCode::kUnavailable:
      return true;
    default:
      return false;
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<nvml::NvmlLibrary>> StartNvmlWaitingForDriver(const Config& config) {
  absl::StatusOr<std::unique_ptr<nvml::NvmlLibrary>> lib = StartNvml(config);
  if (lib.ok() || config.driver.wait_timeout <= Duration::zero()) return lib;
  if (!DriverMayStillCome(lib.status())) {
    LogWarning("not waiting for the NVIDIA driver: waiting does not mend this",
               {{"error", std::string(lib.status().message())}});
    return lib;
  }

  using SteadyClock = std::chrono::steady_clock;
  const auto started = SteadyClock::now();
  const auto deadline = started + config.driver.wait_timeout;
  std::mutex mu;
  std::string last_error(lib.status().message());  // protected by mu
  uint64_t attempts = 1;                           // protected by mu
  // The probes answer while waiting: alive, not ready, and why.
  absl::StatusOr<std::unique_ptr<MetricsServer>> metrics = StartMetricsIfConfigured(
      config, {[&] {
                 PromText p;
                 RenderBuildInfo(&p, config.mode);
                 std::lock_guard<std::mutex> lock(mu);
                 p.Family("gpu_agent_driver_wait_attempts_total", "counter",
                          "Tries to load NVML while waiting for the driver.");
                 p.Sample("gpu_agent_driver_wait_attempts_total", {},
                          static_cast<double>(attempts));
                 return p.str();
               },
               [&](std::string* why) {
                 std::lock_guard<std::mutex> lock(mu);
                 *why = StrCat("waiting for the NVIDIA driver: ", last_error);
                 return false;
               },
               nullptr});
  if (!metrics.ok()) return metrics.status();

  LogWarning("NVML cannot be loaded yet; waiting for the NVIDIA driver",
             {{"error", last_error}, {"wait_timeout", FormatDuration(config.driver.wait_timeout)}});
  // 1 s, then doubling up to 30 s.
  Backoff backoff = Backoff::Doubling(std::chrono::seconds(1), std::chrono::seconds(30));
  auto next_log = started + std::chrono::minutes(1);
  auto next_try = started + backoff.Next();
  for (;;) {
    const auto now = SteadyClock::now();
    if (now >= deadline) break;
    if (now < next_try) {
      // A signal other than a stop neither ends nor restarts the wait.
      const int sig = WaitForSignalFor(std::chrono::duration_cast<std::chrono::milliseconds>(
          std::min(deadline, next_try) - now));
      if (sig == SIGTERM || sig == SIGINT) {
        LogInfo("stop asked while waiting for the NVIDIA driver");
        return absl::CancelledError("stopped while waiting for the NVIDIA driver");
      }
      if (sig != 0) {
        LogInfo(
            "signal ignored while waiting for the NVIDIA driver (a SIGHUP's config is read "
            "once the driver is there)",
            {{"signal", StrCat(sig)}});
      }
      continue;
    }
    next_try = SteadyClock::now() + backoff.Next();
    lib = StartNvml(config);
    {
      std::lock_guard<std::mutex> lock(mu);
      ++attempts;
      if (!lib.ok()) last_error = std::string(lib.status().message());
    }
    const auto waited =
        std::chrono::duration_cast<std::chrono::seconds>(SteadyClock::now() - started);
    if (lib.ok()) {
      LogInfo("NVIDIA driver found",
              {{"waited", StrCat(waited.count(), "s")}, {"attempts", StrCat(attempts)}});
      break;
    }
    if (!DriverMayStillCome(lib.status())) {
      LogWarning("stopped waiting for the NVIDIA driver: waiting does not mend this",
                 {{"error", last_error}});
      break;
    }
    if (SteadyClock::now() >= next_log) {  // once a minute, not once a try
      next_log += std::chrono::minutes(1);
      LogWarning("still waiting for the NVIDIA driver", {{"error", last_error},
                                                         {"waited", StrCat(waited.count(), "s")},
                                                         {"attempts", StrCat(attempts)}});
    }
  }
  if (*metrics) (*metrics)->Stop();
  if (!lib.ok()) {
    LogError("gave up waiting for the NVIDIA driver",
             {{"wait_timeout", FormatDuration(config.driver.wait_timeout)}});
  }
  return lib;
}

}  // namespace gpu_agent
