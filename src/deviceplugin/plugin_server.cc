#include "deviceplugin/plugin_server.h"

#include <unistd.h>

#include <limits>

#include "base/duration.h"
#include "base/file_util.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/thread_name.h"

namespace gpu_agent::deviceplugin {

// One call's state on the completion queue. Each operation in flight
// carries a Tag naming the call and the step it completes.
class PluginServer::Call {
 public:
  enum class Step { kArrived, kWritten, kFinished, kDone };
  struct Tag {
    Call* call;
    Step step;
  };
  virtual ~Call() = default;
  // Runs on the completion-queue thread. `ok` is the operation's outcome.
  virtual void Proceed(Step step, bool ok) = 0;
};

// A unary call: asked for, answered from the service, freed when the answer
// is sent.
template <class Request, class Response>
class PluginServer::UnaryCall final : public Call {
 public:
  using Ask = void (v1beta1::DevicePlugin::AsyncService::*)(
      grpc::ServerContext*, Request*, grpc::ServerAsyncResponseWriter<Response>*,
      grpc::CompletionQueue*, grpc::ServerCompletionQueue*, void*);
  using Handle = grpc::Status (*)(DevicePluginService&, const Request&, Response*);

  // Asks gRPC for the next call of this method; the call frees itself.
  static void Next(PluginServer* server, Ask ask, Handle handle) {
    auto* call = new UnaryCall(server, ask, handle);
    if (!server->StartOp([&] {
          (server->async_.*ask)(&call->ctx_, &call->request_, &call->responder_, server->cq_.get(),
                                server->cq_.get(), &call->arrived_);
        })) {
      delete call;
    }
  }

  void Proceed(Step step, bool ok) override {
    if (step != Step::kArrived || !ok) {
      // Answer sent, or the server shut down before a call came.
      delete this;
      return;
    }
    counted_ = true;
    ++server_->unary_open_;
    if (!server_->shutting_down_) Next(server_, ask_, handle_);
    const grpc::Status status = handle_(*server_->service_, request_, &response_);
    if (!server_->StartOp([&] { responder_.Finish(response_, status, &finished_); })) {
      delete this;  // the queue is shut: gRPC returns nothing more for this call
    }
  }

 private:
  UnaryCall(PluginServer* server, Ask ask, Handle handle)
      : server_(server), ask_(ask), handle_(handle) {}
  ~UnaryCall() override {
    if (!counted_) return;  // never arrived
    --server_->unary_open_;
    server_->CallFreed();
  }

  PluginServer* const server_;
  const Ask ask_;
  const Handle handle_;
  grpc::ServerContext ctx_;
  Request request_;
  Response response_;
  grpc::ServerAsyncResponseWriter<Response> responder_{&ctx_};
  Tag arrived_{this, Step::kArrived};
  Tag finished_{this, Step::kFinished};
  bool counted_ = false;  // arrived: counted in unary_open_ until freed
};

// One ListAndWatch stream, fed by the DevicePublisher from any thread: one
// write in flight, newer snapshots coalesced into the next write, Finish
// exactly once (when the publisher closes, a write fails, or the kubelet
// cancels), and freed once gRPC has returned both Finish and the call's end.
class PluginServer::StreamCall final : public Call, public DevicePublisher::Subscriber {
 public:
  explicit StreamCall(PluginServer* server) : server_(server) {}

  // False when the queue is already shut.
  bool Ask() {
    ctx_.AsyncNotifyWhenDone(&done_);  // before the call starts, as gRPC requires
    return server_->StartOp([this] {
      server_->async_.RequestListAndWatch(&ctx_, &request_, &writer_, server_->cq_.get(),
                                          server_->cq_.get(), &arrived_);
    });
  }

  void Proceed(Step step, bool ok) override {
    switch (step) {
      case Step::kArrived:
        if (!ok) {
          // The server shut down before a call came: gRPC returns nothing
          // else for a call that never started.
          server_->Forget(this);
          return;
        }
        if (!server_->shutting_down_) server_->RequestStream();
        server_->service_->publisher().Subscribe(Self());
        server_->service_->StreamOpened();
        // A stream that subscribed after Stop() closed the others is closed
        // here, or gRPC's shutdown would wait for it until its deadline.
        // Stop sets the flag before it closes the streams, and both sides
        // take the publisher's lock, so one of the two always sees the other.
        if (server_->shutting_down_) {
          OnClose();
        } else {
          MaybeWrite();
        }
        return;
      case Step::kWritten: {
        bool ended = false;
        {
          std::lock_guard<std::mutex> lock(mu_);
          writing_ = false;
          if (!ok) {
            // The kubelet went away; nothing more can be written.
            closing_ = true;
            status_ = grpc::Status(grpc::StatusCode::UNAVAILABLE, "stream broken");
          }
          if (closing_) {
            FinishLocked();
            ended = EndDueLocked();
          }
        }
        if (ended) {
          End();
        } else {
          MaybeWrite();
        }
        return;
      }
      case Step::kDone: {
        bool ended;
        {
          std::lock_guard<std::mutex> lock(mu_);
          done_seen_ = true;
          if (!finishing_) {
            // Cancelled by the kubelet (or the server's shutdown).
            closing_ = true;
            status_ = grpc::Status::CANCELLED;
            if (!writing_) FinishLocked();
          }
          ended = EndDueLocked();
        }
        if (ended) End();
        return;
      }
      case Step::kFinished: {
        bool ended;
        {
          std::lock_guard<std::mutex> lock(mu_);
          finish_seen_ = true;
          ended = EndDueLocked();
        }
        if (ended) End();
        return;
      }
    }
  }

