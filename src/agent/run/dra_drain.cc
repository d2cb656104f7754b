#include "agent/run/dra_drain.h"

#include <set>
#include <utility>
#include <vector>

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

std::unique_ptr<DraDrain> DraDrain::StartIfNeeded(const Generation& gen, Report report) {
  const Config& config = gen.config();
  const dra::PreparerOptions po = PreparerOptionsOf(config, DraPoolName(config));
  if (!PathExists(po.checkpoint)) return nullptr;
  absl::StatusOr<std::unique_ptr<dra::ClaimPreparer>> preparer =
      dra::ClaimPreparer::Create(po, std::make_shared<NoClaimReads>());
  if (!preparer.ok()) {
    LogError("cannot read DRA's checkpoint; GPUs prepared for DRA claims, if any, are not known",
             {{"file", po.checkpoint}, {"error", std::string(preparer.status().message())}});
    return nullptr;
  }
  std::unique_ptr<DraDrain> d(new DraDrain(CatalogOf(gen), std::move(report)));
  d->preparer_ = std::shared_ptr<dra::ClaimPreparer>(*std::move(preparer));
  d->preparer_->SetCatalog(d->catalog_);
  if (d->preparer_->PreparedEntries().empty()) return nullptr;
  d->holders_ = d->HoldersNow();
  d->claims_ = d->preparer_->PreparedEntries().size();
  d->report_(d->holders_);
  LogInfo(
      "DRA claims are still prepared on this node: their GPUs are streamed unhealthy to the "
      "kubelet's device manager, and the DRA plugin stays registered to unprepare them",
      {{"claims", StrCat(d->preparer_->PreparedEntries().size())},
       {"gpus", StrCat(d->holders_.size())}});
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

DraDrain::DraDrain(std::shared_ptr<const dra::DeviceCatalog> catalog, Report report)
    : catalog_(std::move(catalog)), report_(std::move(report)) {}

DraDrain::~DraDrain() { Stop(); }

void DraDrain::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::map<std::string, std::string> DraDrain::holders() const {
  std::lock_guard<std::mutex> lock(mu_);
  return holders_;
}

std::map<std::string, std::string> DraDrain::HoldersNow() const {
  std::map<std::string, std::set<std::string>> claims;
  for (const auto& [uid, claim] : preparer_->PreparedEntries()) {
    for (const dra::PreparedClaim::Device& pd : claim.devices) {
      for (const dra::DraDevice& d : catalog_->devices) {
        if (d.name == pd.answer.device || (!pd.uuid.empty() && d.uuid == pd.uuid)) {
          claims[d.key.uuid].insert(StrCat(claim.name_space, "/", claim.name));
        }
      }
    }
  }
  return HoldersOf(claims, "DRA claim", "DRA claims");
}

void DraDrain::Unprepared() {
  std::map<std::string, std::string> now = HoldersNow();
  const size_t claims = preparer_->PreparedEntries().size();
  {
    std::lock_guard<std::mutex> lock(mu_);
    claims_ = claims;
    if (now == holders_) {
      if (claims == 0) cv_.notify_all();
      return;
    }
    holders_ = now;
  }
  cv_.notify_all();
  report_(now);
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
    LogInfo(
        "every DRA claim on this node is unprepared: the DRA plugin is unregistered and each GPU "
        "is the device plugin's");
  }
}

}  // namespace gpu_agent
