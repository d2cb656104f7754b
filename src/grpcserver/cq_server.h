// One gRPC server for the kubelet on one unix socket, on gRPC's
// completion-queue API, driven by one thread of its own that blocks with no
// deadline: idle, it never wakes. (The callback API adds gRPC's "nexting"
// threads, which wake a few times a second each and grow with the core
// count: bench/RESULTS.md, "One gRPC server model".)
//
// The socket's guard is here too: its path is checked and made ready before
// gRPC binds it (PrepareSocketPath), the socket is made 0600 once bound, and
// on shutdown it is removed only if it is still the one this server made
// (after a kubelet restart the path may hold someone else's).
#ifndef GPU_AGENT_GRPCSERVER_CQ_SERVER_H_
#define GPU_AGENT_GRPCSERVER_CQ_SERVER_H_

#include <grpcpp/grpcpp.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"

namespace gpu_agent::grpcserver {

class CqServer {
 public:
  // One call's state on the queue. Each operation in flight carries a Tag
  // naming the call and the step (the call's own numbering) it completes.
  class Call {
   public:
    struct Tag {
      Call* call;
      int step;
    };
    virtual ~Call() = default;
    // Runs on the queue's thread. `ok` is the operation's outcome.
    virtual void Proceed(int step, bool ok) = 0;
  };

  struct Options {
    std::string socket_path;
    std::string settings;     // what sets the path, named when it is too long
    std::string thread_name;  // the queue thread's name (15 characters at most)
  };

  // Serves `services` (async services, which outlive the server) on the
  // socket; `ask` asks gRPC for the first call of each method before the
  // queue's thread starts. Returns once the socket accepts calls. Errors name
  // the socket and why (path too long, folder missing, served by another
  // process, gRPC could not bind).
  static absl::StatusOr<std::unique_ptr<CqServer>> Start(
      const Options& options, const std::vector<grpc::Service*>& services,
      const std::function<void(CqServer&)>& ask);

  // Shuts down now if still running.
  ~CqServer();
  CqServer(const CqServer&) = delete;
  CqServer& operator=(const CqServer&) = delete;

  // Runs `start`, which starts one operation on the queue, unless the queue
  // is shut; false then (gRPC aborts on an operation started on a shut
  // queue).
  template <class F>
  bool StartOp(F&& start) {
    std::lock_guard<std::mutex> lock(ops_mu_);
    if (!cq_open_) return false;
    start();
    return true;
  }
  grpc::ServerCompletionQueue* cq() const { return cq_.get(); }

  // No new call is asked for from here on (a call that arrives still runs).
  void StopAsking() { shutting_down_ = true; }
  bool shutting_down() const { return shutting_down_; }

  // Calls arrived and not yet freed: counted by the calls themselves.
  void CallArrived() { ++open_calls_; }
  void CallFreed();
  size_t open_calls() const { return open_calls_.load(); }
  // Waits until no call is open or `until`; true when none is.
  bool WaitForCalls(std::chrono::steady_clock::time_point until);

  // Owns a stream call until gRPC is done with it (Forget).
  void Keep(std::shared_ptr<Call> call);
  void Forget(Call* call);
  std::shared_ptr<Call> Kept(Call* call);

  // gRPC's shutdown: the calls in flight get until `deadline`, then are
  // cancelled; then the queue is shut and drained (its thread ends) and the
  // socket removed if it is still ours. Once only; later calls do nothing.
  void Shutdown(std::chrono::system_clock::time_point deadline);

  const std::string& socket_path() const { return socket_path_; }
  // Inode of the socket file this server created; a different inode at the
  // path means someone replaced or removed it.
  ino_t socket_inode() const { return inode_; }

 private:
  explicit CqServer(std::string socket_path) : socket_path_(std::move(socket_path)) {}
  // The queue's thread: runs every call's next step.
  void Drive();

  const std::string socket_path_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  std::thread driver_;
  ino_t inode_ = 0;
  bool shut_ = false;
  std::atomic<bool> shutting_down_{false};
  std::atomic<size_t> open_calls_{0};
  std::mutex ops_mu_;    // held while an operation starts
  bool cq_open_ = true;  // protected by ops_mu_

  std::mutex drain_mu_;  // with drain_cv_: WaitForCalls
  std::condition_variable drain_cv_;

  std::mutex kept_mu_;
  std::unordered_map<Call*, std::shared_ptr<Call>> kept_;  // protected by kept_mu_
};

}  // namespace gpu_agent::grpcserver

#endif  // GPU_AGENT_GRPCSERVER_CQ_SERVER_H_
