#include "health/gpu_checks.h"

#include <cstdio>

#include "base/strings.h"
#include "nvml/nvml_library.h"

namespace gpu_agent::health {

std::string_view CheckStateName(CheckState s) {
  switch (s) {
    case CheckState::kPass:
      return "pass";
    case CheckState::kFailing:
      return "failing";
    case CheckState::kOff:
      return "off";
    case CheckState::kUnknown:
      return "unknown";
    case CheckState::kBaseline:
      return "baseline";
  }
  return "unknown";
}

namespace {

std::string Hex(unsigned long long v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", v);
  return buf;
}

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string RecoveryActionName(unsigned a) {
  switch (a) {
    case NVML_GPU_RECOVERY_ACTION_NONE:
      return "none";
    case NVML_GPU_RECOVERY_ACTION_GPU_RESET:
      return "GPU reset";
    case NVML_GPU_RECOVERY_ACTION_NODE_REBOOT:
      return "node reboot";
    case NVML_GPU_RECOVERY_ACTION_DRAIN_P2P:
      return "drain peer-to-peer";
    case NVML_GPU_RECOVERY_ACTION_DRAIN_AND_RESET:
      return "drain and reset";
    default:
      return StrCat("action ", a);
  }
}

std::string ClockReasonNames(unsigned long long r) {
  std::vector<std::string> names;
  if (r & nvmlClocksEventReasonHwSlowdown) names.push_back("hardware slowdown");
  if (r & nvmlClocksEventReasonHwThermalSlowdown) names.push_back("hardware thermal slowdown");
  if (r & nvmlClocksEventReasonHwPowerBrakeSlowdown) names.push_back("power brake");
  return names.empty() ? "none" : StrJoin(names, ", ");
}

constexpr unsigned long long kSlowdownReasons = nvmlClocksEventReasonHwSlowdown |
                                                nvmlClocksEventReasonHwThermalSlowdown |
                                                nvmlClocksEventReasonHwPowerBrakeSlowdown;

// Builds one result; `off_if_absent`: the answers that turn the check off
// when NVML does not support them.
class Judging {
 public:
  Judging(const nvml::NvmlLibrary& lib, CheckId id) : lib_(lib) { r_.id = id; }

  template <typename T>
  void Raw(const std::string& query, const Answered<T>& a, const std::string& value) {
    r_.raw.emplace_back(query, a.ok() ? value : Error(a.code));
  }
  std::string Error(nvmlReturn_t code) const {
    if (code == NVML_ERROR_FUNCTION_NOT_FOUND) return "not supported (not in this driver)";
    if (code == NVML_ERROR_NOT_SUPPORTED) return "not supported";
    return lib_.ErrorText(code);
  }
  // True when `a` settles the result (off or unknown).
  template <typename T>
  bool Settled(const Answered<T>& a, const std::string& query) {
    if (a.ok()) return false;
    if (a.absent()) {
      r_.state = CheckState::kOff;
      r_.detail = StrCat(query, ": ", Error(a.code));
    } else {
      r_.state = CheckState::kUnknown;
      r_.detail = StrCat(query, ": ", Error(a.code));
    }
    return true;
  }
  CheckResult& r() { return r_; }
  CheckResult Done(bool failing, std::string value, double number) {
    r_.state = failing ? CheckState::kFailing : CheckState::kPass;
    r_.value = std::move(value);
    r_.number = number;
    return std::move(r_);
  }
  CheckResult Off(std::string why) {
    r_.state = CheckState::kOff;
    r_.detail = std::move(why);
    return std::move(r_);
  }

