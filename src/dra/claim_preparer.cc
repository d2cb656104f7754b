#include "dra/claim_preparer.h"

#include <rapidjson/document.h>
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
namespace {

using json::Member;
std::string Str(const rapidjson::Value& v, const char* key) { return json::String(v, key); }

// A claim's CDI spec is a few KiB; a file past this in the spec folder is
// not one of ours.
constexpr size_t kMaxSpecBytes = 1u << 20;

// A claim's spec read as the agent wrote it: a regular file of bounded size,
// never through a link, parsed iteratively (base/json), with a devices list.
absl::Status ReadClaimSpec(const std::string& path, rapidjson::Document* doc,
                           const rapidjson::Value** devices) {
  absl::StatusOr<std::string> text = ReadFileBounded(path, kMaxSpecBytes, Links::kRefuse);
  if (!text.ok()) return text.status();
  if (absl::Status s = json::Parse(*text, "its JSON", doc); !s.ok()) return s;
  *devices = Member(*doc, "devices");
  if (*devices == nullptr || !(*devices)->IsArray()) {
    return absl::InvalidArgumentError("it lists no devices");
  }
  return absl::OkStatus();
}

}  // namespace

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

void ClaimPreparer::ResolveLegacyDevicesLocked() {
  if (!catalog_) return;
  // Each device of the node by the device nodes the node's spec gives it
  // (a MIG device's capability nodes tell it from its GPU's); made at the
  // first claim that needs it.
  std::map<std::set<std::string>, std::vector<std::string>> uuids_by_nodes;
  auto uuids_of = [&](const std::set<std::string>& nodes) -> const std::vector<std::string>& {
    if (uuids_by_nodes.empty()) {
      for (const DraDevice& now : catalog_->devices) {
        for (const cdi::Device& spec : catalog_->node_spec.devices) {
          if (spec.name != now.uuid) continue;
          std::set<std::string> paths;
          for (const cdi::DeviceNode& n : spec.edits.device_nodes) paths.insert(n.path);
          uuids_by_nodes[paths].push_back(now.uuid);
        }
      }
    }
    static const std::vector<std::string> kNone;
    auto it = uuids_by_nodes.find(nodes);
    return it == uuids_by_nodes.end() ? kNone : it->second;
  };
  for (auto& [uid, e] : prepared_) {
    if (std::none_of(e.devices.begin(), e.devices.end(),
                     [](const PreparedClaim::Device& d) { return d.uuid.empty(); })) {
      continue;
    }
    rapidjson::Document doc;
    const rapidjson::Value* devices = nullptr;
    if (!ReadClaimSpec(SpecPath(uid), &doc, &devices).ok()) continue;
    for (PreparedClaim::Device& d : e.devices) {
      if (!d.uuid.empty()) continue;
      std::set<std::string> nodes;
      for (const auto& dv : devices->GetArray()) {
        if (Str(dv, "name") != StrCat(uid, "-", d.answer.device)) continue;
        const rapidjson::Value* edits = Member(dv, "containerEdits");
        const rapidjson::Value* list = edits ? Member(*edits, "deviceNodes") : nullptr;
        if (list == nullptr || !list->IsArray()) continue;
        for (const auto& n : list->GetArray()) nodes.insert(Str(n, "path"));
      }
      if (nodes.empty()) continue;
      const std::vector<std::string>& uuids = uuids_of(nodes);
      if (uuids.size() != 1) continue;  // none, or no telling which
      d.uuid = uuids.front();
      LogInfo(
          "a claim an earlier version prepared is matched to its device by the device nodes "
          "of its CDI spec",
          {{"claim", StrCat(e.name_space, "/", e.name, " (", uid, ")")},
           {"device", d.answer.device},
           {"uuid", d.uuid}});
    }
  }
}

