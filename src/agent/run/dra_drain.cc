#include "agent/run/dra_drain.h"

#include <dirent.h>

#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/config/api_connection.h"
#include "agent/plan/dra_plan.h"
#include "agent/run/held_watch.h"
#include "agent/run/time_slice.h"
#include "base/file_util.h"
#include "base/log.h"
#include "base/strings.h"

namespace gpu_agent {

dra::PreparerOptions PreparerOptionsOf(const Config& config, const std::string& pool) {
  dra::PreparerOptions po;
  po.driver = config.dra.driver_name;
  po.pool = pool;
  po.cdi_dir = config.cdi.spec_dir;
  po.cdi_vendor = config.cdi.vendor;
  po.checkpoint = StrCat(config.dra.plugin_dir, "/", config.dra.driver_name, "/checkpoint.json");
  po.lock_file = StrCat(config.dra.plugin_dir, "/", config.dra.driver_name, "/serialize.lock");
  po.set_time_slice = NvidiaSmiTimeSlicer(config.flags.DriverRootHere());
  return po;
}

dra::DraServerOptions ServerOptionsOf(const Config& c) {
  dra::DraServerOptions o;
  o.driver_name = c.dra.driver_name;
  o.registry_dir = c.dra.registry_dir;
  o.plugin_dir = c.dra.plugin_dir;
  o.instance = c.dra.pod_uid;
  return o;
}

std::shared_ptr<const dra::DeviceCatalog> CatalogOf(const Generation& gen) {
  auto c = std::make_shared<dra::DeviceCatalog>();
  c->devices = DraDevicesOf(gen.model, gen.inventory);
  if (gen.cdi) c->node_spec = gen.cdi->spec;
  return c;
}

namespace {

constexpr char kMoved[] =
    "this node has moved from DRA to the device plugin: no new claim is prepared on it";

// The drain prepares no claim it has not prepared before, so it reads none.
class NoClaimReads : public dra::ClaimReader {
 public:
  absl::StatusOr<Answer> GetClaim(const std::string& /*name_space*/,
                                  const std::string& /*name*/) override {
    return absl::FailedPreconditionError(kMoved);
  }
};

}  // namespace

class DraDrain::Handler : public dra::ClaimHandler {
 public:
  Handler(DraDrain* drain, std::shared_ptr<dra::ClaimPreparer> preparer)
      : drain_(drain), preparer_(std::move(preparer)) {}

  std::map<std::string, dra::PrepareOutcome> Prepare(
      const std::vector<dra::ClaimRef>& claims) override {
    const std::map<std::string, dra::PrepareOutcome> prepared = preparer_->Prepared();
    std::vector<dra::ClaimRef> known;
    std::map<std::string, dra::PrepareOutcome> out;
    for (const dra::ClaimRef& c : claims) {
      if (prepared.count(c.uid) > 0) {
        known.push_back(c);
        continue;
      }
      out[c.uid].error = StrCat("claim ", c.name_space, "/", c.name, ": ", kMoved);
      LogWarning("claim not prepared",
                 {{"claim", StrCat(c.name_space, "/", c.name)}, {"uid", c.uid}, {"error", kMoved}});
    }
    if (!known.empty()) out.merge(preparer_->Prepare(known));
    return out;
  }

  std::map<std::string, std::string> Unprepare(const std::vector<dra::ClaimRef>& claims) override {
    std::map<std::string, std::string> out = preparer_->Unprepare(claims);
    drain_->Unprepared();
    return out;
  }

 private:
  DraDrain* const drain_;
  const std::shared_ptr<dra::ClaimPreparer> preparer_;
};

namespace {

// Whether the CDI folder holds a claim's spec ("<vendor>-claim_<uid>.json"):
// a crash between a prepare's spec and its checkpoint leaves one without
// the other.
bool AnyClaimSpec(const std::string& cdi_dir, const std::string& vendor) {
  DIR* d = ::opendir(cdi_dir.c_str());
  if (d == nullptr) return false;
  const std::string prefix = StrCat(vendor, "-claim_");
  bool found = false;
  while (const dirent* e = ::readdir(d)) {
    if (std::string_view(e->d_name).substr(0, prefix.size()) == prefix) {
      found = true;
      break;
    }
  }
  ::closedir(d);
  return found;
}

// Every GPU of `gen`, held for `why`.
std::map<std::string, std::string> AllHeld(const Generation& gen, const std::string& why) {
  std::map<std::string, std::string> out;
  for (const std::string& uuid : gen.model.gpu_uuids) out.emplace(uuid, why);
  return out;
}

}  // namespace

std::unique_ptr<DraDrain> DraDrain::StartIfNeeded(const Generation& gen, Report report) {
  const Config& config = gen.config();
  const dra::PreparerOptions po = PreparerOptionsOf(config, DraPoolName(config));
  if (!PathExists(po.checkpoint) && !AnyClaimSpec(po.cdi_dir, po.cdi_vendor)) return nullptr;
  std::unique_ptr<DraDrain> d(new DraDrain(gen.inventory, gen.model.gpu_uuids, std::move(report)));
  absl::StatusOr<std::unique_ptr<dra::ClaimPreparer>> preparer =
      dra::ClaimPreparer::Create(po, std::make_shared<NoClaimReads>());
  if (!preparer.ok()) {
    // Claims may hold any GPU: none is the device plugin's until a restart
    // reads them.
    const std::string why =
        StrCat("unknown: DRA's claims cannot be read (", preparer.status().message(), ")");
    LogError(
        "cannot read DRA's prepared claims; every GPU is streamed unhealthy until they can be read "
        "(restart the agent once the error is mended)",
        {{"file", po.checkpoint}, {"error", std::string(preparer.status().message())}});
    d->holders_ = AllHeld(gen, why);
    d->report_(d->holders_);
    return d;
  }
  d->preparer_ = std::shared_ptr<dra::ClaimPreparer>(*std::move(preparer));
  d->preparer_->SetCatalog(CatalogOf(gen));
  if (d->preparer_->PreparedEntries().empty()) return nullptr;
  {
    std::lock_guard<std::mutex> lock(d->mu_);
    d->UpdateLocked();
  }
  d->ReportHolders();
  LogInfo(
      "DRA claims are still prepared on this node: their GPUs are streamed unhealthy to the "
      "kubelet's device manager, and the DRA plugin stays registered to unprepare them",
      {{"claims", StrCat(d->claims_)}, {"gpus", StrCat(d->holders_.size())}});
  d->WithdrawSlices(config);
  absl::StatusOr<std::unique_ptr<dra::DraServer>> server = dra::DraServer::Start(
      ServerOptionsOf(config), std::make_shared<Handler>(d.get(), d->preparer_));
  if (!server.ok()) {
    LogError(
        "cannot serve the DRA plugin for the claims still prepared; their GPUs stay out of the "
        "device plugin until a restart serves it",
        {{"error", std::string(server.status().message())}});
    return d;
  }
  d->server_ = *std::move(server);
  d->thread_ = std::thread([p = d.get()] { p->Run(); });
  return d;
}

DraDrain::DraDrain(nvml::Inventory inventory, std::vector<std::string> gpus, Report report)
    : inventory_(std::move(inventory)), gpus_(std::move(gpus)), report_(std::move(report)) {}

DraDrain::~DraDrain() { Stop(); }

void DraDrain::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  StopPublisher();
  if (thread_.joinable()) thread_.join();
}

