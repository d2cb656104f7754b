// What is out of service among the GPUs the health watcher watches: whole
// GPUs and single MIG instances, each with why, since when, when it may be
// probed again and whether only a reset brings it back. The one record of
// device health in the agent; everything else hears of it through the
// watcher's reports or a snapshot.
//
// Thread-compatible: the health watcher's thread alone changes it.
#ifndef GPU_AGENT_HEALTH_OUTAGE_BOOK_H_
#define GPU_AGENT_HEALTH_OUTAGE_BOOK_H_

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/device_key.h"

namespace gpu_agent::health {

// One outage as others see it, and as it is carried from one watcher to the
// next (a SIGHUP reload), so a reload never brings back a broken GPU.
struct Outage {
  DeviceKey key;
  std::string reason;
  int xid = -1;
  bool needs_reset = false;
  bool was_lost = false;
  std::string check = "";  // the polled check that took it out (its name), or ""
};

class OutageBook {
 public:
  struct Entry {
    Clock::TimePoint next_probe;
    std::string reason;
    int xid = -1;
    bool needs_reset = false;   // comes back only with evidence of a reset
    bool was_lost = false;      // NVML answered GPU_IS_LOST for it meanwhile
    bool waiting_said = false;  // "still needs a reset" was logged
    std::string check;          // the polled check that set the reason, or ""
  };

  // REQUIRES: `clock` outlives the book.
  OutageBook(const Clock* clock, std::chrono::milliseconds recovery_period)
      : clock_(clock), recovery_period_(recovery_period) {}

  // Marks `key` out, or again: its quiet period starts over, a mark that
  // needs a reset makes it need one, and a first mark (or one needing a
  // reset) sets the reason. True when it was not out before.
  bool Mark(const DeviceKey& key, const std::string& reason, int xid, bool needs_reset,
            bool was_lost, const std::string& check = "");

  bool IsOut(const DeviceKey& key) const { return entries_.count(key) > 0; }

  // For the recovery probe to walk, update and erase from.
  std::map<DeviceKey, Entry>& entries() { return entries_; }

  // The next probe due, at the earliest now and at the latest `cap` away.
  std::chrono::milliseconds UntilNextProbe(std::chrono::milliseconds cap) const;

  std::vector<Outage> Snapshot() const;

 private:
  const Clock* const clock_;
  const std::chrono::milliseconds recovery_period_;
  std::map<DeviceKey, Entry> entries_;
};

}  // namespace gpu_agent::health

#endif  // GPU_AGENT_HEALTH_OUTAGE_BOOK_H_
