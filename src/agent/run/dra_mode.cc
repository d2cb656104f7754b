#include "agent/run/dra_mode.h"

#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "agent/config/api_connection.h"
#include "agent/labels/nfd_feature_file.h"
#include "agent/run/dra_devices.h"
#include "agent/run/health_policy.h"
#include "agent/run/mode_runner.h"
#include "agent/run/reload.h"
#include "agent/run/time_slice.h"
#include "apiserver/discovery.h"
#include "apiserver/rest_client.h"
#include "apiserver/slice_publisher.h"
#include "base/log.h"
#include "base/prom_text.h"
#include "base/strings.h"
#include "dra/claim_preparer.h"
#include "dra/dra_server.h"
#include "dra/handover.h"
#include "dra/resource_slice.h"
#include "nvml/health_watcher.h"

namespace gpu_agent {
namespace {

// The resource.k8s.io version the API server serves that the agent reads
// claims through: v1, else v1beta2, else v1beta1 (their claims' allocation
// results have one shape). Asked once, on the first claim. One connection
// per concurrent read (dra::kConcurrentReads), each GET on a free one.
class ApiClaimReader : public dra::ClaimReader {
 public:
  // REQUIRES: at least two `clients`: the first for discovery, the others
  // for the claims' GETs.
  explicit ApiClaimReader(std::vector<std::unique_ptr<apiserver::RestClient>> clients)
      : clients_(std::move(clients)), discovery_(clients_.front().get()) {
    for (size_t i = 1; i < clients_.size(); ++i) free_.push_back(clients_[i].get());
  }

  absl::StatusOr<Answer> GetClaim(const std::string& ns, const std::string& name) override {
    if (stopping_) return absl::UnavailableError("the agent is stopping");
    absl::StatusOr<std::string> version = Version();
    if (!version.ok()) return version.status();
    apiserver::RestClient* client = nullptr;
    {
      std::unique_lock<std::mutex> lock(flight_mu_);
      flight_cv_.wait(lock, [this] { return stopping_ || !free_.empty(); });
      if (stopping_) return absl::UnavailableError("the agent is stopping");
      client = free_.back();
      free_.pop_back();
      ++in_flight_;
    }
    // The kubelet's names, each one path segment whatever it sent.
    absl::StatusOr<apiserver::HttpResponse> r = client->Get(
        StrCat("/apis/resource.k8s.io/", *version, "/namespaces/", apiserver::EscapePathSegment(ns),
               "/resourceclaims/", apiserver::EscapePathSegment(name)));
    {
      std::lock_guard<std::mutex> lock(flight_mu_);
      --in_flight_;
      free_.push_back(client);
    }
    flight_cv_.notify_all();
    if (!r.ok()) return r.status();
    return Answer{r->status, std::move(r->body)};
  }

  // On a stop: the GET in progress is cut off (the claim is answered with
  // that error, which the kubelet retries with the next agent) and no other
  // starts, so the stop does not wait out an API server that hangs.
  void Cancel() {
    std::unique_lock<std::mutex> lock(flight_mu_);
    stopping_ = true;
    flight_cv_.notify_all();
    // A cut-off GET is sent once more at once (RestClient), and a cancel
    // can land just before a request opens its connection: repeated until
    // the GETs are out.
    while (in_flight_ > 0) {
      lock.unlock();
      for (const auto& c : clients_) c->Cancel();
      lock.lock();
      flight_cv_.wait_for(lock, std::chrono::milliseconds(50), [this] { return in_flight_ == 0; });
    }
  }

 private:
  absl::StatusOr<std::string> Version() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!version_.empty()) return version_;
    {
      // Counted as a GET in flight, so a stop cuts it off too.
      std::lock_guard<std::mutex> flight(flight_mu_);
      if (stopping_) return absl::UnavailableError("the agent is stopping");
      ++in_flight_;
    }
    absl::StatusOr<apiserver::HttpResponse> r = discovery_->Get("/apis/resource.k8s.io");
    {
      std::lock_guard<std::mutex> flight(flight_mu_);
      --in_flight_;
    }
    flight_cv_.notify_all();
    if (!r.ok()) return r.status();
    if (r->status != 200) {
      return absl::UnavailableError(
          StrCat("the API server serves no resource.k8s.io group (GET /apis/resource.k8s.io "
                 "answered ",
                 r->status, "); DRA needs Kubernetes 1.32 or later"));
    }
    absl::StatusOr<std::string> v =
        apiserver::PickServedVersion(r->body, "resource.k8s.io", {"v1", "v1beta2", "v1beta1"});
    if (!v.ok()) return absl::UnavailableError(v.status().message());
    version_ = *v;
    LogInfo("reading ResourceClaims through resource.k8s.io/" + version_);
    return version_;
  }

