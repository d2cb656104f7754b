// Moving the running agent between plugin and DRA mode when the node's
// config label names a config of the other mode: what is checked before
// the running mode lets go of the node, and the record that outlives a
// restart in the middle of a move.
//
// Plugin to DRA: the device plugin unregisters (its sockets go; the kubelet
// marks its devices unhealthy, so the node's allocatable nvidia.com/gpu
// drops to 0 and the scheduler sends such pods through DRA's
// extended-resource claims); DRA mode starts at once and keeps the GPUs that
// running pods hold through the device plugin (the kubelet's PodResources)
// out of its slices until those pods end (held_watch.h). DRA to plugin: the
// slices are deleted, and GPUs still prepared for claims are streamed
// unhealthy to the device manager, while the claims are unprepared, until
// none is left (dra_drain.h).
#ifndef GPU_AGENT_AGENT_RUN_MODE_SWITCH_H_
#define GPU_AGENT_AGENT_RUN_MODE_SWITCH_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "agent/plan/generation.h"

namespace gpu_agent {

// Whether `next`'s mode can be served here, asked before the running mode
// lets go: DRA mode needs this node's name and an API server that serves
// resource.k8s.io (v1, v1beta2 or v1beta1); plugin mode, the kubelet's
// device-plugin registration socket. The error says what is missing.
absl::Status CanServe(const Generation& next);

// CanServe(next), and the two configs agree on where DRA keeps its state
// (dra.driverName, dra.pluginDir, dra.registryDir, cdi.specDir,
// cdi.vendor): the move is recorded, and the claims prepared under DRA are
// found, there, by either mode. From plugin to DRA mode, the kubelet's
// PodResources must answer too: an Unavailable error while it does not,
// which passes (the switch waits for it; a GPU of unknown state is never
// offered, and meanwhile the device plugin keeps serving).
absl::Status CanSwitch(const Generation& running, const Generation& next);

// Sets the Node's allocatable of `resources` (those the device plugin
// served) to 0. The kubelet marks a gone plugin's devices unhealthy at once
// but tells the API server only at its next status sync (every 10 s by
// default); until then the scheduler still sends such pods down the device
// plugin's path, where the kubelet refuses them (UnexpectedAdmissionError).
// With allocatable at 0 the scheduler sends them through DRA (a DeviceClass
// with extendedResourceName) once DRA's slices are there; the kubelet's own
// next sync computes 0 too, so the value stays. Called right after the
// plugin unregistered; DRA mode then publishes its slices once the kubelet
// has its registration (a claim the kubelet could not prepare for want of
// it waits for its pod's next resync, a minute). Errors name the node and
// the answer.
absl::Status ReleaseAllocatable(const Config& config, const std::vector<std::string>& resources);

// The record of a move to DRA mode whose device-plugin pods may still hold
// GPUs: <dra.pluginDir>/<driver>/handover, written when the move starts and
// removed once nothing is held, so that an agent restarted meanwhile goes on
// keeping the held GPUs out (and never offers a GPU of unknown state).
std::string HandoverRecordPath(const Config& config);
bool HandoverRecorded(const Config& config);
// Errors name the file.
absl::Status RecordHandover(const Config& config, const std::string& from);
// Removes the record at `path` (HandoverRecordPath).
void EndHandoverRecord(const std::string& path);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_RUN_MODE_SWITCH_H_
