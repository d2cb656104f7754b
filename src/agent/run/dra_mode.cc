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
#include "agent/config/dra_taints.h"
#include "agent/labels/nfd_feature_file.h"
#include "agent/plan/dra_plan.h"
#include "agent/run/api_claim_reader.h"
#include "agent/run/dra_drain.h"
#include "agent/run/dra_health.h"
#include "agent/run/held_watch.h"
#include "agent/run/mode_runner.h"
#include "agent/run/mode_switch.h"
#include "agent/run/reload.h"
#include "apiserver/discovery.h"
#include "apiserver/rest_client.h"
#include "base/duration.h"
#include "base/log.h"
#include "base/prom_text.h"
#include "base/socket_path.h"
#include "base/strings.h"
#include "dra/claim_preparer.h"
#include "dra/dra_server.h"
#include "dra/handover.h"
#include "dra/resource_slice.h"
#include "dra/slice_publisher.h"
#include "health/health_watcher.h"

namespace gpu_agent {
namespace {

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
    reader_ = std::make_shared<ApiClaimReader>(std::move(clients));
    absl::StatusOr<std::unique_ptr<dra::ClaimPreparer>> preparer =
        dra::ClaimPreparer::Create(PreparerOptionsOf(config, pool_), reader_);
    if (!preparer.ok()) return absl::FailedPreconditionError(preparer.status().message());
    preparer_ = std::shared_ptr<dra::ClaimPreparer>(*std::move(preparer));
    health_state_ = std::make_unique<DraHealth>(preparer_.get(), config.dra.driver_name);
    ApplyNfdOutput(config, gen.labels.labels);
    // Before anything is offered: the GPUs device-plugin pods hold.
    handover_strict_ = StartsHandover(config);
    WatchHeld(gen, handover_strict_);
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
    // Taking the node from the device plugin (in this process, or on record
    // from one that stopped midway), whose pods the scheduler now sends
    // through DRA (their allocatable is 0): no slice before the kubelet has
    // the driver, or it could not prepare the claims made from them until
    // its next pod resync, a minute on.
    if (handover_strict_) WaitForKubelet();
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
    slice_options_.probe_sharing = true;
    if (!config.dra.pod_uid.empty()) {
      dra::DraServerOptions plain = ServerOptionsOf(config);
      plain.instance.clear();
      plain_registration_ = dra::RegistrationSocketPath(plain);
    }
    dra::HandoverOptions ho;
    ho.folder = StrCat(config.dra.plugin_dir, "/", config.dra.driver_name);
    ho.id = config.dra.pod_uid.empty() ? StrCat("pid-", ::getpid()) : config.dra.pod_uid;
    ho.lead = [this] { return Lead(); };
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
    // A handover still under way goes on with the new generation's GPUs.
    if (std::unique_ptr<HeldWatch> held = TakeHeldWatch(); held && !held->state().done) {
      const bool strict = held->strict();
      held.reset();
      WatchHeld(next, strict);
    }
    std::vector<health::HealthWatcher::Outage> carried = health().StopForReplacement();
    Serve(next, std::move(carried));
    return absl::OkStatus();
  }