  const std::vector<std::unique_ptr<apiserver::RestClient>> clients_;
  apiserver::RestClient* const discovery_;  // one of clients_, never lent to a GET
  std::atomic<bool> stopping_{false};
  std::mutex flight_mu_;  // with flight_cv_: a free client, and Cancel's wait
  std::condition_variable flight_cv_;
  std::vector<apiserver::RestClient*> free_;  // protected by flight_mu_
  int in_flight_ = 0;                         // protected by flight_mu_
  std::mutex mu_;
  std::string version_;  // protected by mu_: empty until discovered
};

std::shared_ptr<const dra::DeviceCatalog> CatalogOf(const Generation& gen) {
  auto c = std::make_shared<dra::DeviceCatalog>();
  c->devices = DraDevicesOf(gen);
  if (gen.cdi) c->node_spec = gen.cdi->spec;
  return c;
}

// The slices of `devices` for whatever version and generation the
// publisher asks. Where the server keeps taints, the `taints` (by device
// name) go with their devices; otherwise a device whose taint keeps claims
// away (unhealthy) leaves the slices.
apiserver::SliceBuilder SlicesOf(std::vector<dra::DraDevice> devices,
                                 std::map<std::string, dra::DeviceTaint> taints, std::string driver,
                                 std::string node) {
  return [devices = std::move(devices), taints = std::move(taints), driver = std::move(driver),
          node = std::move(node)](const apiserver::SliceContext& c) {
    dra::SliceInput in;
    in.api_version = c.api_version;
    in.driver = driver;
    in.node = node;
    in.node_uid = c.node_uid;
    in.pool_generation = c.generation;
    for (const dra::DraDevice& d : devices) {
      auto t = taints.find(d.name);
      const bool away = t != taints.end() && t->second.effect != dra::TaintEffect::kNone;
      if (c.device_taints || !away) in.devices.push_back(d);
    }
    if (c.device_taints) in.tainted = taints;
    return dra::BuildResourceSlices(in);
  };
}

dra::DraServerOptions ServerOptionsOf(const Config& c) {
  dra::DraServerOptions o;
  o.driver_name = c.dra.driver_name;
  o.registry_dir = c.dra.registry_dir;
  o.plugin_dir = c.dra.plugin_dir;
  o.instance = c.dra.pod_uid;
  return o;
}

// Which devices are unhealthy: the health watcher's outages, matched to
// the devices each covers, each made a taint. The watcher's thread
// reports; prepare, the slices and the health stream read.
class DraHealth {
 public:
  DraHealth(dra::ClaimPreparer* preparer, std::string driver)
      : preparer_(preparer), driver_(std::move(driver)) {}

  struct Outage {
    DeviceKey key;
    std::string reason;
    dra::TaintEffect effect = dra::TaintEffect::kNoSchedule;
  };

  // The publisher is handed each change of the devices' health: an
  // unhealthy device is tainted, or leaves the slices, until it is back.
  void SetPublisher(apiserver::SlicePublisher* publisher) {
    std::lock_guard<std::mutex> lock(mu_);
    publisher_ = publisher;
    // What changed since the publisher was started with CurrentSlices
    // (the same slices again are no change to it).
    if (publisher_ != nullptr)
      publisher_->SetDesired(SlicesOf(devices_, TaintsLocked(), driver_, pool_));
  }
  // The slices of the devices and their health now.
  apiserver::SliceBuilder CurrentSlices() const {
    std::lock_guard<std::mutex> lock(mu_);
    return SlicesOf(devices_, TaintsLocked(), driver_, pool_);
  }

