// The DRA health stream (NodeWatchResources, in the packages v1, v1beta1
// and v1alpha1, which share v1alpha1's messages): the devices' health as
// the agent last set it, sent on every open stream at once, again after
// each change, and again health_resend after the last while a stream is
// open (the heartbeat: the kubelet takes a device it has heard nothing of
// for 30 s as of unknown health).
#ifndef GPU_AGENT_DRA_HEALTH_STREAM_H_
#define GPU_AGENT_DRA_HEALTH_STREAM_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dra/dra_server.h"
#include "dra/health_v1.grpc.pb.h"
#include "dra/health_v1alpha1.grpc.pb.h"
#include "dra/health_v1beta1.grpc.pb.h"
#include "grpcserver/cq_server.h"
#include "grpcserver/stream_call.h"

namespace gpu_agent::dra {

// The health services of the three packages, for one server.
struct HealthServices {
  ::v1::DRAResourceHealth::AsyncService v1;
  ::v1beta1::DRAResourceHealth::AsyncService v1beta1;
  ::v1alpha1::DRAResourceHealth::AsyncService v1alpha1;
};

// The health list and the streams open on it.
class HealthBoard {
 public:
  using Stream = grpcserver::StreamCall<::v1alpha1::NodeWatchResourcesRequest,
                                        ::v1alpha1::NodeWatchResourcesResponse>;

  HealthBoard(std::string driver_name, std::chrono::milliseconds resend);
  ~HealthBoard();
  HealthBoard(const HealthBoard&) = delete;
  HealthBoard& operator=(const HealthBoard&) = delete;

  // Asks `server` for a NodeWatchResources call of each version.
  void Ask(grpcserver::CqServer& server, HealthServices& services);

  // Replaces the devices reported; streams open get the new list.
  void Set(std::vector<DeviceHealthRecord> devices);
  // Whether this instance serves the stream: while it does not, the streams
  // open are ended and new ones refused UNAVAILABLE.
  void SetServing(bool serving);
  // Shutting down: the streams open are finished, new ones refused.
  void CloseAll();

  // Sends the list again on every stream when the heartbeat is due; returns
  // when it is next due (max: no stream open).
  std::chrono::steady_clock::time_point ResendIfDue();
  // Readable (an eventfd) when a stream opened: the heartbeat's due time is
  // to be asked again (ResendIfDue). Read it to clear it.
  int opened_fd() const { return opened_fd_; }

  size_t streams() const;
  uint64_t resends() const;

  // For the streams: a stream arrived (an error: refused, Close with it);
  // fills `out` unless `*sent` is the current version (then false); a
  // stream is done.
  grpc::Status Opened(const std::shared_ptr<Stream>& stream);
  bool Fill(uint64_t* sent, ::v1alpha1::NodeWatchResourcesResponse* out) const;
  void Ended(Stream* stream);

 private:
  grpc::Status NotServing() const;
  // REQUIRES: mu_ held. The current list is due on every stream; returns
  // them, for the caller to Pump without the lock.
  std::vector<std::shared_ptr<Stream>> PublishLocked();
  // REQUIRES: mu_ held. Takes every stream out of the set.
  std::vector<std::shared_ptr<Stream>> TakeAllLocked();

  const std::string driver_name_;
  const std::chrono::milliseconds resend_;
  int opened_fd_ = -1;

  mutable std::mutex mu_;
  std::vector<DeviceHealthRecord> health_;              // protected by mu_
  std::chrono::system_clock::time_point updated_;       // protected by mu_
  uint64_t version_ = 1;                                // protected by mu_
  std::map<Stream*, std::shared_ptr<Stream>> streams_;  // protected by mu_
  std::chrono::steady_clock::time_point published_;     // protected by mu_
  uint64_t resends_ = 0;                                // protected by mu_
  bool closed_ = false;                                 // protected by mu_
  bool serving_ = true;                                 // protected by mu_
};

}  // namespace gpu_agent::dra

#endif  // GPU_AGENT_DRA_HEALTH_STREAM_H_
