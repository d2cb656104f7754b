// The prepared claims' record: the checkpoint loaded, written and read
// again when another instance wrote it, and made to agree with the claims'
// CDI specs on disk.
#include <rapidjson/document.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "base/file_util.h"
#include "base/json.h"
#include "base/log.h"
#include "base/strings.h"
#include "dra/claim_preparer.h"

namespace gpu_agent::dra {
namespace {

using json::Member;

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
    json::Document doc;
    const rapidjson::Value* devices = nullptr;
    if (!ReadClaimSpec(SpecPath(uid), &doc, &devices).ok()) continue;
    for (PreparedClaim::Device& d : e.devices) {
      if (!d.uuid.empty()) continue;
      std::set<std::string> nodes;
      for (const auto& dv : devices->GetArray()) {
        if (json::String(dv, "name") != StrCat(uid, "-", d.answer.device)) continue;
        const rapidjson::Value* edits = Member(dv, "containerEdits");
        const rapidjson::Value* list = edits ? Member(*edits, "deviceNodes") : nullptr;
        if (list == nullptr || !list->IsArray()) continue;
        for (const auto& n : list->GetArray()) nodes.insert(json::String(n, "path"));
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
    json::Document d;
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
      const std::string name = json::String(dv, "name");
      if (!name.starts_with(uid + "-")) continue;
      PreparedClaim::Device device;
      // "<device>" or "<device>_<shareID>" (ClaimCdiName): a share's count
      // is not in the spec, so it holds one until the claim is read again.
      const std::string rest = name.substr(uid.size() + 1);
      const size_t share = rest.find('_');
      device.answer = {{},
                       options_.pool,
                       rest.substr(0, share),
                       {StrCat(kind, "=", name)},
                       share == std::string::npos ? "" : rest.substr(share + 1)};
      if (!device.answer.share_id.empty()) device.shares = 1;
      e.devices.push_back(std::move(device));
    }
    out[uid] = std::move(e);
  }
  return out;
}

}  // namespace gpu_agent::dra