  void OnSnapshot() override { MaybeWrite(); }

  void OnClose() override {
    bool ended = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      closing_ = true;
      if (!writing_) FinishLocked();
      ended = EndDueLocked();
    }
    if (ended) End();
  }

 private:
  std::shared_ptr<StreamCall> Self() {
    std::lock_guard<std::mutex> lock(server_->streams_mu_);
    return server_->streams_.at(this);
  }

  void MaybeWrite() {
    std::shared_ptr<const DeviceSnapshot> snap = server_->service_->publisher().Current();
    bool ended = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (finishing_ || writing_ || closing_ || snap->version == sent_version_) return;
      FillListAndWatch(*snap, &response_);
      sent_version_ = snap->version;
      writing_ = server_->StartOp([this] { writer_.Write(response_, &written_); });
      if (!writing_) {  // the queue is shut
        FinishLocked();
        ended = EndDueLocked();
      }
    }
    if (ended) End();
  }

  // REQUIRES: mu_ held. True once, when gRPC has returned both Finish (or
  // it could not be asked) and the call's end: the stream can go.
  bool EndDueLocked() {
    if (ended_ || !finish_seen_ || !done_seen_) return false;
    ended_ = true;
    return true;
  }

  // REQUIRES: mu_ held, no write in flight.
  void FinishLocked() {
    if (finishing_) return;
    finishing_ = true;
    // With the queue shut, Finish cannot be asked; only the call's end
    // (kDone) is still to come, and it frees the stream.
    if (!server_->StartOp([this] { writer_.Finish(status_, &finished_); })) finish_seen_ = true;
  }

  void End() {
    server_->service_->StreamEnded();
    server_->CallFreed();
    server_->Forget(this);
  }

  PluginServer* const server_;
  grpc::ServerContext ctx_;
  v1beta1::Empty request_;
  grpc::ServerAsyncWriter<v1beta1::ListAndWatchResponse> writer_{&ctx_};
  Tag arrived_{this, Step::kArrived};
  Tag written_{this, Step::kWritten};
  Tag finished_{this, Step::kFinished};
  Tag done_{this, Step::kDone};

  std::mutex mu_;
  bool writing_ = false;      // protected by mu_: a Write in flight
  bool closing_ = false;      // protected by mu_: Finish once no write is in flight
  bool finishing_ = false;    // protected by mu_: Finish called
  bool finish_seen_ = false;  // protected by mu_: gRPC returned Finish
  bool done_seen_ = false;    // protected by mu_: gRPC says the call is over
  bool ended_ = false;        // protected by mu_: End() called
  grpc::Status status_;       // protected by mu_: what Finish sends
  uint64_t sent_version_ = 0;
  v1beta1::ListAndWatchResponse response_;  // owned by the write in flight
};

PluginServer::PluginServer(std::string path, std::shared_ptr<DevicePluginService> service)
    : socket_path_(std::move(path)), service_(std::move(service)) {}

absl::StatusOr<std::unique_ptr<PluginServer>> PluginServer::Start(
    const std::string& socket_path, std::shared_ptr<DevicePluginService> service) {
  if (absl::Status s = PrepareSocketPath(socket_path, "kubelet.socket folder or kubelet.endpoint");
      !s.ok())
    return s;
  std::unique_ptr<PluginServer> self(new PluginServer(socket_path, std::move(service)));
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + socket_path, grpc::InsecureServerCredentials());
  builder.RegisterService(&self->async_);
  // No keepalive or BDP pings on a local unix socket: a dead kubelet closes
  // the socket, which gRPC sees at once.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, std::numeric_limits<int>::max());
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  self->cq_ = builder.AddCompletionQueue();
  self->server_ = builder.BuildAndStart();
  if (self->server_ == nullptr) {
    self->stopped_ = true;  // nothing to stop: the destructor leaves it
    self->cq_->Shutdown();  // nothing was asked of it: drained at once
    void* tag;
    bool ok;
    while (self->cq_->Next(&tag, &ok)) {
    }
    return absl::UnavailableError(
        StrCat("cannot serve on \"", socket_path, "\" (gRPC could not bind; see its log above)"));
  }
  self->inode_ = InodeOf(socket_path);
  self->RequestCalls();
  PluginServer* raw = self.get();
  self->driver_ = std::thread([raw] {
    NameThisThread("plugin-serve");
    raw->Drive();
  });
  if (absl::Status s = SecureSocket(socket_path); !s.ok()) {
    self->Stop(std::chrono::milliseconds(0));
    return s;
  }
  return self;
}