std::map<std::string, std::string> DraDrain::holders() const {
  std::lock_guard<std::mutex> lock(mu_);
  return holders_;
}

void DraDrain::WithdrawSlices(const Config& config) {
  absl::StatusOr<apiserver::Connection> conn = ConnectionFor(config);
  dra::SlicePublisherOptions o;
  o.driver = config.dra.driver_name;
  o.node = DraPoolName(config);
  o.watch_timeout = config.static_mode.watch_timeout;
  absl::StatusOr<std::unique_ptr<dra::SlicePublisher>> publisher =
      conn.ok() ? dra::SlicePublisher::Start(
                      *conn, RestOptionsFor(config), o,
                      [](const dra::SliceContext&) { return std::vector<std::string>(); })
                : absl::StatusOr<std::unique_ptr<dra::SlicePublisher>>(conn.status());
  if (!publisher.ok()) {
    LogWarning(
        "cannot keep this node's ResourceSlices deleted while DRA's claims are unprepared; the "
        "scheduler may allocate from slices left behind, and such claims are refused",
        {{"error", std::string(publisher.status().message())}});
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  publisher_ = *std::move(publisher);
}

void DraDrain::StopPublisher() {
  std::unique_ptr<dra::SlicePublisher> publisher;
  {
    std::lock_guard<std::mutex> lock(mu_);
    publisher = std::move(publisher_);
  }
  if (publisher) publisher->Stop();
}

std::string DraDrain::GpuOf(const dra::PreparedClaim::Device& d) const {
  for (const nvml::GpuRecord& g : inventory_.gpus) {
    if (g.uuid.empty()) continue;
    if (!d.uuid.empty()) {
      if (d.uuid == g.uuid) return g.uuid;
      for (const nvml::MigRecord& m : g.mig_devices) {
        if (m.uuid == d.uuid) return g.uuid;
      }
    }
    // By the DRA name (a GPU's, or one of its MIG devices': the GPU's name
    // and "-mig-..."), whatever the running config cuts it into.
    const std::string name = dra::GpuDeviceName(g);
    const std::string& device = d.answer.device;
    if (device == name ||
        (device.size() > name.size() && device.compare(0, name.size(), name) == 0 &&
         device[name.size()] == '-')) {
      return g.uuid;
    }
  }
  return "";
}

void DraDrain::UpdateLocked() {
  std::map<std::string, std::set<std::string>> claims;
  bool unknown = false;
  const dra::PreparedClaims entries = preparer_->PreparedEntries();
  for (const auto& [uid, claim] : entries) {
    for (const dra::PreparedClaim::Device& pd : claim.devices) {
      const std::string gpu = GpuOf(pd);
      if (gpu.empty()) {
        unknown = true;
        continue;
      }
      claims[gpu].insert(StrCat(claim.name_space, "/", claim.name));
    }
  }
  claims_ = entries.size();
  holders_ = HoldersOf(claims, "DRA claim", "DRA claims");
  // A device the node's GPUs do not name (a GPU gone since): which GPU it
  // is cannot be told, so none is the device plugin's.
  if (unknown) {
    for (const std::string& uuid : gpus_) {
      holders_.emplace(uuid, "unknown: a DRA claim's device is none of this node's GPUs");
    }
  }
}

void DraDrain::ReportHolders() {
  std::lock_guard<std::mutex> reporting(report_mu_);
  report_(holders());  // the latest, whatever order the unprepares came in
}

void DraDrain::Unprepared() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    const std::map<std::string, std::string> before = holders_;
    UpdateLocked();
    if (claims_ == 0) cv_.notify_all();
    if (holders_ == before) return;
  }
  ReportHolders();
}

void DraDrain::Run() {
  bool drained;
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return stop_ || claims_ == 0; });
    drained = claims_ == 0;
  }
  server_->Stop();
  if (drained) {
    StopPublisher();
    LogInfo(
        "every DRA claim on this node is unprepared: the DRA plugin is unregistered and each GPU "
        "is the device plugin's");
  }
}

}  // namespace gpu_agent
