#include "agent/run/held_watch.h"

#include <set>
#include <utility>

#include "agent/run/gpus_held.h"
#include "base/file_util.h"
#include "base/log.h"
#include "base/strings.h"
#include "podresources/pod_resources.h"

namespace gpu_agent {

std::map<std::string, std::string> HoldersOf(
    const std::map<std::string, std::set<std::string>>& held, std::string_view one,
    std::string_view many) {
  std::map<std::string, std::string> out;
  for (const auto& [uuid, names] : held) {
    out.emplace(uuid, StrCat(names.size() == 1 ? one : many, " ", StrJoin(names, ", ")));
  }
  return out;
}

std::string DescribeHolders(const std::map<std::string, std::string>& holders) {
  std::string out;
  for (const auto& [uuid, who] : holders) {
    StrAppend(&out, out.empty() ? "" : "; ", uuid, " (", who, ")");
  }
  return out;
}

std::unique_ptr<HeldWatch> HeldWatch::Start(HeldWatchOptions options, const DeviceModel& model,
                                            const nvml::Inventory& inventory, Report report) {
  std::unique_ptr<HeldWatch> w(
      new HeldWatch(std::move(options), model, inventory, std::move(report)));
  w->state_ = w->Look(/*seen_held=*/false);
  w->seen_held_ = !w->state_.holders.empty();
  w->report_(w->state_);
  if (!w->state_.done) w->thread_ = std::thread([p = w.get()] { p->Run(); });
  return w;
}

HeldWatch::HeldWatch(HeldWatchOptions options, const DeviceModel& model,
                     const nvml::Inventory& inventory, Report report)
    : options_(std::move(options)),
      model_(model),
      inventory_(inventory),
      report_(std::move(report)) {}

HeldWatch::~HeldWatch() { Stop(); }

void HeldWatch::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

HeldState HeldWatch::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_;
}

HeldState HeldWatch::Look(bool seen_held) const {
  HeldState s;
  absl::StatusOr<podresources::PodResources> pods =
      podresources::List(options_.socket, options_.deadline);
  if (pods.ok()) {
    s.holders = HoldersOf(HeldByDevicePlugin(model_, inventory_, *pods), "device-plugin pod",
                          "device-plugin pods");
    s.done = s.holders.empty();
    return s;
  }
  s.problem = std::string(pods.status().message());
  // No PodResources on this node at all (the folder not mounted: a DRA
  // node that never had a device plugin), and nothing known held: nothing
  // to keep out. Any other failure keeps every GPU out until it answers.
  if (!options_.strict && !seen_held && !PathExists(options_.socket)) {
    s.done = true;
    return s;
  }
  for (const std::string& uuid : model_.gpu_uuids) {
    s.holders.emplace(
        uuid, StrCat("no one known: the kubelet's PodResources cannot be read (", s.problem, ")"));
  }
  return s;
}

void HeldWatch::Run() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, options_.interval, [this] { return stop_; });
    if (stop_) return;
  }
  bool confirming = false;  // one answer said nothing is held any more
  for (;;) {
    bool seen_held;
    {
      std::lock_guard<std::mutex> lock(mu_);
      seen_held = seen_held_;
    }
    HeldState now = Look(seen_held);
    std::unique_lock<std::mutex> lock(mu_);
    if (stop_) return;
    // GPUs were held and an answer says none is: believed when the next
    // answer, an interval on, says so too (a kubelet that has just started
    // can answer before it knows its pods).
    if (now.done && !state_.holders.empty() && !confirming) {
      confirming = true;
    } else {
      confirming = false;
      seen_held_ = seen_held_ || !now.holders.empty();
      const bool changed =
          now.holders != state_.holders || now.problem != state_.problem || now.done != state_.done;
      state_ = now;
      if (changed) {
        lock.unlock();
        report_(now);
        lock.lock();
      }
      if (now.done) return;
    }
    cv_.wait_for(lock, options_.interval, [this] { return stop_; });
    if (stop_) return;
  }
}

}  // namespace gpu_agent