  void SetServer(dra::DraServer* server) {
    std::lock_guard<std::mutex> lock(mu_);
    server_ = server;
    PublishLocked();
  }
  void SetDevices(std::vector<dra::DraDevice> devices, const std::string& pool,
                  std::vector<Outage> outages) {
    std::lock_guard<std::mutex> lock(mu_);
    devices_ = std::move(devices);
    pool_ = pool;
    outages_ = std::move(outages);
    PublishLocked();
  }
  void Change(const nvml::HealthChange& change) {
    std::lock_guard<std::mutex> lock(mu_);
    std::erase_if(outages_, [&](const Outage& o) { return o.key == change.key; });
    if (!change.healthy) outages_.push_back({change.key, change.reason});
    PublishLocked();
  }
  size_t unhealthy() const {
    std::lock_guard<std::mutex> lock(mu_);
    return unhealthy_;
  }

 private:
  void PublishLocked() {
    std::vector<dra::DeviceHealthRecord> records;
    std::map<std::string, dra::DeviceTaint> taints = TaintsLocked();
    std::map<std::string, std::string> reasons = ReasonsLocked();
    size_t unhealthy = 0;
    for (const dra::DraDevice& d : devices_) {
      auto t = taints.find(d.name);
      const bool healthy = t == taints.end() || t->second.effect == dra::TaintEffect::kNone;
      if (!healthy) ++unhealthy;
      records.push_back({pool_, d.name, healthy, healthy ? "" : reasons[d.name]});
    }
    unhealthy_ = unhealthy;
    preparer_->SetTaints(taints);
    if (server_ != nullptr) server_->SetHealth(std::move(records));
    // A new generation (SetDevices) with other devices, or a device's
    // health changed, changes what is published; the same again changes
    // nothing.
    if (publisher_ != nullptr && (devices_ != published_ || taints != published_taints_)) {
      publisher_->SetDesired(SlicesOf(devices_, taints, driver_, pool_));
    }
    published_ = devices_;
    published_taints_ = std::move(taints);
  }

  // Each device's first outage that covers it, by name.
  std::map<std::string, const Outage*> OutagesLocked() const {
    std::map<std::string, const Outage*> out;
    for (const dra::DraDevice& d : devices_) {
      for (const Outage& o : outages_) {
        if (o.key.Covers(d.key)) {
          out.emplace(d.name, &o);
          break;
        }
      }
    }
    return out;
  }
  std::map<std::string, std::string> ReasonsLocked() const {
    std::map<std::string, std::string> out;
    for (const auto& [name, o] : OutagesLocked()) out[name] = o->reason;
    return out;
  }
  // The taint of each device an outage covers: "<driver>/unhealthy", the
  // reason as its value.
  std::map<std::string, dra::DeviceTaint> TaintsLocked() const {
    std::map<std::string, dra::DeviceTaint> out;
    for (const auto& [name, o] : OutagesLocked()) {
      out[name] = {StrCat(driver_, "/unhealthy"), dra::TaintValue(o->reason), o->effect};
    }
    return out;
  }

  dra::ClaimPreparer* const preparer_;
  const std::string driver_;
  mutable std::mutex mu_;
  apiserver::SlicePublisher* publisher_ = nullptr;  // protected by mu_
  std::vector<dra::DraDevice> published_;           // protected by mu_: the slices' devices
  std::map<std::string, dra::DeviceTaint> published_taints_;  // protected by mu_
  dra::DraServer* server_ = nullptr;                          // protected by mu_
  std::vector<dra::DraDevice> devices_;                       // protected by mu_
  std::string pool_;                                          // protected by mu_
  std::vector<Outage> outages_;                               // protected by mu_
  size_t unhealthy_ = 0;                                      // protected by mu_
};

class DraMode : public Mode {
 public:
  explicit DraMode(const ModeContext& ctx) : ctx_(ctx) {}

  const char* name() const override { return "dra"; }