void PluginServer::RequestCalls() {
  using S = v1beta1::DevicePlugin::AsyncService;
  using D = DevicePluginService;
  UnaryCall<v1beta1::Empty, v1beta1::DevicePluginOptions>::Next(
      this, &S::RequestGetDevicePluginOptions,
      [](D& d, const v1beta1::Empty&, v1beta1::DevicePluginOptions* out) {
        return d.GetDevicePluginOptions(out);
      });
  UnaryCall<v1beta1::AllocateRequest, v1beta1::AllocateResponse>::Next(
      this, &S::RequestAllocate,
      [](D& d, const v1beta1::AllocateRequest& in, v1beta1::AllocateResponse* out) {
        return d.Allocate(in, out);
      });
  UnaryCall<v1beta1::PreferredAllocationRequest, v1beta1::PreferredAllocationResponse>::Next(
      this, &S::RequestGetPreferredAllocation,
      [](D& d, const v1beta1::PreferredAllocationRequest& in,
         v1beta1::PreferredAllocationResponse* out) { return d.GetPreferredAllocation(in, out); });
  UnaryCall<v1beta1::PreStartContainerRequest, v1beta1::PreStartContainerResponse>::Next(
      this, &S::RequestPreStartContainer,
      [](D& d, const v1beta1::PreStartContainerRequest& in,
         v1beta1::PreStartContainerResponse* out) { return d.PreStartContainer(in, out); });
  RequestStream();
}

void PluginServer::RequestStream() {
  auto call = std::make_shared<StreamCall>(this);
  {
    std::lock_guard<std::mutex> lock(streams_mu_);
    streams_.emplace(call.get(), call);
  }
  if (!call->Ask()) Forget(call.get());
}

template <class F>
bool PluginServer::StartOp(F&& start) {
  std::lock_guard<std::mutex> lock(ops_mu_);
  if (!cq_open_) return false;
  start();
  return true;
}

void PluginServer::CallFreed() {
  if (!shutting_down_) return;  // only Stop waits for the calls to end
  { std::lock_guard<std::mutex> lock(drain_mu_); }
  drain_cv_.notify_all();
}

void PluginServer::Forget(StreamCall* call) {
  std::shared_ptr<StreamCall> last;  // freed outside the lock
  std::lock_guard<std::mutex> lock(streams_mu_);
  auto it = streams_.find(call);
  if (it == streams_.end()) return;
  last = std::move(it->second);
  streams_.erase(it);
}

void PluginServer::Drive() {
  void* tag;
  bool ok;
  while (cq_->Next(&tag, &ok)) {
    auto* t = static_cast<Call::Tag*>(tag);
    t->call->Proceed(t->step, ok);
  }
}

PluginServer::~PluginServer() { Stop(std::chrono::milliseconds(500)); }

void PluginServer::Stop(std::chrono::milliseconds deadline) {
  if (stopped_) return;
  stopped_ = true;
  shutting_down_ = true;  // first: a stream that arrives from here on closes itself
  service_->FinishStreams();
  // The calls first: the streams were just told to finish, and no new call
  // is asked for, so only the few in flight are left; they take microseconds
  // unless a peer does not read what it is sent.
  const auto until = std::chrono::steady_clock::now() + deadline;
  bool drained;
  {
    std::unique_lock<std::mutex> lock(drain_mu_);
    drained = drain_cv_.wait_until(
        lock, until, [this] { return unary_open_.load() == 0 && service_->OpenStreams() == 0; });
  }
  if (!drained) {
    LogWarning("plugin server stop: calls still open at the deadline are cancelled",
               {{"socket", socket_path_},
                {"deadline", FormatDuration(deadline)},
                {"streams", StrCat(service_->OpenStreams())},
                {"unary_calls", StrCat(unary_open_.load())}});
  }
  // Then gRPC's own shutdown, which waits on more than these calls (its
  // connections, closed by each client after a GOAWAY) and can take the
  // whole deadline with every call already ended, holding up the kubelet's
  // registration behind it. With nothing of ours left to finish it gets a
  // short grace, then cancels.
  const auto grace = drained ? kShutdownGrace : std::chrono::milliseconds(0);
  const auto shutdown_started = std::chrono::steady_clock::now();
  server_->Shutdown(std::chrono::system_clock::now() + grace);
  if (drained && std::chrono::steady_clock::now() - shutdown_started >= grace) {
    LogDebug("plugin server stop: gRPC's shutdown cancelled what was left after the grace",
             {{"socket", socket_path_}, {"grace", FormatDuration(grace)}});
  }
  {
    // From here no operation starts on the queue (gRPC aborts on one that
    // does); a call that would start one counts it as done.
    std::lock_guard<std::mutex> lock(ops_mu_);
    cq_open_ = false;
    cq_->Shutdown();
  }
  driver_.join();  // every call's last step has run: the queue is drained
  // Remove the file only if it is still the one this server made: after a
  // kubelet restart the path may already hold someone else's socket.
  if (inode_ != 0 && InodeOf(socket_path_) == inode_) ::unlink(socket_path_.c_str());
}

}  // namespace gpu_agent::deviceplugin