 private:
  const nvml::NvmlLibrary& lib_;
  CheckResult r_;
};

std::string RowsText(const RemappedRows& rr) {
  return StrCat("corrRows=", rr.corrected, " uncRows=", rr.uncorrected, " isPending=", rr.pending,
                " failureOccurred=", rr.failed);
}

}  // namespace

std::vector<CheckResult> GpuChecks::Judge(const GpuSample& s, const CheckSettings& settings,
                                          Clock::TimePoint now) {
  std::vector<CheckResult> out;
  const GpuFacts& f = facts_;
  constexpr const char* kRows = "nvmlDeviceGetRemappedRows";
  // Row remapping.
  for (CheckId id : {CheckId::kRowRemapPending, CheckId::kRowRemapFailed}) {
    Judging j(lib_, id);
    j.Raw(kRows, s.remapped_rows, RowsText(s.remapped_rows.value));
    if (j.Settled(s.remapped_rows, kRows)) {
      out.push_back(std::move(j.r()));
      continue;
    }
    const bool pending = id == CheckId::kRowRemapPending;
    const unsigned v = pending ? s.remapped_rows.value.pending : s.remapped_rows.value.failed;
    out.push_back(j.Done(v != 0,
                         pending ? (v ? "a remap is pending" : "none pending")
                                 : (v ? "remapping failed" : "no failure"),
                         v != 0 ? 1 : 0));
  }
  {
    Judging j(lib_, CheckId::kRetiredPagesPending);
    constexpr const char* kPages = "nvmlDeviceGetRetiredPagesPendingStatus";
    if (!s.remapped_rows.absent()) {
      out.push_back(j.Off("the GPU remaps rows instead (Ampere and later)"));
    } else {
      j.Raw(kPages, s.pages_pending, s.pages_pending.value ? "enabled" : "disabled");
      if (!j.Settled(s.pages_pending, kPages)) {
        out.push_back(j.Done(s.pages_pending.value,
                             s.pages_pending.value ? "retirement pending" : "none pending",
                             s.pages_pending.value ? 1 : 0));
      } else {
        out.push_back(std::move(j.r()));
      }
    }
  }
  {
    Judging j(lib_, CheckId::kEccUncorrectable);
    constexpr const char* kMode = "nvmlDeviceGetEccMode";
    constexpr const char* kTotal = "nvmlDeviceGetTotalEccErrors(UNCORRECTED, VOLATILE)";
    j.Raw(kMode, f.ecc_enabled, f.ecc_enabled.value ? "enabled" : "disabled");
    if (j.Settled(f.ecc_enabled, kMode)) {
      out.push_back(std::move(j.r()));
    } else if (!f.ecc_enabled.value) {
      out.push_back(j.Off("ECC is off on this GPU"));
    } else {
      j.Raw(kTotal, s.ecc_uncorrected, StrCat(s.ecc_uncorrected.value));
      if (j.Settled(s.ecc_uncorrected, kTotal)) {
        out.push_back(std::move(j.r()));
      } else {
        const unsigned long long now_count = s.ecc_uncorrected.value;
        const std::optional<Counter> before = ecc_;
        ecc_ = Counter{now_count, now};
        if (!before || now_count < before->value) {
          // First reading, or the volatile count went back (a reset or a
          // driver reload cleared it): a new baseline.
          CheckResult r = j.Done(false, StrCat(now_count, " since the driver loaded"),
                                 std::numeric_limits<double>::quiet_NaN());
          r.state = CheckState::kBaseline;
          out.push_back(std::move(r));
        } else {
          const unsigned long long delta = now_count - before->value;
          const double threshold = settings[CheckId::kEccUncorrectable].threshold;
          out.push_back(j.Done(static_cast<double>(delta) >= threshold,
                               StrCat(delta, " new since the last poll (", now_count, " in all)"),
                               static_cast<double>(delta)));
        }
      }
    }
  }
  {
    Judging j(lib_, CheckId::kRecoveryAction);
    constexpr const char* kField = "nvmlDeviceGetFieldValues(GPU_RECOVERY_ACTION)";
    j.Raw(kField, s.recovery_action, StrCat(s.recovery_action.value));
    if (!j.Settled(s.recovery_action, kField)) {
      const unsigned a = s.recovery_action.value;
      out.push_back(j.Done(a != NVML_GPU_RECOVERY_ACTION_NONE, RecoveryActionName(a), a));
    } else {
      out.push_back(std::move(j.r()));
    }
  }
  {
    Judging j(lib_, CheckId::kTemperature);
    constexpr const char* kSlow = "nvmlDeviceGetTemperatureThreshold(SLOWDOWN)";
    constexpr const char* kShut = "nvmlDeviceGetTemperatureThreshold(SHUTDOWN)";
    constexpr const char* kTemp = "nvmlDeviceGetTemperature(GPU)";
    j.Raw(kSlow, f.slowdown_c, StrCat(f.slowdown_c.value));
    j.Raw(kShut, f.shutdown_c, StrCat(f.shutdown_c.value));
    if (j.Settled(f.slowdown_c, kSlow)) {
      out.push_back(std::move(j.r()));
    } else {
      j.Raw(kTemp, s.temperature_c, StrCat(s.temperature_c.value));
      if (j.Settled(s.temperature_c, kTemp)) {
        out.push_back(std::move(j.r()));
      } else {
        const unsigned t = s.temperature_c.value;
        const double margin = settings[CheckId::kTemperature].threshold;
        std::string value = StrCat(t, " C (slowdown at ", f.slowdown_c.value, " C");
        if (f.shutdown_c.ok()) StrAppend(&value, ", shutdown at ", f.shutdown_c.value, " C");
        StrAppend(&value, ")");
        const bool shutdown = f.shutdown_c.ok() && t >= f.shutdown_c.value;
        if (shutdown) StrAppend(&value, ": at the shutdown temperature");
        out.push_back(j.Done(
            shutdown || static_cast<double>(t) + margin >= static_cast<double>(f.slowdown_c.value),
            value, t));
      }
    }
  }
  constexpr const char* kClocks = "nvmlDeviceGetCurrentClocksEventReasons";
  {
    Judging j(lib_, CheckId::kClockEvents);
    j.Raw(kClocks, s.clock_reasons, Hex(s.clock_reasons.value));
    if (!j.Settled(s.clock_reasons, kClocks)) {
      const unsigned long long held = s.clock_reasons.value & kSlowdownReasons;
      out.push_back(j.Done(held != 0, ClockReasonNames(held), static_cast<double>(held)));
    } else {
      out.push_back(std::move(j.r()));
    }
  }
  {
    Judging j(lib_, CheckId::kNvLink);
    constexpr const char* kState = "nvmlDeviceGetNvLinkState";
    const std::vector<unsigned>& links = f.nvlinks_up.value;
    if (!f.nvlinks_up.ok() || links.empty()) {
      j.Raw(kState, f.nvlinks_up, "no link up");
      out.push_back(j.Off(f.nvlinks_up.ok() || f.nvlinks_up.absent()
                              ? "no NVLink link up at discovery (a PCIe-only GPU)"
                              : StrCat(kState, ": ", j.Error(f.nvlinks_up.code))));
    } else {
      const std::string query =
          f.nvlink_by_field ? "nvmlDeviceGetFieldValues(NVLINK_GET_STATE)" : kState;
      std::vector<unsigned> down;
      std::string unknown;
      bool absent = false;
      for (unsigned link : links) {
        auto it = s.nvlink_up.find(link);
        if (it != s.nvlink_up.end()) {
          links_[link] = it->second;
        } else if (!links_.count(link)) {
          links_[link] = Answered<bool>{NVML_SUCCESS, true};  // up at discovery, not read since
        }
        const Answered<bool> a = links_[link];
        j.Raw(StrCat(query, "[link ", link, "]"), a, a.value ? "active" : "inactive");
        if (a.ok()) {
          if (!a.value) down.push_back(link);
        } else if (a.absent()) {
          absent = true;
        } else if (unknown.empty()) {
          unknown = StrCat(query, " link ", link, ": ", j.Error(a.code));
        }
      }
      if (absent) {
        out.push_back(j.Off(StrCat(query, ": not supported")));
      } else if (!unknown.empty() && down.empty()) {
        j.r().state = CheckState::kUnknown;
        j.r().detail = unknown;
        out.push_back(std::move(j.r()));
      } else {
        std::string value = StrCat(down.size(), " of ", links.size(), " links down");
        if (!down.empty()) StrAppend(&value, " (", StrJoin(down, ", "), ")");
        const double threshold = settings[CheckId::kNvLink].threshold;
        out.push_back(j.Done(static_cast<double>(down.size()) >= threshold, value,
                             static_cast<double>(down.size())));
      }
    }
  }
  {
    Judging j(lib_, CheckId::kPcieWidth);
    constexpr const char* kMax = "nvmlDeviceGetMaxPcieLinkWidth";
    constexpr const char* kCur = "nvmlDeviceGetCurrPcieLinkWidth";
    j.Raw(kMax, f.max_link_width, StrCat(f.max_link_width.value));
    if (j.Settled(f.max_link_width, kMax)) {
      out.push_back(std::move(j.r()));
    } else {
      j.Raw(kCur, s.link_width, StrCat(s.link_width.value));
      if (j.Settled(s.link_width, kCur)) {
        out.push_back(std::move(j.r()));
      } else {
        out.push_back(j.Done(s.link_width.value < f.max_link_width.value,
                             StrCat("x", s.link_width.value, " of x", f.max_link_width.value),
                             s.link_width.value));
      }
    }
  }
  {
    Judging j(lib_, CheckId::kPcieGeneration);
    constexpr const char* kMax = "nvmlDeviceGetMaxPcieLinkGeneration";
    constexpr const char* kCur = "nvmlDeviceGetCurrPcieLinkGeneration";
    j.Raw(kMax, f.max_link_generation, StrCat(f.max_link_generation.value));
    if (j.Settled(f.max_link_generation, kMax)) {
      out.push_back(std::move(j.r()));
    } else {
      j.Raw(kCur, s.link_generation, StrCat(s.link_generation.value));
      if (j.Settled(s.link_generation, kCur)) {
        out.push_back(std::move(j.r()));
      } else {
        const std::string value =
            StrCat("gen ", s.link_generation.value, " of gen ", f.max_link_generation.value);
        if (!s.clock_reasons.ok()) {
          // An idle GPU's link trains down to save power: without knowing
          // whether it is idle, a low generation says nothing.
          j.r().state = CheckState::kUnknown;
          j.r().value = value;
          j.r().detail = StrCat("not judged: ", kClocks, " does not say whether the GPU is idle");
          out.push_back(std::move(j.r()));
        } else if (s.clock_reasons.value & nvmlClocksEventReasonGpuIdle) {
          CheckResult r = j.Done(false, value, s.link_generation.value);
          r.detail = "the GPU is idle: its link may train down to save power";
          out.push_back(std::move(r));
        } else {
          out.push_back(j.Done(s.link_generation.value < f.max_link_generation.value, value,
                               s.link_generation.value));
        }
      }
    }
  }
  {
    Judging j(lib_, CheckId::kPcieReplays);
    constexpr const char* kReplay = "nvmlDeviceGetPcieReplayCounter";
    j.Raw(kReplay, s.replays, StrCat(s.replays.value));
    if (j.Settled(s.replays, kReplay)) {
      out.push_back(std::move(j.r()));
    } else {
      const std::optional<Counter> before = replays_;
      replays_ = Counter{s.replays.value, now};
      const double seconds = before ? std::chrono::duration<double>(now - before->at).count() : 0.0;
      if (!before || s.replays.value < before->value || seconds <= 0) {
        CheckResult r = j.Done(false, StrCat(s.replays.value, " since the driver loaded"),
                               std::numeric_limits<double>::quiet_NaN());
        r.state = CheckState::kBaseline;
        out.push_back(std::move(r));
      } else {
        const unsigned long long delta = s.replays.value - before->value;
        const double per_minute = static_cast<double>(delta) * 60.0 / seconds;
        const double threshold = settings[CheckId::kPcieReplays].threshold;
        out.push_back(
            j.Done(per_minute >= threshold,
                   StrCat(delta, " in ", Number(seconds), " s (", Number(per_minute), " a minute)"),
                   per_minute));
      }
    }
  }
  return out;
}

}  // namespace gpu_agent::health
