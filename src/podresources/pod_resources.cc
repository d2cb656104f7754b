#include "podresources/pod_resources.h"

#include <grpcpp/grpcpp.h>

#include <utility>

#include "base/strings.h"
#include "podresources/api.grpc.pb.h"

namespace gpu_agent::podresources {
namespace {

// The most a List answer may take: the kubelet's own PodResources clients
// allow the same, enough for a few thousand containers with devices. A
// larger answer is refused by gRPC, not read.
constexpr int kMaxAnswerBytes = 16 * 1024 * 1024;

std::string Where(const std::string& pod, const std::string& container) {
  return StrCat("pod ", pod, ", container \"", container, "\"");
}

absl::Status ReadContainer(const std::string& pod, const v1::ContainerResources& c,
                           PodResources* out) {
  const std::string& name = c.name();
  for (const v1::ContainerDevices& d : c.devices()) {
    if (d.resource_name().empty()) {
      return absl::InvalidArgumentError(
          StrCat(Where(pod, name), ": a device list without a resource name"));
    }
    for (const std::string& id : d.device_ids()) {
      if (id.empty()) {
        return absl::InvalidArgumentError(
            StrCat(Where(pod, name), ": an empty device ID of ", d.resource_name()));
      }
      out->devices.push_back({pod, name, d.resource_name(), id});
    }
  }
  for (const v1::DynamicResource& r : c.dynamic_resources()) {
    const std::string claim = StrCat(r.claim_namespace(), "/", r.claim_name());
    if (r.claim_name().empty()) {
      return absl::InvalidArgumentError(StrCat(Where(pod, name), ": a claim without a name"));
    }
    for (const v1::ClaimResource& cr : r.claim_resources()) {
      if (cr.driver_name().empty() || cr.device_name().empty()) {
        return absl::InvalidArgumentError(StrCat(Where(pod, name), ", claim ", claim,
                                                 ": a device without driver or device name"));
      }
      out->claim_devices.push_back({pod, name, claim, cr.driver_name(), cr.pool_name(),
                                    cr.device_name(), cr.has_share_id() ? cr.share_id() : ""});
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PodResources> FromListResponse(const v1::ListPodResourcesResponse& response) {
  PodResources out;
  for (const v1::PodResources& p : response.pod_resources()) {
    if (p.name().empty()) {
      return absl::InvalidArgumentError(
          StrCat("a pod without a name (namespace \"", p.namespace_(), "\")"));
    }
    const std::string pod = StrCat(p.namespace_(), "/", p.name());
    for (const v1::ContainerResources& c : p.containers()) {
      if (absl::Status s = ReadContainer(pod, c, &out); !s.ok()) return s;
    }
    ++out.pods;
  }
  return out;
}

std::string DefaultSocket(const std::string& kubelet_root) {
  return StrCat(kubelet_root, "/pod-resources/kubelet.sock");
}

absl::StatusOr<PodResources> List(const std::string& socket, std::chrono::milliseconds deadline) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxAnswerBytes);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  auto stub = v1::PodResourcesLister::NewStub(
      grpc::CreateCustomChannel("unix://" + socket, grpc::InsecureChannelCredentials(), args));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + deadline);
  v1::ListPodResourcesResponse response;
  const grpc::Status status = stub->List(&ctx, v1::ListPodResourcesRequest(), &response);
  const std::string what = StrCat("the kubelet's PodResources List on ", socket);
  if (!status.ok()) {
    switch (status.error_code()) {
      case grpc::StatusCode::DEADLINE_EXCEEDED:
        return absl::DeadlineExceededError(
            StrCat(what, " did not answer within ", deadline.count(), " ms"));
      case grpc::StatusCode::UNAVAILABLE:
        return absl::UnavailableError(StrCat(what, ": cannot reach it: ", status.error_message()));
      case grpc::StatusCode::RESOURCE_EXHAUSTED:
        return absl::ResourceExhaustedError(
            StrCat(what, ": answer over ", kMaxAnswerBytes, " bytes: ", status.error_message()));
      default:
        return absl::InternalError(StrCat(what, " failed (gRPC code ",
                                          static_cast<int>(status.error_code()),
                                          "): ", status.error_message()));
    }
  }
  absl::StatusOr<PodResources> out = FromListResponse(response);
  if (!out.ok()) {
    return absl::InvalidArgumentError(StrCat(what, ": ", out.status().message()));
  }
  return out;
}

}  // namespace gpu_agent::podresources
