// The DRA side of a node that moved from DRA mode to the device plugin,
// while claims prepared under DRA are still in use: the kubelet unprepares
// a claim only through a registered DRA plugin, and the device plugin must
// not hand out a GPU a claim still holds (the kubelet's device manager
// knows nothing of claims). So plugin mode, when DRA's checkpoint holds
// claims (after a switch in this process, or at a start that finds them),
// runs this drain beside it:
//  - the DRA plugin stays registered, with no slices: prepare answers a
//    claim already prepared as before and refuses any other, saying the
//    node has moved to the device plugin; unprepare is served;
//  - the GPUs the claims hold (by physical GPU) are reported, for the
//    device plugin to stream unhealthy, until they are unprepared;
//  - once no claim is left, the plugin unregisters and the drain ends.
// The checkpoint keeps the claims across a restart; a restart drains again.
#ifndef GPU_AGENT_AGENT_RUN_DRA_DRAIN_H_
#define GPU_AGENT_AGENT_RUN_DRA_DRAIN_H_

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "agent/config/config.h"
#include "agent/plan/generation.h"
#include "dra/claim_preparer.h"
#include "dra/dra_server.h"
#include "dra/slice_publisher.h"
#include "nvml/inventory.h"

namespace gpu_agent {

// DRA mode's preparer and server settings, the drain's too.
dra::PreparerOptions PreparerOptionsOf(const Config& config, const std::string& pool);
dra::DraServerOptions ServerOptionsOf(const Config& config);
// The DRA catalog of `gen`'s devices and their CDI edits.
std::shared_ptr<const dra::DeviceCatalog> CatalogOf(const Generation& gen);

class DraDrain {
 public:
  // GPU UUID -> the claims that hold it ("DRA claims ml/a, ml/b"); empty
  // once none is left.
  using Report = std::function<void(const std::map<std::string, std::string>& holders)>;

  // Null when DRA's checkpoint holds no claim (or there is none). The first
  // report is made before it returns; later ones on the unprepare's thread.
  // An error (the checkpoint cannot be read, the DRA plugin cannot be
  // served) is logged by the caller; the GPUs of the claims the checkpoint
  // names are still reported held when it could be read.
  static std::unique_ptr<DraDrain> StartIfNeeded(const Generation& gen, Report report);
  ~DraDrain();
  DraDrain(const DraDrain&) = delete;
  DraDrain& operator=(const DraDrain&) = delete;

  // Unregisters if it has not yet (the claims left stay in the checkpoint).
  void Stop();
  std::map<std::string, std::string> holders() const;

 private:
  DraDrain(nvml::Inventory inventory, std::vector<std::string> gpus, Report report);
  class Handler;
  // The physical GPU (UUID) of a prepared device, by its UUID (a GPU's or
  // one of its MIG devices') or its DRA name, from the inventory, whatever
  // the plugin's config cuts the GPU into; "" when no GPU of the node is it.
  std::string GpuOf(const dra::PreparedClaim::Device& device) const;
  // REQUIRES: mu_ held. holders_ and claims_ from the checkpoint now.
  void UpdateLocked();
  // Hands holders_, as it is when the report is made, to `report_`.
  void ReportHolders();
  // After an unprepare: reports what is held now; wakes the thread to
  // unregister once no claim is left.
  void Unprepared();
  // Keeps the node's ResourceSlices of the driver deleted while the
  // drain runs (an agent stopped midway may have left them; the kubelet
  // deletes a driver's slices only once it has been gone a while).
  void WithdrawSlices(const Config& config);
  void StopPublisher();
  void Run();

  const nvml::Inventory inventory_;
  const std::vector<std::string> gpus_;  // the model's GPUs, by UUID
  const Report report_;
  std::shared_ptr<dra::ClaimPreparer> preparer_;  // null when the claims could not be read
  std::unique_ptr<dra::DraServer> server_;
  std::mutex report_mu_;  // one report at a time
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> holders_;      // protected by mu_
  size_t claims_ = 0;                               // protected by mu_: claims left
  bool stop_ = false;                               // protected by mu_
  std::unique_ptr<dra::SlicePublisher> publisher_;  // protected by mu_: deletes the slices
  std::thread thread_;
};

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_RUN_DRA_DRAIN_H_