  absl::Status Start(const Generation& gen) override {
    const Config& config = gen.config();
    pool_ = DraPoolName(config);
    if (pool_.empty()) {
      return absl::InvalidArgumentError(
          "nodeName: DRA mode needs this node's name (NODE_NAME or --node-name), the name of "
          "its ResourceSlice pool");
    }
    absl::StatusOr<apiserver::Connection> conn = ConnectionFor(config);
    if (!conn.ok()) return conn.status();
    // One for discovery, one per concurrent claim GET.
    std::vector<std::unique_ptr<apiserver::RestClient>> clients;
    for (size_t i = 0; i <= dra::kConcurrentReads; ++i) {
      absl::StatusOr<std::unique_ptr<apiserver::RestClient>> client =
          apiserver::RestClient::Create(*conn, RestOptionsFor(config));
      if (!client.ok()) return client.status();
      clients.push_back(*std::move(client));
    }
    dra::PreparerOptions po;
    po.driver = config.dra.driver_name;
    po.pool = pool_;
    po.cdi_dir = config.cdi.spec_dir;
    po.cdi_vendor = config.cdi.vendor;
    po.checkpoint = StrCat(config.dra.plugin_dir, "/", config.dra.driver_name, "/checkpoint.json");
    po.lock_file = StrCat(config.dra.plugin_dir, "/", config.dra.driver_name, "/serialize.lock");
    po.set_time_slice = NvidiaSmiTimeSlicer(config.flags.DriverRootHere());
    reader_ = std::make_shared<ApiClaimReader>(std::move(clients));
    absl::StatusOr<std::unique_ptr<dra::ClaimPreparer>> preparer =
        dra::ClaimPreparer::Create(po, reader_);
    if (!preparer.ok()) return absl::FailedPreconditionError(preparer.status().message());
    preparer_ = std::shared_ptr<dra::ClaimPreparer>(*std::move(preparer));
    health_state_ = std::make_unique<DraHealth>(preparer_.get(), config.dra.driver_name);
    ApplyNfdOutput(config, gen.labels.labels);
    Serve(gen, {});
    absl::StatusOr<std::unique_ptr<dra::DraServer>> server =
        dra::DraServer::Start(ServerOptionsOf(config), preparer_);
    if (!server.ok()) {
      return absl::FailedPreconditionError(
          StrCat("cannot start the DRA plugin: ", server.status().message()));
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      server_ = *std::move(server);
      health_state_->SetServer(server_.get());
    }
    // The slices last: the kubelet can prepare what the scheduler
    // allocates from them. Published by this instance while it is the one
    // of the driver on this node that does (a rolling update's new pod
    // takes over from the old one: dra/handover.h).
    absl::StatusOr<apiserver::Connection> slice_conn = ConnectionFor(config);
    if (!slice_conn.ok()) return slice_conn.status();
    slice_conn_ = *std::move(slice_conn);
    slice_rest_ = RestOptionsFor(config);
    slice_options_.driver = config.dra.driver_name;
    slice_options_.node = pool_;
    slice_options_.watch_timeout = config.static_mode.watch_timeout;
    slice_options_.probe_device_taints = true;
    dra::HandoverOptions ho;
    ho.folder = StrCat(config.dra.plugin_dir, "/", config.dra.driver_name);
    ho.id = config.dra.pod_uid.empty() ? StrCat("pid-", ::getpid()) : config.dra.pod_uid;
    ho.lead = [this] { Lead(); };
    ho.yield = [this] { Yield(); };
    absl::StatusOr<std::unique_ptr<dra::Handover>> handover = dra::Handover::Start(std::move(ho));
    if (!handover.ok()) {
      return absl::FailedPreconditionError(
          StrCat("cannot share the node with the driver's other instances: ",
                 handover.status().message()));
    }
    handover_ = *std::move(handover);
    absl::StatusOr<std::unique_ptr<apiserver::NodeLabelWatch>> label_watch =
        WatchConfigLabel(config, ctx_.node_config, ctx_.events);
    if (!label_watch.ok()) {
      return absl::FailedPreconditionError(
          StrCat("cannot watch the node's config label: ", label_watch.status().message()));
    }
    label_watch_ = *std::move(label_watch);
    return absl::OkStatus();
  }

