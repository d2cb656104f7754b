#include "dra/claim_preparer.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>

#include "base/file_lock.h"
#include "base/file_util.h"
#include "base/json.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/text.h"

namespace gpu_agent::dra {

ClaimPreparer::ClaimPreparer(PreparerOptions options, std::shared_ptr<ClaimReader> reader)
    : options_(std::move(options)),
      reader_(std::move(reader)),
      checkpoint_writer_(options_.checkpoint) {}

absl::StatusOr<std::unique_ptr<ClaimPreparer>> ClaimPreparer::Create(
    PreparerOptions options, std::shared_ptr<ClaimReader> reader) {
  // Container runtimes read the specs (0755); the checkpoint is the
  // agent's alone (its folder is the plugin's, 0750 as the kubelet's).
  if (absl::Status s = MakeTrustedFolder(options.cdi_dir, 0755, "cdi.specDir"); !s.ok()) return s;
  const std::string folder = std::filesystem::path(options.checkpoint).parent_path().string();
  if (absl::Status s = MakeTrustedFolder(folder, 0750, "the DRA checkpoint's folder"); !s.ok()) {
    return s;
  }
  std::unique_ptr<ClaimPreparer> p(new ClaimPreparer(std::move(options), std::move(reader)));
  if (!p->options_.lock_file.empty()) {
    absl::StatusOr<std::unique_ptr<FileLock>> lock = FileLock::Open(p->options_.lock_file);
    if (!lock.ok()) return lock.status();
    p->lock_ = *std::move(lock);
  }
  FileLockHolder hold(p->lock_.get());
  if (!hold.status().ok()) return hold.status();
  p->Load();
  return p;
}

void ClaimPreparer::SetCatalog(std::shared_ptr<const DeviceCatalog> catalog) {
  std::lock_guard<std::mutex> lock(mu_);
  catalog_ = std::move(catalog);
  ResolveLegacyDevicesLocked();
}

void ClaimPreparer::SetTaints(std::map<std::string, DeviceTaint> taints) {
  std::lock_guard<std::mutex> lock(mu_);
  taints_ = std::move(taints);
}

std::string ClaimCdiName(const std::string& uid, const std::string& device,
                         const std::string& share_id) {
  return share_id.empty() ? StrCat(uid, "-", device) : StrCat(uid, "-", device, "_", share_id);
}

void ClaimPreparer::SetWithheld(std::map<std::string, std::string> holders) {
  std::lock_guard<std::mutex> lock(mu_);
  withheld_ = std::move(holders);
}

std::string ClaimPreparer::SpecPath(const std::string& uid) const {
  return StrCat(options_.cdi_dir, "/", options_.cdi_vendor, "-claim_", uid, ".json");
}

std::map<std::string, PrepareOutcome> ClaimPreparer::Prepared() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, PrepareOutcome> out;
  for (const auto& [uid, e] : prepared_) out[uid].devices = AnswerOf(e);
  return out;
}

PreparedClaims ClaimPreparer::PreparedEntries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return prepared_;
}

std::vector<PreparedDevice> ClaimPreparer::AnswerOf(const Entry& e) {
  std::vector<PreparedDevice> out;
  out.reserve(e.devices.size());
  for (const PreparedClaim::Device& d : e.devices) out.push_back(d.answer);
  return out;
}