  void Stop(const Generation& /*last*/, StopFor why) override {
    if (label_watch_) label_watch_->Stop();
    TakeHeldWatch().reset();
    health().Stop();
    // Handing the node to the device plugin: no claim is allocated from
    // this node any more (the slices go, as the kubelet would delete them
    // once the driver has been gone a while); the claims prepared stay
    // prepared, and the device plugin keeps their GPUs from its pods until
    // they are unprepared (dra_drain.h).
    if (why == StopFor::kSwitch) WithdrawSlices();
    // The publishing handed to another instance of the driver, if one is
    // left (the handover stops this one's first: never two publishers); the
    // slices stay: the kubelet removes a driver's slices once it has been
    // gone a while, and a restart finds them as they should be.
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
    p->Family("gpu_agent_handover_gpus_held", "gauge",
              "GPUs the other mode still holds while the node moves between the device plugin "
              "and DRA (here: the device plugin's pods, or all while their state is unknown), "
              "kept out of this mode's slices.");
    p->Sample("gpu_agent_handover_gpus_held", {{"held_by", "plugin"}},
              health_state_ ? static_cast<double>(health_state_->withheld()) : 0.0);
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
      const dra::SlicePublisherStats& ps = publisher_->stats();
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
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!server_ || !server_->registration().registered) {
        *why = "the kubelet has not taken the DRA registration";
        return false;
      }
    }
    // Ready, and saying what of the node is not offered yet.
    std::lock_guard<std::mutex> lock(held_mu_);
    if (held_ && !held_->state().done) *why = HandoverNote(held_->state());
    return true;
  }

  bool Alive(std::string* /*why*/) override { return true; }

 private:
  // A move from the device plugin, in this process or recorded by one
  // that was killed before it ended: recorded (again) here, and the held
  // GPUs' state must be known before any is offered.
  bool StartsHandover(const Config& config) {
    if (ctx_.switched_from.empty()) return HandoverRecorded(config);
    // Plugin mode recorded it before it let go; once more if it could not.
    if (!HandoverRecorded(config)) {
      if (absl::Status s = RecordHandover(config, ctx_.switched_from); !s.ok()) {
        LogWarning("cannot record the handover; a restart before it ends will not know of it",
                   {{"error", std::string(s.message())}});
      }
    }
    return true;
  }

  // Starts the watch of the GPUs device-plugin pods hold (its first answer
  // applied before it returns); `strict`: during a handover, where a GPU of
  // unknown state is not offered.
  void WatchHeld(const Generation& gen, bool strict) {
    HeldWatchOptions o;
    o.socket = gen.config().kubelet.pod_resources_socket;
    o.strict = strict;
    DraHealth* state = health_state_.get();
    const std::string record = HandoverRecordPath(gen.config());
    // Without a move on record, written only where the Node shows the
    // condition (another mode's, from before a restart).
    ModeCondition* condition = ctx_.mode_condition;
    std::unique_ptr<HeldWatch> w =
        HeldWatch::Start(std::move(o), gen.model, gen.inventory,
                         [state, record, strict, condition](const HeldState& s) {
                           state->SetWithheld(s.holders);
                           LogHeld(s, strict);
                           if (condition) {
                             const char* reason = s.done ? "Dra" : "MovingToDra";
                             if (strict) {
                               condition->Set(reason, ConditionMessage(s));
                             } else {
                               condition->SetIfShown(reason, ConditionMessage(s));
                             }
                           }
                           if (s.done && strict) EndHandoverRecord(record);
                         });
    std::lock_guard<std::mutex> lock(held_mu_);
    held_ = std::move(w);
  }

  std::unique_ptr<HeldWatch> TakeHeldWatch() {
    std::lock_guard<std::mutex> lock(held_mu_);
    return std::move(held_);
  }

  static void LogHeld(const HeldState& s, bool strict) {
    if (s.done) {
      if (strict) LogInfo("handover from the device plugin done: every GPU is offered");
      return;
    }
    if (!s.problem.empty()) {
      LogWarning(
          "handover from the device plugin: the kubelet's PodResources cannot be read; no GPU is "
          "offered until it answers",
          {{"error", s.problem}});
      return;
    }
    LogInfo(
        "handover from the device plugin: GPUs its pods hold stay out of the slices until "
        "they end",
        {{"held", DescribeHolders(s.holders)}});
  }

  static std::string ConditionMessage(const HeldState& s) {
    if (s.done) return "dra mode; every GPU is offered through DRA";
    if (!s.problem.empty()) {
      return StrCat("dra mode; no GPU offered: the kubelet's PodResources cannot be read (",
                    s.problem, ")");
    }
    return StrCat("dra mode; ", s.holders.size(),
                  " GPU(s) still held by device-plugin pods: ", DescribeHolders(s.holders));
  }

  static std::string HandoverNote(const HeldState& s) {
    if (!s.problem.empty()) {
      return StrCat("handover from the device plugin: PodResources cannot be read (", s.problem,
                    "); no GPU offered");
    }
    return StrCat("handover from the device plugin: ", s.holders.size(),
                  " GPU(s) held by its pods: ", DescribeHolders(s.holders));
  }

  void WaitForKubelet() {
    constexpr auto kWait = std::chrono::seconds(10);
    dra::DraServer* server;
    {
      std::lock_guard<std::mutex> lock(mu_);
      server = server_.get();
    }
    if (!server->WaitRegistered(kWait)) {
      LogWarning(
          "the kubelet has not taken the DRA driver's registration; publishing the "
          "ResourceSlices without it",
          {{"waited", FormatDuration(kWait)}});
    }
  }

  // Deletes this node's slices of the driver, waiting a few seconds for the
  // API server to have them gone.
  void WithdrawSlices() {
    std::lock_guard<std::mutex> lock(publisher_mu_);
    if (!publisher_) return;
    if (health_state_) health_state_->SetPublisher(nullptr);
    publisher_->SetDesired([](const dra::SliceContext&) { return std::vector<std::string>(); });
    if (publisher_->WaitPublished(std::chrono::seconds(5))) {
      LogInfo("ResourceSlices deleted: the node's GPUs go to the device plugin", {{"pool", pool_}});
    } else {
      LogWarning(
          "the ResourceSlices could not be deleted in time; the kubelet deletes them once the "
          "driver has been gone a while",
          {{"pool", pool_}});
    }
  }

  // Hands the generation's devices to prepare and the health stream, and
  // starts its health watcher carrying `carried`.
  void Serve(const Generation& gen, std::vector<health::HealthWatcher::Outage> carried) {
    std::shared_ptr<const dra::DeviceCatalog> catalog = CatalogOf(gen);
    LogInfo("DRA devices", {{"devices", StrCat(catalog->devices.size())}, {"pool", pool_}});
    preparer_->SetCatalog(catalog);
    std::vector<DraHealth::Outage> outages;
    for (const std::string& uuid : gen.model.initially_unhealthy) {
      outages.push_back({DeviceKey::Gpu(uuid), "unhealthy at start", "xid"});
    }
    for (const auto& o : carried) outages.push_back(health::HealthLedger::OutageOf(o));
    health_state_->SetDevices(
        catalog->devices, pool_,
        [config = gen.config()](std::string_view cause) { return DraTaintEffect(config, cause); },
        std::move(outages));
    DraHealth* state = health_state_.get();
    health().Replace(
        WatchHealth(gen, std::move(carried),
                    {[state](const health::HealthChange& change) { state->Change(change); },
                     [state](const health::CheckChange& change) { state->CheckChanged(change); }}));
  }

  // This instance publishes from now on (the handover's `lead`): the
  // slices, and the health stream served. False when the publisher cannot
  // start: the handover lets another instance try, and asks again later.
  bool Lead() {
    // An instance of a version before the handover (its sockets named
    // without a pod UID) still serving beside this one: it publishes too,
    // knowing nothing of the handover, so this one waits until it is gone.
    if (!plain_registration_.empty() && SomeoneServes(plain_registration_)) {
      LogInfo(
          "an instance of an earlier version of the DRA driver still serves on this node; "
          "publishing the ResourceSlices once it is gone",
          {{"socket", plain_registration_}});
      return false;
    }
    absl::StatusOr<std::unique_ptr<dra::SlicePublisher>> publisher = dra::SlicePublisher::Start(
        slice_conn_, slice_rest_, slice_options_, health_state_->CurrentSlices());
    if (!publisher.ok()) {
      LogError("cannot publish ResourceSlices",
               {{"error", std::string(publisher.status().message())}});
      return false;
    }
    {
      std::lock_guard<std::mutex> lock(publisher_mu_);
      publisher_ = *std::move(publisher);
      health_state_->SetPublisher(publisher_.get());
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (server_) server_->SetHealthServing(true);
    return true;
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
    std::unique_ptr<dra::SlicePublisher> publisher;
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
  dra::SlicePublisherOptions slice_options_;
  std::unique_ptr<dra::Handover> handover_;
  // With a pod UID: the registration socket an earlier version serves
  // under (no UID in its name), which keeps this one from publishing.
  std::string plain_registration_;
  std::shared_ptr<ApiClaimReader> reader_;
  std::shared_ptr<dra::ClaimPreparer> preparer_;
  std::unique_ptr<DraHealth> health_state_;
  std::mutex publisher_mu_;
  std::unique_ptr<dra::SlicePublisher> publisher_;          // protected by publisher_mu_: null
                                                            // while another instance publishes
  std::unique_ptr<apiserver::NodeLabelWatch> label_watch_;  // null without a node config
  std::mutex mu_;
  std::unique_ptr<dra::DraServer> server_;  // protected by mu_
  std::mutex held_mu_;
  std::unique_ptr<HeldWatch> held_;  // protected by held_mu_: null when no watch was started
  bool handover_strict_ = false;     // set by Start: a move from the device plugin is under way
};

}  // namespace

ModeEnd RunDraMode(const ModeContext& ctx, std::shared_ptr<const Generation> gen) {
  DraMode mode(ctx);
  return RunMode(ctx, std::move(gen), mode);
}

}  // namespace gpu_agent