  absl::Status Reload(const Generation& running, const Generation& next) override {
    const Config& a = running.config();
    const Config& b = next.config();
    if (a.dra.driver_name != b.dra.driver_name || a.dra.registry_dir != b.dra.registry_dir ||
        a.dra.plugin_dir != b.dra.plugin_dir || DraPoolName(b) != pool_ ||
        a.cdi.spec_dir != b.cdi.spec_dir || a.cdi.vendor != b.cdi.vendor) {
      // The claims prepared under the old names stay where they were:
      // their pods still run with them.
      LogWarning(
          "dra.*, nodeName, cdi.specDir and cdi.vendor are read at start; a restart applies "
          "the changed ones");
    }
    ApplyNfdOutput(next.config(), next.labels.labels);
    std::vector<nvml::HealthWatcher::Outage> carried = health().StopForReplacement();
    Serve(next, std::move(carried));
    return absl::OkStatus();
  }

  void Stop(const Generation& /*last*/) override {
    if (label_watch_) label_watch_->Stop();
    health().Stop();
    // The publishing handed to another instance of the driver, if one is
    // left; the slices stay: the kubelet removes a driver's slices once it
    // has been gone a while, and a restart finds them as they should be.
    if (handover_) handover_->Stop();
    StopPublishing();
    std::unique_ptr<dra::DraServer> server;
    {
      std::lock_guard<std::mutex> lock(mu_);
      server = std::move(server_);
    }
    if (health_state_) health_state_->SetServer(nullptr);
    if (reader_) reader_->Cancel();
    if (server) server->Stop();
    // The claims' CDI specs stay: their containers still run, and a
    // restarted agent (or the kubelet's unprepare) removes them.
    LogInfo("stopped; DRA sockets removed");
  }

