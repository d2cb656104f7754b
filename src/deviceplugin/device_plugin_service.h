// The DevicePlugin service's handlers and stream bookkeeping for one
// resource; the gRPC transport is PluginServer's.
#ifndef GPU_AGENT_DEVICEPLUGIN_DEVICE_PLUGIN_SERVICE_H_
#define GPU_AGENT_DEVICEPLUGIN_DEVICE_PLUGIN_SERVICE_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <iterator>
#include <memory>

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

// The DevicePlugin service's logic for one resource, apart from the
// transport (PluginServer drives it from its completion queue): the unary
// calls answer from the current snapshot without locks on the hot path,
// and the open ListAndWatch streams are counted here.
class DevicePluginService {
 public:
  DevicePluginService(std::shared_ptr<DevicePublisher> publisher,
                      std::shared_ptr<const Allocator> allocator);

  grpc::Status GetDevicePluginOptions(v1beta1::DevicePluginOptions* response) const;
  grpc::Status Allocate(const v1beta1::AllocateRequest& request,
                        v1beta1::AllocateResponse* response);
  grpc::Status GetPreferredAllocation(const v1beta1::PreferredAllocationRequest& request,
                                      v1beta1::PreferredAllocationResponse* response);
  grpc::Status PreStartContainer(const v1beta1::PreStartContainerRequest& request,
                                 v1beta1::PreStartContainerResponse* response) const;

  DevicePublisher& publisher() const { return *publisher_; }

  // Called, without locks held, after a ListAndWatch stream opens or ends.
  // Set before the service is served.
  void SetStreamObserver(std::function<void()> observer) { observer_ = std::move(observer); }
  // The transport says a stream opened (the kubelet called ListAndWatch) or
  // ended (gRPC is done with it). Each calls the observer.
  void StreamOpened();
  void StreamEnded();

  // Finishes every open ListAndWatch stream (after its write in flight).
  void FinishStreams();
  size_t OpenStreams() const { return open_streams_.load(); }
  const ServiceStats& stats() const { return stats_; }

 private:
  const std::shared_ptr<DevicePublisher> publisher_;
  const std::shared_ptr<const Allocator> allocator_;
  ServiceStats stats_;
  std::function<void()> observer_;
  std::atomic<size_t> open_streams_{0};
};

// Builds the ListAndWatch message for a snapshot.
void FillListAndWatch(const DeviceSnapshot& snap, v1beta1::ListAndWatchResponse* out);

}  // namespace gpu_agent::deviceplugin

#endif  // GPU_AGENT_DEVICEPLUGIN_DEVICE_PLUGIN_SERVICE_H_
