// The DevicePlugin gRPC service for one resource, on the callback API:
// ListAndWatch is a write reactor fed by the DevicePublisher (one write in
// flight, newer snapshots coalesced, Finish exactly once); the unary calls
// answer from the current snapshot without locks on the hot path.
#ifndef GPU_AGENT_DEVICEPLUGIN_DEVICE_PLUGIN_SERVICE_H_
#define GPU_AGENT_DEVICEPLUGIN_DEVICE_PLUGIN_SERVICE_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <iterator>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "deviceplugin/allocator.h"
#include "deviceplugin/api.grpc.pb.h"
#include "deviceplugin/device_publisher.h"

namespace gpu_agent::deviceplugin {

// Counters an operator or a test can read. All monotonic.
struct ServiceStats {
  std::atomic<uint64_t> allocate_calls{0};
  std::atomic<uint64_t> allocate_errors{0};
  std::atomic<uint64_t> preferred_calls{0};
  std::atomic<uint64_t> preferred_errors{0};
  std::atomic<uint64_t> streams_opened{0};
  // Allocate handling time, server side: counts per upper bound (µs), and
  // the sum in ns. The last bucket is +Inf.
  static constexpr uint64_t kBucketsUs[] = {25, 50, 100, 250, 500, 1000, 2500, 10000};
  std::atomic<uint64_t> allocate_latency_buckets[std::size(kBucketsUs) + 1] = {};
  std::atomic<uint64_t> allocate_latency_ns_sum{0};
  void ObserveAllocate(uint64_t ns) {
    const uint64_t us = ns / 1000;
    size_t i = 0;
    while (i < std::size(kBucketsUs) && us > kBucketsUs[i]) ++i;
    ++allocate_latency_buckets[i];
    allocate_latency_ns_sum += ns;
  }
};

class DevicePluginService final : public v1beta1::DevicePlugin::CallbackService {
 public:
  DevicePluginService(std::shared_ptr<DevicePublisher> publisher,
                      std::shared_ptr<const Allocator> allocator);
  ~DevicePluginService() override;

  grpc::ServerUnaryReactor* GetDevicePluginOptions(grpc::CallbackServerContext* ctx,
                                                   const v1beta1::Empty* request,
                                                   v1beta1::DevicePluginOptions* response) override;
  grpc::ServerWriteReactor<v1beta1::ListAndWatchResponse>* ListAndWatch(
      grpc::CallbackServerContext* ctx, const v1beta1::Empty* request) override;
  grpc::ServerUnaryReactor* GetPreferredAllocation(
      grpc::CallbackServerContext* ctx, const v1beta1::PreferredAllocationRequest* request,
      v1beta1::PreferredAllocationResponse* response) override;
  grpc::ServerUnaryReactor* Allocate(grpc::CallbackServerContext* ctx,
                                     const v1beta1::AllocateRequest* request,
                                     v1beta1::AllocateResponse* response) override;
  grpc::ServerUnaryReactor* PreStartContainer(
      grpc::CallbackServerContext* ctx, const v1beta1::PreStartContainerRequest* request,
      v1beta1::PreStartContainerResponse* response) override;

  // Called, without locks held, after a ListAndWatch stream opens or ends.
  // Set before the service is served.
  void SetStreamObserver(std::function<void()> observer) { observer_ = std::move(observer); }

  // Finishes every open ListAndWatch stream (after its write in flight).
  void FinishStreams();
  size_t OpenStreams() const;
  const ServiceStats& stats() const { return stats_; }

  class StreamReactor;

 private:
  friend class StreamReactor;
  void Forget(StreamReactor* reactor);

  const std::shared_ptr<DevicePublisher> publisher_;
  const std::shared_ptr<const Allocator> allocator_;
  ServiceStats stats_;
  std::function<void()> observer_;

  mutable std::mutex streams_mu_;
  // Owns each open stream until gRPC calls its OnDone.
  std::unordered_map<StreamReactor*, std::shared_ptr<StreamReactor>> streams_;
  // Streams gRPC is done with, freed later (see Forget).
  std::vector<std::shared_ptr<StreamReactor>> finished_;
};

// Builds the ListAndWatch message for a snapshot.
void FillListAndWatch(const DeviceSnapshot& snap, v1beta1::ListAndWatchResponse* out);

}  // namespace gpu_agent::deviceplugin

#endif  // GPU_AGENT_DEVICEPLUGIN_DEVICE_PLUGIN_SERVICE_H_
