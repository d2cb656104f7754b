#include "dra/claim_preparer.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>

#include "base/file_util.h"
#include "base/json.h"
#include "base/log.h"
#include "base/resource_name.h"
#include "base/strings.h"
#include "base/text.h"

namespace gpu_agent::dra {
namespace {

// The time slice a GPU has until someone sets another.
constexpr char kDefaultTimeSlice[] = "Default";

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

using json::Member;
using json::Strings;
std::string Str(const rapidjson::Value& v, const char* key) { return json::String(v, key); }

// The kubelet's names, printable whatever it sent (they reach logs and
// errors before they are checked).
std::string Named(const ClaimRef& c) {
  return StrCat("claim ", Printable(c.name_space, 63), "/", Printable(c.name, 253));
}

// A claim's CDI spec is a few KiB; a file past this in the spec folder is
// not one of ours.
constexpr size_t kMaxSpecBytes = 1u << 20;

void WriteStrings(Writer& w, const std::vector<std::string>& v) {
  w.StartArray();
  for (const std::string& s : v) w.String(s.c_str(), static_cast<unsigned>(s.size()));
  w.EndArray();
}

// Opaque parameters for this driver: kind GpuConfig of <driver>/v1alpha1,
// with at most sharing.strategy TimeSlicing and an interval the driver
// knows. The interval asked ("Default" when timeSlicing names none), or ""
// when the config asks no sharing.
absl::StatusOr<std::string> ParseGpuConfig(const rapidjson::Value* params,
                                           const std::string& driver) {
  const std::string version = StrCat(driver, "/v1alpha1");
  if (params == nullptr || !params->IsObject()) {
    return absl::InvalidArgumentError(StrCat("the opaque config for ", driver,
                                             " is not an object (want kind GpuConfig, ",
                                             "apiVersion ", version, ")"));
  }
  const std::string kind = Str(*params, "kind");
  if (kind != "GpuConfig") {
    return absl::InvalidArgumentError(StrCat("opaque config kind \"", kind, "\" is not one ",
                                             driver, " knows (it knows GpuConfig)"));
  }
  if (Str(*params, "apiVersion") != version) {
    return absl::InvalidArgumentError(
        StrCat("GpuConfig apiVersion \"", Str(*params, "apiVersion"), "\" is not ", version));
  }
  for (const auto& m : params->GetObject()) {
    const std::string key = m.name.GetString();
    if (key != "apiVersion" && key != "kind" && key != "sharing") {
      return absl::InvalidArgumentError(
          StrCat("GpuConfig has the unknown field \"", key, "\" (it has sharing)"));
    }
  }
  const rapidjson::Value* sharing = Member(*params, "sharing");
  if (sharing == nullptr) return std::string();
  const std::string strategy = Str(*sharing, "strategy");
  if (strategy != "TimeSlicing") {
    return absl::InvalidArgumentError(StrCat("GpuConfig sharing.strategy \"", strategy,
                                             "\" is not one this driver knows (TimeSlicing)"));
  }
  const rapidjson::Value* ts = Member(*sharing, "timeSlicing");
  const std::string interval = ts ? Str(*ts, "interval") : kDefaultTimeSlice;
  if (TimeSliceLevel(interval) >= 0) return interval;
  return absl::InvalidArgumentError(StrCat("GpuConfig sharing.timeSlicing.interval \"", interval,
                                           "\" is not one of Default, Short, Medium, Long"));
}

}  // namespace

absl::StatusOr<std::vector<AllocatedDevice>> ParseAllocation(const std::string& claim_json,
                                                             const ClaimRef& claim,
                                                             const std::string& driver,
                                                             const std::string& pool) {
  rapidjson::Document d;
  if (absl::Status s = json::Parse(claim_json, "the API server's answer", &d); !s.ok()) {
    return absl::InvalidArgumentError(StrCat(Named(claim), ": ", s.message()));
  }
  if (!d.IsObject()) {
    return absl::InvalidArgumentError(
        StrCat(Named(claim), ": the API server's answer is not a ResourceClaim"));
  }
  const rapidjson::Value* meta = Member(d, "metadata");
  const std::string uid = meta ? Str(*meta, "uid") : "";
  if (uid != claim.uid) {
    return absl::FailedPreconditionError(StrCat(
        Named(claim), ": UID mismatch: the kubelet asked for ", claim.uid, ", the API server has ",
        uid.empty() ? "none" : uid, " (deleted and created again since its allocation?)"));
  }
  const rapidjson::Value* status = Member(d, "status");
  const rapidjson::Value* allocation = status ? Member(*status, "allocation") : nullptr;
  const rapidjson::Value* devices = allocation ? Member(*allocation, "devices") : nullptr;
  const rapidjson::Value* results = devices ? Member(*devices, "results") : nullptr;
  if (allocation == nullptr || !allocation->IsObject()) {
    return absl::FailedPreconditionError(
        StrCat(Named(claim), " has no allocation (status.allocation is empty)"));
  }
  std::vector<AllocatedDevice> out;
  std::vector<std::string> others;
  if (results != nullptr && results->IsArray()) {
    for (const auto& r : results->GetArray()) {
      const std::string r_driver = Str(r, "driver"), r_pool = Str(r, "pool");
      if (r_driver == driver && r_pool == pool) {
        out.push_back({Str(r, "request"), Str(r, "device"), ""});
      } else {
        others.push_back(StrCat(r_driver, "/", r_pool, "/", Str(r, "device")));
      }
    }
  }
  if (out.empty()) {
    return absl::FailedPreconditionError(
        StrCat(Named(claim), " has no device of driver ", driver, " in pool ", pool, " allocated",
               others.empty() ? "" : StrCat(" (it has ", StrJoin(others, ", "), ")")));
  }
  for (const AllocatedDevice& a : out) {
    if (a.device.empty()) {
      return absl::InvalidArgumentError(
          StrCat(Named(claim), ": a result of request \"", a.request, "\" names no device"));
    }
  }
  // Opaque parameters for this driver (from the claim or its class): only
  // our own GpuConfig kind, and only values it knows. Each applies to the
  // requests it names (none: all of them); the class's come first, so a
  // claim's own config overrides its class's, and a later one an earlier.
  const rapidjson::Value* configs = devices ? Member(*devices, "config") : nullptr;
  if (configs != nullptr && configs->IsArray()) {
    for (const bool class_pass : {true, false}) {
      for (const auto& c : configs->GetArray()) {
        const rapidjson::Value* opaque = Member(c, "opaque");
        if (opaque == nullptr || Str(*opaque, "driver") != driver) continue;
        if ((Str(c, "source") == "FromClass") != class_pass) continue;
        absl::StatusOr<std::string> interval =
            ParseGpuConfig(Member(*opaque, "parameters"), driver);
        if (!interval.ok()) {
          return absl::InvalidArgumentError(
              StrCat(Named(claim), ": ", interval.status().message()));
        }
        if (interval->empty()) continue;
        const std::vector<std::string> requests = Strings(Member(c, "requests"));
        for (AllocatedDevice& a : out) {
          const bool named = requests.empty() || std::find(requests.begin(), requests.end(),
                                                           a.request) != requests.end();
          if (named) a.time_slice = *interval;
        }
      }
    }
  }
  return out;
}

absl::Status ValidateClaimUid(std::string_view uid) {
  if (uid.empty()) return absl::InvalidArgumentError("no UID");
  if (uid.size() > kMaxClaimUid) {
    return absl::InvalidArgumentError(
        StrCat("UID of ", uid.size(), " characters, over ", kMaxClaimUid));
  }
  for (const char c : uid) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') {
      return absl::InvalidArgumentError(StrCat("UID \"", Printable(uid, kMaxClaimUid),
                                               "\" has a character other than a letter, a "
                                               "digit or '-'"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateClaimRef(const ClaimRef& c) {
  absl::Status s = ValidateClaimUid(c.uid);
  if (s.ok()) s = ValidateDnsSubdomain("its namespace", c.name_space);
  if (s.ok() && (c.name_space.size() > 63 || c.name_space.find('.') != std::string::npos)) {
    s = absl::InvalidArgumentError(
        "its namespace is not a DNS label (at most 63 characters, no '.')");
  }
  if (s.ok()) s = ValidateDnsSubdomain("its name", c.name);
  if (s.ok()) return s;
  return absl::InvalidArgumentError(StrCat(Named(c), " cannot be a ResourceClaim: ", s.message()));
}

int TimeSliceLevel(std::string_view interval) {
  constexpr std::string_view kIntervals[] = {kDefaultTimeSlice, "Short", "Medium", "Long"};
  for (int level = 0; level < 4; ++level) {
    if (interval == kIntervals[level]) return level;
  }
  return -1;
}

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
  p->Load();
  return p;
}

void ClaimPreparer::SetCatalog(std::shared_ptr<const DeviceCatalog> catalog) {
  std::lock_guard<std::mutex> lock(mu_);
  catalog_ = std::move(catalog);
}

void ClaimPreparer::SetUnhealthy(std::set<std::string> devices) {
  std::lock_guard<std::mutex> lock(mu_);
  unhealthy_ = std::move(devices);
}

std::string ClaimPreparer::SpecPath(const std::string& uid) const {
  return StrCat(options_.cdi_dir, "/", options_.cdi_vendor, "-claim_", uid, ".json");
}

std::map<std::string, PrepareOutcome> ClaimPreparer::Prepared() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, PrepareOutcome> out;
  for (const auto& [uid, e] : prepared_) out[uid].devices = e.devices;
  return out;
}

std::map<std::string, PrepareOutcome> ClaimPreparer::Prepare(const std::vector<ClaimRef>& claims) {
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
      o.devices = it->second.devices;
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
    o.devices = entries[i].devices;
    std::lock_guard<std::mutex> lock(mu_);
    prepared_[c.uid] = std::move(entries[i]);
    added.push_back(c.uid);
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

std::string ClaimPreparer::PrepareOne(const ClaimRef& c, Entry* entry) {
  absl::StatusOr<ClaimReader::Answer> answer = reader_->GetClaim(c.name_space, c.name);
  if (!answer.ok()) {
    return StrCat(Named(c), ": cannot read it from the API server: ", answer.status().message());
  }
  if (answer->status == 404) {
    return StrCat(Named(c), " (", c.uid, ") is gone from the API server (deleted after its ",
                  "allocation?)");
  }
  if (answer->status != 200) {
    return StrCat(Named(c), ": the API server answered ", answer->status, ": ",
                  json::MessageOf(answer->body));
  }
  absl::StatusOr<std::vector<AllocatedDevice>> allocated =
      ParseAllocation(answer->body, c, options_.driver, options_.pool);
  if (!allocated.ok()) return std::string(allocated.status().message());
  std::shared_ptr<const DeviceCatalog> catalog;
  std::set<std::string> unhealthy;
  {
    std::lock_guard<std::mutex> lock(mu_);
    catalog = catalog_;
    unhealthy = unhealthy_;
  }
  if (!catalog) return StrCat(Named(c), ": the node's devices are not known yet");
  cdi::Spec spec;
  spec.kind = CdiKind();
  spec.edits = catalog->node_spec.edits;
  entry->name_space = c.name_space;
  entry->name = c.name;
  for (const AllocatedDevice& a : *allocated) {
    const DraDevice* found = nullptr;
    for (const DraDevice& d : catalog->devices) {
      if (d.name == a.device) found = &d;
    }
    if (found == nullptr) {
      return StrCat(Named(c), ": device \"", a.device, "\" is not one of this node's (pool ",
                    options_.pool, ")");
    }
    if (unhealthy.count(a.device) > 0) {
      return StrCat(Named(c), ": device \"", a.device, "\" is unhealthy");
    }
    if (std::string why = SetTimeSlice(*found, a.time_slice); !why.empty()) {
      return StrCat(Named(c), ": ", why);
    }
    if (!a.time_slice.empty() && a.time_slice != kDefaultTimeSlice &&
        std::find(entry->time_sliced.begin(), entry->time_sliced.end(), found->uuid) ==
            entry->time_sliced.end()) {
      entry->time_sliced.push_back(found->uuid);
    }
    // A device two requests share is prepared once, naming both.
    bool merged = false;
    for (PreparedDevice& p : entry->devices) {
      if (p.device == a.device) {
        p.request_names.push_back(a.request);
        merged = true;
      }
    }
    if (merged) continue;
    const cdi::Device* edits = nullptr;
    for (const cdi::Device& d : catalog->node_spec.devices) {
      if (d.name == found->uuid) edits = &d;
    }
    if (edits == nullptr) {
      return StrCat(Named(c), ": device \"", a.device, "\" (", found->uuid,
                    ") has no entry in the node's CDI spec");
    }
    const std::string cdi_name = StrCat(c.uid, "-", a.device);
    spec.devices.push_back({cdi_name, edits->edits});
    entry->devices.push_back(
        {{a.request}, options_.pool, a.device, {StrCat(spec.kind, "=", cdi_name)}});
  }
  if (absl::Status s = cdi::ValidateSpec(spec); !s.ok()) {
    return StrCat(Named(c), ": its CDI spec is not valid: ", s.message());
  }
  // Not flushed: the checkpoint, flushed once for the batch, is the
  // record (see Prepare).
  if (absl::Status s =
          WriteFileAtomically(SpecPath(c.uid), cdi::RenderJson(spec), Durability::kRenamedOnly);
      !s.ok()) {
    return StrCat(Named(c), ": cannot write its CDI spec: ", s.message());
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
  std::map<std::string, std::string> out;
  std::map<std::string, Entry> removed;  // by UID, until the checkpoint says so too
  for (const ClaimRef& c : claims) {
    std::string& error = out[c.uid];
    // Nothing can have been prepared under a UID that is not one (and it
    // names the file removed).
    if (!ValidateClaimUid(c.uid).ok()) continue;
    const std::string path = SpecPath(c.uid);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      error = StrCat(Named(c), ": cannot remove its CDI spec ", path, ": ", std::strerror(errno));
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
  rapidjson::StringBuffer buf;
  Writer w(buf);
  w.StartObject();
  w.Key("version");
  w.Int(1);
  w.Key("claims");
  w.StartObject();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [uid, e] : prepared_) {
      w.Key(uid.c_str(), static_cast<unsigned>(uid.size()));
      w.StartObject();
      w.Key("namespace");
      w.String(e.name_space.c_str(), static_cast<unsigned>(e.name_space.size()));
      w.Key("name");
      w.String(e.name.c_str(), static_cast<unsigned>(e.name.size()));
      if (e.from_spec) {
        w.Key("fromSpec");
        w.Bool(true);
      }
      if (!e.time_sliced.empty()) {
        w.Key("timeSliced");
        WriteStrings(w, e.time_sliced);
      }
      w.Key("devices");
      w.StartArray();
      for (const PreparedDevice& d : e.devices) {
        w.StartObject();
        w.Key("requests");
        WriteStrings(w, d.request_names);
        w.Key("pool");
        w.String(d.pool.c_str(), static_cast<unsigned>(d.pool.size()));
        w.Key("device");
        w.String(d.device.c_str(), static_cast<unsigned>(d.device.size()));
        w.Key("cdiIds");
        WriteStrings(w, d.cdi_ids);
        w.EndObject();
      }
      w.EndArray();
      w.EndObject();
    }
  }
  w.EndObject();
  w.EndObject();
  if (absl::Status s = checkpoint_writer_.Write(std::string_view(buf.GetString(), buf.GetSize()));
      !s.ok()) {
    return absl::Status(s.code(), StrCat("the DRA checkpoint cannot be written: ", s.message()));
  }
  return absl::OkStatus();
}

void ClaimPreparer::Load() {
  // In slots (base/slotted_file), or the plain JSON of an older version,
  // which the next save writes in slots.
  const SlottedRead read = ReadSlotted(options_.checkpoint);
  const bool found = read.found;
  rapidjson::Document d;
  const absl::Status parsed =
      found && read.problem.empty() ? json::Parse(read.record, "its record", &d) : absl::OkStatus();
  std::string problem;
  const rapidjson::Value* claims = nullptr;
  if (!found) {
    // None yet: nothing prepared, but for the specs a crash left.
  } else if (!read.problem.empty()) {
    problem = read.problem;
  } else if (!parsed.ok()) {
    problem = std::string(parsed.message());
  } else if (!d.IsObject()) {
    problem = "not a JSON object";
  } else if (const rapidjson::Value* v = Member(d, "version");
             !v || !v->IsInt() || v->GetInt() != 1) {
    problem = "no version 1";
  } else if (claims = Member(d, "claims"); !claims || !claims->IsObject()) {
    problem = "no claims object";
  }
  if (found && problem.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& m : claims->GetObject()) {
      if (absl::Status bad = ValidateClaimUid(m.name.GetString()); !bad.ok()) {
        problem = std::string(bad.message());
        break;
      }
      Entry e;
      e.name_space = Str(m.value, "namespace");
      e.name = Str(m.value, "name");
      const rapidjson::Value* from_spec = Member(m.value, "fromSpec");
      e.from_spec = from_spec != nullptr && from_spec->IsBool() && from_spec->GetBool();
      e.time_sliced = Strings(Member(m.value, "timeSliced"));
      const rapidjson::Value* devices = Member(m.value, "devices");
      if (devices == nullptr || !devices->IsArray()) {
        problem = StrCat("claim ", m.name.GetString(), " has no devices list");
        break;
      }
      for (const auto& dv : devices->GetArray()) {
        e.devices.push_back({Strings(Member(dv, "requests")), Str(dv, "pool"), Str(dv, "device"),
                             Strings(Member(dv, "cdiIds"))});
      }
      prepared_[m.name.GetString()] = std::move(e);
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
    // Read as the agent wrote it: a regular file of bounded size, never
    // through a link, parsed iteratively (base/json). Anything else there
    // under the agent's names is of no use to a runtime either.
    absl::StatusOr<std::string> text =
        ReadFileBounded(f.path().string(), kMaxSpecBytes, Links::kRefuse);
    rapidjson::Document d;
    absl::Status problem = ValidateClaimUid(uid);
    if (problem.ok()) problem = text.status();
    if (problem.ok()) problem = json::Parse(*text, "its JSON", &d);
    const rapidjson::Value* devices = problem.ok() ? Member(d, "devices") : nullptr;
    if (problem.ok() && (devices == nullptr || !devices->IsArray())) {
      problem = absl::InvalidArgumentError("it lists no devices");
    }
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
      e.devices.push_back(
          {{}, options_.pool, name.substr(uid.size() + 1), {StrCat(kind, "=", name)}});
    }
    out[uid] = std::move(e);
  }
  return out;
}

}  // namespace gpu_agent::dra