std::map<std::string, PrepareOutcome> ClaimPreparer::Prepare(const std::vector<ClaimRef>& claims) {
  // Another instance (a rolling update's) may have written the checkpoint
  // since: read again under the lock both hold for a whole call.
  FileLockHolder hold(lock_.get());
  CatchUpLocked(hold);
  std::map<std::string, PrepareOutcome> out;
  std::vector<std::string> added;
  std::vector<const ClaimRef*> todo;  // each UID once
  for (const ClaimRef& c : claims) {
    if (out.count(c.uid) > 0) continue;  // asked twice in the batch: one answer
    PrepareOutcome& o = out[c.uid];
    // Names go into a URL and the UID into a file name: nothing but what
    // Kubernetes itself allows gets that far.
    if (absl::Status bad = ValidateClaimRef(c); !bad.ok()) {
      o.error = std::string(bad.message());
      continue;
    }
    // Prepared before (this run or the checkpoint's): the same answer, as
    // long as its spec is still there.
    std::lock_guard<std::mutex> lock(mu_);
    auto it = prepared_.find(c.uid);
    if (it != prepared_.end() && !it->second.from_spec && PathExists(SpecPath(c.uid))) {
      if (std::string moved = MovedLocked(c, it->second); !moved.empty()) {
        o.error = moved;
        LogWarning(
            "claim not prepared",
            {{"claim", StrCat(c.name_space, "/", c.name)}, {"uid", c.uid}, {"error", moved}});
        continue;
      }
      o.devices = AnswerOf(it->second);
      continue;
    }
    todo.push_back(&c);
  }
  // The claims' GETs (and specs) a few at a time: the batch waits for the
  // API server about once, not once per claim.
  std::vector<Entry> entries(todo.size());
  std::vector<std::string> errors(todo.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < todo.size(); i = next++)
      errors[i] = PrepareOne(*todo[i], &entries[i]);
  };
  std::vector<std::thread> helpers;
  for (size_t n = 1; n < std::min(todo.size(), kConcurrentReads); ++n) helpers.emplace_back(work);
  work();
  for (std::thread& t : helpers) t.join();
  // Time slices a claim set that is not prepared in the end: set back.
  std::vector<std::string> undo;
  for (size_t i = 0; i < todo.size(); ++i) {
    const ClaimRef& c = *todo[i];
    PrepareOutcome& o = out[c.uid];
    if (!errors[i].empty()) {
      LogWarning(
          "claim not prepared",
          {{"claim", StrCat(c.name_space, "/", c.name)}, {"uid", c.uid}, {"error", errors[i]}});
      o.error = errors[i];
      undo.insert(undo.end(), entries[i].time_sliced.begin(), entries[i].time_sliced.end());
      continue;
    }
    o.devices = AnswerOf(entries[i]);
    std::lock_guard<std::mutex> lock(mu_);
    prepared_[c.uid] = std::move(entries[i]);
    added.push_back(c.uid);
  }
  {
    // The batch's claims are in prepared_ (or refused): their holds on
    // devices are no longer needed to keep each other apart.
    std::lock_guard<std::mutex> lock(mu_);
    std::erase_if(held_, [&](const auto& h) { return out.count(h.second.claim.uid) > 0; });
  }
  if (!added.empty()) {
    if (absl::Status s = Save(); !s.ok()) {
      // The kubelet asks again; until the checkpoint is written, a restart
      // could not unprepare these. Forgotten here too, so its retry
      // prepares them again and writes the checkpoint before answering
      // (their specs stay; a later start takes them in).
      std::lock_guard<std::mutex> lock(mu_);
      for (const std::string& uid : added) {
        auto it = prepared_.find(uid);
        undo.insert(undo.end(), it->second.time_sliced.begin(), it->second.time_sliced.end());
        prepared_.erase(it);
        out[uid].devices.clear();
        out[uid].error = StrCat("prepared, but ", s.message());
      }
    } else {
      LogPrepared(added);
    }
  }
  ResetTimeSlices(undo);
  return out;
}

void ClaimPreparer::LogPrepared(const std::vector<std::string>& uids) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const std::string& uid : uids) {
    auto it = prepared_.find(uid);
    if (it == prepared_.end()) continue;
    std::vector<std::string> devices;
    for (const PreparedClaim::Device& d : it->second.devices) {
      devices.push_back(d.answer.share_id.empty()
                            ? d.answer.device
                            : StrCat(d.answer.device, " (share ", d.answer.share_id, ", ", d.shares,
                                     d.shares == 1 ? " share)" : " shares)"));
    }
    LogInfo("claim prepared", {{"claim", StrCat(it->second.name_space, "/", it->second.name)},
                               {"uid", uid},
                               {"devices", StrJoin(devices, ", ")}});
  }
}

std::string ClaimPreparer::MovedLocked(const ClaimRef& c, const Entry& e) const {
  if (!catalog_) return "";
  for (const PreparedClaim::Device& d : e.devices) {
    if (d.uuid.empty()) continue;  // prepared by a version that kept no UUID
    for (const DraDevice& now : catalog_->devices) {
      if (now.name != d.answer.device || now.uuid == d.uuid) continue;
      return StrCat(NamedClaim(c), ": device \"", now.name, "\" was prepared as ", d.uuid,
                    " and is now ", now.uuid,
                    " (the GPU was replaced or moved since); its containers would get another "
                    "device than the one prepared, so the claim is refused and its CDI spec "
                    "left as it was");
    }
  }
  return "";
}