void ClaimPreparer::SetTaints(std::map<std::string, DeviceTaint> taints) {
  std::lock_guard<std::mutex> lock(mu_);
  taints_ = std::move(taints);
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

std::vector<PreparedDevice> ClaimPreparer::AnswerOf(const Entry& e) {
  std::vector<PreparedDevice> out;
  out.reserve(e.devices.size());
  for (const PreparedClaim::Device& d : e.devices) out.push_back(d.answer);
  return out;
}

void ClaimPreparer::CatchUpLocked(const FileLockHolder& hold) {
  if (!hold.status().ok()) {
    // Cannot happen on a lock file the agent opened; said, and the batch
    // goes on as a lone instance's would.
    LogWarning("the DRA checkpoint's lock cannot be taken; going on without it",
               {{"error", std::string(hold.status().message())}});
    return;
  }
  const SlottedStamp now = StampSlotted(options_.checkpoint);
  // Unchanged since this process read or wrote it; or gone (its folder
  // removed), which the next save writes again from what is here.
  if (now == stamp_ || now.inode == 0) return;
  const SlottedRead read = ReadSlotted(options_.checkpoint);
  absl::StatusOr<PreparedClaims> claims =
      read.problem.empty() ? ParseCheckpoint(read.record) : absl::DataLossError(read.problem);
  if (!claims.ok()) {
    LogWarning(
        "the DRA checkpoint another instance wrote cannot be read; keeping this one's",
        {{"checkpoint", options_.checkpoint}, {"error", std::string(claims.status().message())}});
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  prepared_ = *std::move(claims);
  stamp_ = now;
  ResolveLegacyDevicesLocked();
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
    std::erase_if(held_, [&](const auto& h) { return out.count(h.second.uid) > 0; });
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
    }
  }
  ResetTimeSlices(undo);
  return out;
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

std::string ClaimPreparer::HolderLocked(const DraDevice& device, const std::string& uid) const {
  auto same = [&](const PreparedClaim::Device& d) {
    return !d.admin_access &&
           (d.uuid.empty() ? d.answer.device == device.name : d.uuid == device.uuid);
  };
  for (const auto& [other, e] : prepared_) {
    if (other == uid) continue;
    for (const PreparedClaim::Device& d : e.devices) {
      if (same(d)) return StrCat("claim ", e.name_space, "/", e.name, " (", other, ")");
    }
  }
  auto it = held_.find(device.uuid);
  if (it != held_.end() && it->second.uid != uid) {
    return StrCat(NamedClaim(it->second), " (", it->second.uid, ")");
  }
  return "";
}

std::string ClaimPreparer::PrepareOne(const ClaimRef& c, Entry* entry) {
  absl::StatusOr<ClaimReader::Answer> answer = reader_->GetClaim(c.name_space, c.name);
  if (!answer.ok()) {
    return StrCat(NamedClaim(c),
                  ": cannot read it from the API server: ", answer.status().message());
  }
  if (answer->status == 404) {
    return StrCat(NamedClaim(c), " (", c.uid, ") is gone from the API server (deleted after its ",
                  "allocation?)");
  }
  if (answer->status != 200) {
    return StrCat(NamedClaim(c), ": the API server answered ", answer->status, ": ",
                  json::MessageOf(answer->body));
  }
  absl::StatusOr<std::vector<AllocatedDevice>> allocated =
      ParseAllocation(answer->body, c, options_.driver, options_.pool);
  if (!allocated.ok()) return std::string(allocated.status().message());
  std::shared_ptr<const DeviceCatalog> catalog;
  std::map<std::string, DeviceTaint> taints;
  {
    std::lock_guard<std::mutex> lock(mu_);
    catalog = catalog_;
    taints = taints_;
  }
  if (!catalog) return StrCat(NamedClaim(c), ": the node's devices are not known yet");
  // Each result's device and its edits, checked before anything is set or
  // written.
  std::vector<const DraDevice*> found(allocated->size(), nullptr);
  std::vector<const cdi::Device*> edits(allocated->size(), nullptr);
  for (size_t i = 0; i < allocated->size(); ++i) {
    const AllocatedDevice& a = (*allocated)[i];
    for (const DraDevice& d : catalog->devices) {
      if (d.name == a.device) found[i] = &d;
    }
    if (found[i] == nullptr) {
      return StrCat(NamedClaim(c), ": device \"", a.device, "\" is not one of this node's (pool ",
                    options_.pool, ")");
    }
    for (const cdi::Device& d : catalog->node_spec.devices) {
      if (d.name == found[i]->uuid) edits[i] = &d;
    }
    if (edits[i] == nullptr) {
      return StrCat(NamedClaim(c), ": device \"", a.device, "\" (", found[i]->uuid,
                    ") has no entry in the node's CDI spec");
    }
    // An unhealthy device is tainted in the slices; the scheduler still
    // allocates it to a claim that tolerates the taint or asks for admin
    // access (a diagnostic pod), and those get it.
    auto taint = taints.find(a.device);
    if (taint != taints.end() && !a.admin_access && KeepsAway(taint->second, a.tolerations)) {
      return StrCat(NamedClaim(c), ": device \"", a.device, "\" is unhealthy (taint ",
                    TaintString(taint->second),
                    ", which the claim does not tolerate; admin access would take it)");
    }
  }
  {
    // The last line of defence the kubelet plugin helper documents: a
    // device is prepared for one claim at a time (the scheduler's
    // allocation already says so); admin access shares it by design.
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < allocated->size(); ++i) {
      if ((*allocated)[i].admin_access) continue;
      if (std::string holder = HolderLocked(*found[i], c.uid); !holder.empty()) {
        return StrCat(NamedClaim(c), ": device \"", found[i]->name, "\" (", found[i]->uuid,
                      ") is already prepared for ", holder,
                      "; a device serves one claim at a time (admin access excepted)");
      }
    }
    for (size_t i = 0; i < allocated->size(); ++i) {
      if (!(*allocated)[i].admin_access) held_.emplace(found[i]->uuid, c);
    }
  }
  cdi::Spec spec;
  spec.kind = CdiKind();
  spec.edits = catalog->node_spec.edits;
  entry->name_space = c.name_space;
  entry->name = c.name;
  for (size_t i = 0; i < allocated->size(); ++i) {
    const AllocatedDevice& a = (*allocated)[i];
    if (std::string why = SetTimeSlice(*found[i], a.time_slice); !why.empty()) {
      return StrCat(NamedClaim(c), ": ", why);
    }
    if (!a.time_slice.empty() && a.time_slice != kDefaultTimeSlice &&
        std::find(entry->time_sliced.begin(), entry->time_sliced.end(), found[i]->uuid) ==
            entry->time_sliced.end()) {
      entry->time_sliced.push_back(found[i]->uuid);
    }
    // The kubelet gives a container the devices whose request names hold
    // the request it names, always a main one: a subrequest's device is
    // answered under its main request. A device two requests share is
    // prepared once, naming both.
    const std::string request = MainRequestName(a.request);
    bool merged = false;
    for (PreparedClaim::Device& p : entry->devices) {
      if (p.answer.device != a.device) continue;
      std::vector<std::string>& names = p.answer.request_names;
      if (std::find(names.begin(), names.end(), request) == names.end()) names.push_back(request);
      p.admin_access = p.admin_access && a.admin_access;
      merged = true;
    }
    if (merged) continue;
    const std::string cdi_name = StrCat(c.uid, "-", a.device);
    spec.devices.push_back({cdi_name, edits[i]->edits});
    PreparedClaim::Device d;
    d.answer = {{request}, options_.pool, a.device, {StrCat(spec.kind, "=", cdi_name)}};
    d.uuid = found[i]->uuid;
    d.admin_access = a.admin_access;
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

std::string ClaimPreparer::SetTimeSlice(const DraDevice& device, const std::string& interval) {
  if (interval.empty()) return "";
  auto type = device.attributes.find("type");
  if (type != device.attributes.end() && type->second.text != "gpu") {
    return StrCat("device \"", device.name, "\" is a ", type->second.text,
                  " device; GpuConfig time-slicing applies to whole GPUs");
  }
  if (!options_.set_time_slice) {
    return StrCat("GpuConfig time-slicing (", interval, ") cannot be set on this node");
  }
  if (absl::Status s = options_.set_time_slice(device.uuid, interval); !s.ok()) {
    return StrCat("cannot set the time slice of device \"", device.name, "\" (", device.uuid,
                  ") to ", interval, ": ", s.message());
  }
  LogInfo("GPU time slice set",
          {{"device", device.name}, {"uuid", device.uuid}, {"interval", interval}});
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

void ClaimPreparer::ResetTimeSlices(const std::vector<std::string>& uuids) {
  for (const std::string& uuid : uuids) {
    {
      // Still set by a claim prepared on the same GPU: left as it is.
      std::lock_guard<std::mutex> lock(mu_);
      bool held = false;
      for (const auto& [uid, e] : prepared_) {
        if (std::find(e.time_sliced.begin(), e.time_sliced.end(), uuid) != e.time_sliced.end()) {
          held = true;
        }
      }
      if (held) continue;
    }
    // A failure does not fail the unprepare: the kubelet would retry it,
    // and hold the pod, for a setting the next claim's GpuConfig sets anew.
    absl::Status s = options_.set_time_slice
                         ? options_.set_time_slice(uuid, kDefaultTimeSlice)
                         : absl::FailedPreconditionError("it cannot be set on this node");
    if (s.ok()) {
      LogInfo("GPU time slice set back to Default: no prepared claim sets it", {{"uuid", uuid}});
    } else {
      LogWarning(
          "cannot set a GPU's time slice back to Default after its claim; it keeps the claim's "
          "until a claim sets another",
          {{"uuid", uuid}, {"error", std::string(s.message())}});
    }
  }
}

absl::Status ClaimPreparer::Save() {
  // Held from the snapshot to the write: two saves cannot land in the
  // opposite order of their snapshots.
  std::lock_guard<std::mutex> save_lock(save_mu_);
  std::string record;
  {
    std::lock_guard<std::mutex> lock(mu_);
    record = RenderCheckpoint(prepared_);
  }
  if (absl::Status s = checkpoint_writer_.Write(record); !s.ok()) {
    return absl::Status(s.code(), StrCat("the DRA checkpoint cannot be written: ", s.message()));
  }
  std::lock_guard<std::mutex> lock(mu_);
  stamp_ = checkpoint_writer_.stamp();
  return absl::OkStatus();
}

void ClaimPreparer::Load() {
  // In slots (base/slotted_file), or the plain JSON of an older version,
  // which the next save writes in slots.
  {
    std::lock_guard<std::mutex> lock(mu_);
    stamp_ = StampSlotted(options_.checkpoint);
  }
  const SlottedRead read = ReadSlotted(options_.checkpoint);
  std::string problem = read.problem;
  if (read.found && problem.empty()) {
    absl::StatusOr<PreparedClaims> claims = ParseCheckpoint(read.record);
    if (claims.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      prepared_ = *std::move(claims);
    } else {
      problem = std::string(claims.status().message());
    }
  }
  bool changed = false;
  if (!problem.empty()) {
    const std::string aside = options_.checkpoint + ".corrupt";
    const bool moved = ::rename(options_.checkpoint.c_str(), aside.c_str()) == 0;
    LogError("the DRA checkpoint is corrupt; moved aside and rebuilt from the claims' CDI specs",
             {{"checkpoint", options_.checkpoint},
              {"problem", problem},
              {"moved_to", moved ? aside : std::string("(could not move it)")}});
    std::lock_guard<std::mutex> lock(mu_);
    prepared_.clear();
    changed = true;
  }
  // The checkpoint and the specs made to agree (see Prepare for the crash
  // windows that leave them apart).
  std::map<std::string, Entry> specs = ReadSpecs();
  std::vector<std::string> taken_in, without_spec;
  size_t claims_count = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [uid, e] : specs) {
      if (prepared_.count(uid) > 0) continue;
      prepared_[uid] = std::move(e);
      taken_in.push_back(uid);
    }
    for (const auto& [uid, e] : prepared_) {
      if (specs.count(uid) == 0) without_spec.push_back(uid);
    }
    claims_count = prepared_.size();
  }
  if (!taken_in.empty() && problem.empty()) {
    LogWarning(
        "claims' CDI specs the DRA checkpoint lacked (a crash before it was written) taken in",
        {{"claims", StrJoin(taken_in, ", ")}});
  }
  if (!without_spec.empty()) {
    LogWarning(
        "claims in the DRA checkpoint have no CDI spec (a crash before it reached the "
        "disk); each is prepared again when the kubelet asks",
        {{"claims", StrJoin(without_spec, ", ")}});
  }
  LogInfo(problem.empty() ? "DRA checkpoint loaded"
                          : "DRA checkpoint rebuilt from the claims' CDI specs",
          {{"checkpoint", options_.checkpoint}, {"claims", StrCat(claims_count)}});
  if (changed || !taken_in.empty()) {
    if (absl::Status s = Save(); !s.ok()) LogError(std::string(s.message()));
  }
}

std::map<std::string, ClaimPreparer::Entry> ClaimPreparer::ReadSpecs() const {
  std::map<std::string, Entry> out;
  const std::string prefix = StrCat(options_.cdi_vendor, "-claim_");
  const std::string kind = CdiKind();
  std::error_code ec;
  for (const auto& f : std::filesystem::directory_iterator(options_.cdi_dir, ec)) {
    const std::string file = f.path().filename().string();
    if (!file.starts_with(prefix) || !file.ends_with(".json")) continue;
    const std::string uid = file.substr(prefix.size(), file.size() - prefix.size() - 5);
    // Anything but what the agent writes there under its names is of no
    // use to a runtime either.
    rapidjson::Document d;
    const rapidjson::Value* devices = nullptr;
    absl::Status problem = ValidateClaimUid(uid);
    if (problem.ok()) problem = ReadClaimSpec(f.path().string(), &d, &devices);
    if (!problem.ok()) {
      // Empty or cut after a crash of the machine: of no use to a runtime,
      // and the claim is prepared again when the kubelet asks. (A link is
      // removed, not what it names.)
      const bool removed = ::unlink(f.path().c_str()) == 0;
      LogWarning("a claim's CDI spec cannot be read; removed",
                 {{"file", f.path().string()},
                  {"error", std::string(problem.message())},
                  {"removed", removed ? "yes" : "no"}});
      continue;
    }
    Entry e;
    e.from_spec = true;
    for (const auto& dv : devices->GetArray()) {
      const std::string name = Str(dv, "name");
      if (!name.starts_with(uid + "-")) continue;
      PreparedClaim::Device device;
      device.answer = {{}, options_.pool, name.substr(uid.size() + 1), {StrCat(kind, "=", name)}};
      e.devices.push_back(std::move(device));
    }
    out[uid] = std::move(e);
  }
  return out;
}

}  // namespace gpu_agent::dra