  void RenderMetrics(PromText* p) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!server_) return;
    const dra::RegistrationState r = server_->registration();
    const dra::ClaimCallStats s = server_->stats();
    auto one = [&](const char* name, const char* type, const char* help, double v) {
      p->Family(name, type, help);
      p->Sample(name, {}, v);
    };
    one("gpu_agent_dra_registered", "gauge", "1 when the kubelet took the DRA registration.",
        r.registered ? 1 : 0);
    one("gpu_agent_dra_registration_refusals_total", "counter",
        "Registrations the kubelet refused.", static_cast<double>(r.refusals));
    one("gpu_agent_dra_prepare_requests_total", "counter", "NodePrepareResources calls.",
        static_cast<double>(s.prepare_calls));
    one("gpu_agent_dra_unprepare_requests_total", "counter", "NodeUnprepareResources calls.",
        static_cast<double>(s.unprepare_calls));
    one("gpu_agent_dra_claim_errors_total", "counter", "Claims answered with an error.",
        static_cast<double>(s.claim_errors));
    one("gpu_agent_dra_prepared_claims", "gauge", "Claims prepared and not yet unprepared.",
        static_cast<double>(preparer_->Prepared().size()));
    one("gpu_agent_dra_unhealthy_devices", "gauge", "Devices the health watcher has out.",
        static_cast<double>(health_state_->unhealthy()));
    one("gpu_agent_dra_health_streams", "gauge", "Open NodeWatchResources streams.",
        static_cast<double>(s.health_streams));
    one("gpu_agent_dra_socket_heals_total", "counter", "DRA sockets someone removed, served again.",
        static_cast<double>(s.socket_heals));
    std::lock_guard<std::mutex> publishing(publisher_mu_);
    one("gpu_agent_dra_publishing", "gauge",
        "1 while this instance publishes the node's ResourceSlices and serves the health stream "
        "(0: another instance of the driver on the node does, as in a rolling update).",
        publisher_ ? 1 : 0);
    if (publisher_) {
      const apiserver::SlicePublisherStats& ps = publisher_->stats();
      one("gpu_agent_dra_slices_in_sync", "gauge",
          "1 when the node's ResourceSlices were last seen as published.", ps.in_sync ? 1 : 0);
      one("gpu_agent_dra_pool_generation", "gauge", "The pool generation published.",
          static_cast<double>(ps.generation.load()));
      one("gpu_agent_dra_slice_writes_total", "counter",
          "ResourceSlice creates, updates and deletes sent.",
          static_cast<double>(ps.creates + ps.updates + ps.deletes));
      one("gpu_agent_dra_slice_repairs_total", "counter",
          "Changes to the slices a watch event showed and the agent repaired.",
          static_cast<double>(ps.repairs.load()));
      one("gpu_agent_dra_slice_errors_total", "counter",
          "ResourceSlice requests that failed and were retried.",
          static_cast<double>(ps.errors.load()));
    }
  }

  bool Ready(std::string* why) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (server_ && server_->registration().registered) return true;
    *why = "the kubelet has not taken the DRA registration";
    return false;
  }

  bool Alive(std::string* /*why*/) override { return true; }

 private:
  // Hands the generation's devices to prepare and the health stream, and
  // starts its health watcher carrying `carried`.
  void Serve(const Generation& gen, std::vector<nvml::HealthWatcher::Outage> carried) {
    std::shared_ptr<const dra::DeviceCatalog> catalog = CatalogOf(gen);
    LogInfo("DRA devices", {{"devices", StrCat(catalog->devices.size())}, {"pool", pool_}});
    preparer_->SetCatalog(catalog);
    std::vector<DraHealth::Outage> outages;
    for (const std::string& uuid : gen.plan.initially_unhealthy) {
      outages.push_back({DeviceKey::Gpu(uuid), "unhealthy at start"});
    }
    for (const auto& o : carried) outages.push_back({o.key, o.reason});
    health_state_->SetDevices(catalog->devices, pool_, std::move(outages));
    if (!ctx_.lib) return;
    DraHealth* state = health_state_.get();
    health().Replace(nvml::HealthWatcher::Start(
        ctx_.lib, gen.plan.gpu_uuids, gen.plan.initially_unhealthy, HealthPolicyFrom(gen.config()),
        [state](const nvml::HealthChange& change) { state->Change(change); }, std::move(carried)));
  }

  // This instance publishes from now on (the handover's `lead`): the
  // slices, and the health stream served.
  void Lead() {
    absl::StatusOr<std::unique_ptr<apiserver::SlicePublisher>> publisher =
        apiserver::SlicePublisher::Start(slice_conn_, slice_rest_, slice_options_,
                                         health_state_->CurrentSlices());
    if (!publisher.ok()) {
      LogError("cannot publish ResourceSlices",
               {{"error", std::string(publisher.status().message())}});
      return;
    }
    {
      std::lock_guard<std::mutex> lock(publisher_mu_);
      publisher_ = *std::move(publisher);
      health_state_->SetPublisher(publisher_.get());
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (server_) server_->SetHealthServing(true);
  }

  // A newer instance publishes from now on (the handover's `yield`): the
  // slices are left as they are, for it to keep; prepare and unprepare go
  // on serving the kubelet, which calls the newest instance, and this one
  // should the newest go.
  void Yield() {
    StopPublishing();
    std::lock_guard<std::mutex> lock(mu_);
    if (server_) server_->SetHealthServing(false);
  }

  void StopPublishing() {
    std::unique_ptr<apiserver::SlicePublisher> publisher;
    {
      std::lock_guard<std::mutex> lock(publisher_mu_);
      if (health_state_) health_state_->SetPublisher(nullptr);
      publisher = std::move(publisher_);
    }
    if (publisher) publisher->Stop();
  }

  const ModeContext& ctx_;
  std::string pool_;
  apiserver::Connection slice_conn_;  // set by Start: what a publisher is started with
  apiserver::RestOptions slice_rest_;
  apiserver::SlicePublisherOptions slice_options_;
  std::unique_ptr<dra::Handover> handover_;
  std::shared_ptr<ApiClaimReader> reader_;
  std::shared_ptr<dra::ClaimPreparer> preparer_;
  std::unique_ptr<DraHealth> health_state_;
  std::mutex publisher_mu_;
  std::unique_ptr<apiserver::SlicePublisher> publisher_;    // protected by publisher_mu_: null
                                                            // while another instance publishes
  std::unique_ptr<apiserver::NodeLabelWatch> label_watch_;  // null without a node config
  std::mutex mu_;
  std::unique_ptr<dra::DraServer> server_;  // protected by mu_
};

}  // namespace

int RunDraMode(const ModeContext& ctx, std::shared_ptr<const Generation> gen) {
  DraMode mode(ctx);
  return RunMode(ctx, std::move(gen), mode);
}

}  // namespace gpu_agent