ClaimPreparer::Use ClaimPreparer::UseLocked(const DraDevice& device, const std::string& uid) const {
  Use use;
  auto add = [&use](std::string who, int64_t shares) {
    if (shares == 0) {
      if (use.whole.empty()) use.whole = std::move(who);
    } else {
      use.shares += shares;
      // A claim with two shares of the device is named once.
      if (std::find(use.sharers.begin(), use.sharers.end(), who) == use.sharers.end()) {
        use.sharers.push_back(std::move(who));
      }
    }
  };
  for (const auto& [other, e] : prepared_) {
    if (other == uid) continue;
    for (const PreparedClaim::Device& d : e.devices) {
      if (d.admin_access) continue;
      if (d.uuid.empty() ? d.answer.device != device.name : d.uuid != device.uuid) continue;
      add(StrCat("claim ", e.name_space, "/", e.name, " (", other, ")"), d.shares);
    }
  }
  auto [first, last] = held_.equal_range(device.uuid);
  for (auto it = first; it != last; ++it) {
    if (it->second.claim.uid == uid) continue;
    add(StrCat(NamedClaim(it->second.claim), " (", it->second.claim.uid, ")"), it->second.shares);
  }
  return use;
}

absl::StatusOr<std::vector<AllocatedDevice>> ClaimPreparer::ReadAllocation(const ClaimRef& c) {
  absl::StatusOr<ClaimReader::Answer> answer = reader_->GetClaim(c.name_space, c.name);
  if (!answer.ok()) {
    return absl::UnavailableError(
        StrCat(NamedClaim(c), ": cannot read it from the API server: ", answer.status().message()));
  }
  if (answer->status == 404) {
    return absl::NotFoundError(StrCat(NamedClaim(c), " (", c.uid,
                                      ") is gone from the API server (deleted after its ",
                                      "allocation?)"));
  }
  if (answer->status != 200) {
    return absl::UnavailableError(StrCat(NamedClaim(c), ": the API server answered ",
                                         answer->status, ": ", json::MessageOf(answer->body)));
  }
  return ParseAllocation(answer->body, c, options_.driver, options_.pool);
}

std::string ClaimPreparer::FindDevices(const ClaimRef& c,
                                       const std::vector<AllocatedDevice>& allocated,
                                       const DeviceCatalog& catalog, const Keep& keep,
                                       std::vector<Found>* found) const {
  found->assign(allocated.size(), Found{});
  for (size_t i = 0; i < allocated.size(); ++i) {
    const AllocatedDevice& a = allocated[i];
    Found& f = (*found)[i];
    for (const DraDevice& d : catalog.devices) {
      if (d.name == a.device) f.device = &d;
    }
    if (f.device == nullptr) {
      return StrCat(NamedClaim(c), ": device \"", a.device, "\" is not one of this node's (pool ",
                    options_.pool, ")");
    }
    for (const cdi::Device& d : catalog.node_spec.devices) {
      if (d.name == f.device->uuid) f.edits = &d;
    }
    if (f.edits == nullptr) {
      return StrCat(NamedClaim(c), ": device \"", a.device, "\" (", f.device->uuid,
                    ") has no entry in the node's CDI spec");
    }
    // A GPU a running pod holds through the device plugin is no claim's,
    // whatever the claim tolerates or asks.
    if (auto w = keep.withheld.find(f.device->key.uuid); w != keep.withheld.end()) {
      return StrCat(NamedClaim(c), ": device \"", a.device, "\" (", f.device->key.uuid,
                    ") is held by ", w->second, "; it is offered once they end");
    }
    // An unhealthy device is tainted in the slices; the scheduler still
    // allocates it to a claim that tolerates the taint or asks for admin
    // access (a diagnostic pod), and those get it.
    auto taint = keep.taints.find(a.device);
    if (taint != keep.taints.end() && !a.admin_access && KeepsAway(taint->second, a.tolerations)) {
      return StrCat(NamedClaim(c), ": device \"", a.device, "\" is unhealthy (taint ",
                    TaintString(taint->second),
                    ", which the claim does not tolerate; admin access would take it)");
    }
  }
  return "";
}

