#include "grpcserver/cq_server.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <random>

#include "base/file_util.h"
#include "base/socket_path.h"
#include "base/strings.h"
#include "base/thread_name.h"

namespace gpu_agent::grpcserver {
namespace {

// gRPC removes the path it listens on when it shuts down, whoever's file the
// path names by then (grpc/grpc#17122). So it listens on a private name
// beside the socket, linked to the socket's path once bound and then
// removed: the socket's path is this server's alone to remove. Hidden (the
// kubelet's plugin watcher skips dot files); empty when the folder leaves no
// room for it under kMaxSocketPath (gRPC then listens on the path itself).
std::string PrivatePath(const std::string& path) {
  static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937 rng{std::random_device{}()};
  std::string out = StrCat(path.substr(0, path.rfind('/') + 1), ".s");
  for (int i = 0; i < 6; ++i) out += kChars[rng() % (sizeof kChars - 1)];
  return out.size() <= kMaxSocketPath ? out : "";
}

// Gives the socket gRPC bound at `bound` the name `path` (not replacing a
// file that appeared there meanwhile).
absl::Status LinkSocket(const std::string& bound, const std::string& path) {
  const int rc = ::link(bound.c_str(), path.c_str());
  const int err = errno;
  ::unlink(bound.c_str());
  if (rc == 0) return absl::OkStatus();
  return absl::FailedPreconditionError(
      StrCat("cannot make socket \"", path, "\": ", std::strerror(err),
             err == EEXIST ? " (another process made it meanwhile)" : ""));
}

}  // namespace

absl::StatusOr<std::unique_ptr<CqServer>> CqServer::Start(
    const Options& options, const std::vector<grpc::Service*>& services,
    const std::function<void(CqServer&)>& ask) {
  if (absl::Status s = PrepareSocketPath(options.socket_path, options.settings); !s.ok()) return s;
  std::unique_ptr<CqServer> self(new CqServer(options.socket_path));
  grpc::ServerBuilder builder;
  const std::string bound = PrivatePath(options.socket_path);
  builder.AddListeningPort("unix://" + (bound.empty() ? options.socket_path : bound),
                           grpc::InsecureServerCredentials());
  for (grpc::Service* s : services) builder.RegisterService(s);
  // No keepalive or BDP pings on a local unix socket: a dead kubelet closes
  // the socket, which gRPC sees at once.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, std::numeric_limits<int>::max());
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  self->cq_ = builder.AddCompletionQueue();
  self->server_ = builder.BuildAndStart();
  if (self->server_ == nullptr) {
    self->shut_ = true;     // nothing to shut down: the destructor leaves it
    self->cq_->Shutdown();  // nothing was asked of it: drained at once
    void* tag;
    bool ok;
    while (self->cq_->Next(&tag, &ok)) {
    }
    return absl::UnavailableError(StrCat("cannot serve on \"", options.socket_path,
                                         "\" (gRPC could not bind; see its log above)"));
  }
  ask(*self);
  CqServer* raw = self.get();
  self->driver_ = std::thread([raw, name = options.thread_name] {
    NameThisThread(name);
    raw->Drive();
  });
  if (!bound.empty()) {
    if (absl::Status s = LinkSocket(bound, options.socket_path); !s.ok()) {
      self->Shutdown(std::chrono::system_clock::now());
      return s;
    }
  }
  self->inode_ = InodeOf(options.socket_path);
  if (absl::Status s = SecureSocket(options.socket_path); !s.ok()) {
    self->Shutdown(std::chrono::system_clock::now());
    return s;
  }
  return self;
}

CqServer::~CqServer() { Shutdown(std::chrono::system_clock::now()); }

void CqServer::CallFreed() {
  --open_calls_;
  if (!shutting_down_) return;  // only a shutdown waits for the calls to end
  { std::lock_guard<std::mutex> lock(drain_mu_); }
  drain_cv_.notify_all();
}

bool CqServer::WaitForCalls(std::chrono::steady_clock::time_point until) {
  std::unique_lock<std::mutex> lock(drain_mu_);
  return drain_cv_.wait_until(lock, until, [this] { return open_calls_.load() == 0; });
}

void CqServer::Keep(std::shared_ptr<Call> call) {
  std::lock_guard<std::mutex> lock(kept_mu_);
  Call* raw = call.get();
  kept_.emplace(raw, std::move(call));
}

void CqServer::Forget(Call* call) {
  std::shared_ptr<Call> last;  // freed outside the lock
  std::lock_guard<std::mutex> lock(kept_mu_);
  auto it = kept_.find(call);
  if (it == kept_.end()) return;
  last = std::move(it->second);
  kept_.erase(it);
}

std::shared_ptr<CqServer::Call> CqServer::Kept(Call* call) {
  std::lock_guard<std::mutex> lock(kept_mu_);
  auto it = kept_.find(call);
  return it == kept_.end() ? nullptr : it->second;
}

void CqServer::Drive() {
  void* tag;
  bool ok;
  while (cq_->Next(&tag, &ok)) {
    auto* t = static_cast<Call::Tag*>(tag);
    t->call->Proceed(t->step, ok);
  }
}

void CqServer::Shutdown(std::chrono::system_clock::time_point deadline) {
  if (shut_) return;
  shut_ = true;
  shutting_down_ = true;
  server_->Shutdown(deadline);
  {
    // From here no operation starts on the queue; a call that would start
    // one counts it as done.
    std::lock_guard<std::mutex> lock(ops_mu_);
    cq_open_ = false;
    cq_->Shutdown();
  }
  if (driver_.joinable()) driver_.join();  // every call's last step has run
  if (inode_ != 0 && InodeOf(socket_path_) == inode_) ::unlink(socket_path_.c_str());
}

}  // namespace gpu_agent::grpcserver