namespace {

// The claims `names` name, the first few of them: a device shared a
// thousand ways must not make a refusal of a hundred kilobytes.
std::string FirstFew(const std::vector<std::string>& names) {
  constexpr size_t kNamed = 4;
  if (names.size() <= kNamed) return StrJoin(names, ", ");
  return StrCat(StrJoin(std::vector<std::string>(names.begin(), names.begin() + kNamed), ", "),
                " and ", names.size() - kNamed, " more");
}

}  // namespace

std::string ClaimPreparer::Hold(const ClaimRef& c, const std::vector<AllocatedDevice>& allocated,
                                const std::vector<Found>& found) {
  // The last line of defence the kubelet plugin helper documents: a device
  // is prepared for one claim at a time, or, shared, for claims whose
  // shares it has (the scheduler's allocation already says so); admin
  // access shares it by design.
  std::lock_guard<std::mutex> lock(mu_);
  // What this claim takes of each device so far, by UUID: shares, or -1
  // for the whole device.
  std::map<std::string, int64_t> mine;
  for (size_t i = 0; i < allocated.size(); ++i) {
    const AllocatedDevice& a = allocated[i];
    const DraDevice& device = *found[i].device;
    if (a.admin_access) continue;
    const Use use = UseLocked(device, c.uid);
    const std::string named =
        StrCat(NamedClaim(c), ": device \"", device.name, "\" (", device.uuid, ")");
    auto [taken, first] = mine.try_emplace(device.uuid, 0);
    if (a.share_id.empty()) {
      const std::string holder = !use.whole.empty() ? use.whole : FirstFew(use.sharers);
      if (!holder.empty()) {
        return StrCat(named, " is already prepared for ", holder,
                      "; a device serves one claim at a time (admin access excepted)");
      }
      if (taken->second > 0) {
        return StrCat(named, " is allocated to it both whole and as a share");
      }
      taken->second = -1;
      continue;
    }
    if (!device.sharing.shared()) {
      return StrCat(named, " is allocated as a share (shareID ", a.share_id,
                    "), but this node does not share it (sharing.timeSlicing does not name it)");
    }
    if (!use.whole.empty()) return StrCat(named, " is already prepared whole for ", use.whole);
    if (taken->second < 0) return StrCat(named, " is allocated to it both whole and as a share");
    // Each term is at most kMaxShares (ParseAllocation, the checkpoint) and
    // there are at most a few thousand: no sum can overflow.
    taken->second += a.shares;
    if (taken->second > device.sharing.most_per_claim) {
      return StrCat(named, " is allocated ", taken->second,
                    " of its shares; a claim may take at most ", device.sharing.most_per_claim,
                    device.sharing.most_per_claim == 1 ? " (failRequestsGreaterThanOne)" : "");
    }
    if (use.shares + taken->second > device.sharing.shares) {
      return StrCat(named, " has ", device.sharing.shares, " shares; ",
                    use.sharers.empty()
                        ? ""
                        : StrCat(FirstFew(use.sharers),
                                 use.sharers.size() == 1 ? " holds " : " hold ", use.shares, ", "),
                    "this claim asks ", taken->second);
    }
  }
  for (size_t i = 0; i < allocated.size(); ++i) {
    const AllocatedDevice& a = allocated[i];
    if (a.admin_access) continue;
    held_.emplace(found[i].device->uuid, Held{c, a.share_id.empty() ? 0 : a.shares});
  }
  return "";
}

std::string ClaimPreparer::PrepareOne(const ClaimRef& c, Entry* entry) {
  absl::StatusOr<std::vector<AllocatedDevice>> allocated = ReadAllocation(c);
  if (!allocated.ok()) return std::string(allocated.status().message());
  std::shared_ptr<const DeviceCatalog> catalog;
  Keep keep;
  {
    std::lock_guard<std::mutex> lock(mu_);
    catalog = catalog_;
    keep.taints = taints_;
    keep.withheld = withheld_;
  }
  if (!catalog) return StrCat(NamedClaim(c), ": the node's devices are not known yet");
  // Each result's device and its edits, checked before anything is set or
  // written.
  std::vector<Found> found;
  if (std::string why = FindDevices(c, *allocated, *catalog, keep, &found); !why.empty()) {
    return why;
  }
  if (std::string why = Hold(c, *allocated, found); !why.empty()) return why;
  cdi::Spec spec;
  spec.kind = CdiKind();
  spec.edits = catalog->node_spec.edits;
  entry->name_space = c.name_space;
  entry->name = c.name;
  for (size_t i = 0; i < allocated->size(); ++i) {
    const AllocatedDevice& a = (*allocated)[i];
    const DraDevice& device = *found[i].device;
    if (std::string why = SetTimeSlice(device, a.time_slice); !why.empty()) {
      return StrCat(NamedClaim(c), ": ", why);
    }
    if (!a.time_slice.empty() && a.time_slice != kDefaultTimeSlice &&
        std::find(entry->time_sliced.begin(), entry->time_sliced.end(), device.uuid) ==
            entry->time_sliced.end()) {
      entry->time_sliced.push_back(device.uuid);
    }
    // The kubelet gives a container the devices whose request names hold
    // the request it names, always a main one: a subrequest's device is
    // answered under its main request. A device two requests share is
    // prepared once, naming both.
    const std::string request = MainRequestName(a.request);
    bool merged = false;
    for (PreparedClaim::Device& p : entry->devices) {
      if (p.answer.device != a.device || p.answer.share_id != a.share_id) continue;
      std::vector<std::string>& names = p.answer.request_names;
      if (std::find(names.begin(), names.end(), request) == names.end()) names.push_back(request);
      p.admin_access = p.admin_access && a.admin_access;
      merged = true;
    }
    if (merged) continue;
    const std::string cdi_name = ClaimCdiName(c.uid, a.device, a.share_id);
    spec.devices.push_back({cdi_name, found[i].edits->edits});
    PreparedClaim::Device d;
    d.answer = {{request}, options_.pool, a.device, {StrCat(spec.kind, "=", cdi_name)}, a.share_id};
    d.uuid = device.uuid;
    d.admin_access = a.admin_access;
    if (!a.share_id.empty()) d.shares = a.shares;
    entry->devices.push_back(std::move(d));
  }
  if (absl::Status s = cdi::ValidateSpec(spec); !s.ok()) {
    return StrCat(NamedClaim(c), ": its CDI spec is not valid: ", s.message());
  }
  // Not flushed: the checkpoint, flushed once for the batch, is the
  // record (see Prepare).
  if (absl::Status s =
          WriteFileAtomically(SpecPath(c.uid), cdi::RenderJson(spec), Durability::kRenamedOnly);
      !s.ok()) {
    return StrCat(NamedClaim(c), ": cannot write its CDI spec: ", s.message());
  }
  return "";
}

std::map<std::string, std::string> ClaimPreparer::Unprepare(const std::vector<ClaimRef>& claims) {
  FileLockHolder hold(lock_.get());
  CatchUpLocked(hold);
  std::map<std::string, std::string> out;
  std::map<std::string, Entry> removed;  // by UID, until the checkpoint says so too
  for (const ClaimRef& c : claims) {
    std::string& error = out[c.uid];
    // Nothing can have been prepared under a UID that is not one (and it
    // names the file removed).
    if (!ValidateClaimUid(c.uid).ok()) continue;
    const std::string path = SpecPath(c.uid);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      error =
          StrCat(NamedClaim(c), ": cannot remove its CDI spec ", path, ": ", std::strerror(errno));
      continue;
    }
    std::lock_guard<std::mutex> lock(mu_);
    auto it = prepared_.find(c.uid);
    if (it == prepared_.end()) continue;
    removed.emplace(c.uid, std::move(it->second));
    prepared_.erase(it);
  }
  if (removed.empty()) return out;
  if (absl::Status s = Save(); !s.ok()) {
    // Kept as prepared, so the kubelet's retry writes the checkpoint again
    // (otherwise the checkpoint on disk would keep them for good, and a
    // restart bring them back); their specs are gone, which a prepare
    // writes again.
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [uid, e] : removed) {
      out[uid] = StrCat("unprepared, but ", s.message());
      prepared_.emplace(uid, std::move(e));
    }
    return out;
  }
  std::vector<std::string> time_sliced;  // GPUs whose claims set their time slice
  for (const auto& [uid, e] : removed) {
    time_sliced.insert(time_sliced.end(), e.time_sliced.begin(), e.time_sliced.end());
  }
  ResetTimeSlices(time_sliced);
  return out;
}

}  // namespace gpu_agent::dra
