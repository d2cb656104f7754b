#include "agent/cli/capacity_command.h"

#include <cstdio>
#include <utility>

#include "agent/config/api_connection.h"
#include "agent/plan/generation.h"
#include "apiserver/node_client.h"
#include "base/exit_code.h"
#include "base/json.h"
#include "base/resource_name.h"
#include "base/strings.h"
#include "deviceplugin/health_ledger.h"

namespace gpu_agent {
namespace {

int Fail(int code, const std::string& msg) {
  std::fprintf(stderr, "gpu-agent capacity: %s\n", msg.c_str());
  return code;
}

// Healthy devices of `resource`, as static mode would advertise them (MIG
// strategy, device selection and time-slicing applied).
absl::StatusOr<int64_t> DiscoverCount(const LoadedConfig& loaded, const std::string& resource) {
  GenerationOptions counting;
  counting.plan = GenerationOptions::Plan::kAdvertise;
  counting.cdi = GenerationOptions::Cdi::kNever;
  absl::StatusOr<std::shared_ptr<const Generation>> gen = DiscoverGeneration(loaded, counting);
  if (!gen.ok()) return gen.status();
  const ResourcePlan& plan = (*gen)->plan;
  std::vector<std::string> names;
  for (const deviceplugin::ResourceSpec& r : plan.resources) {
    names.push_back(r.resource_name);
    if (r.resource_name != resource) continue;
    return static_cast<int64_t>(deviceplugin::CountHealthy(r.devices));
  }
  if (plan.resources.empty()) return 0;
  return absl::InvalidArgumentError(StrCat("this node advertises no ", resource,
                                           " (its resources: ", StrJoin(names, ", "),
                                           "); pick one with --resource"));
}

// `get -o json`'s line: {"node", "resource", "capacity", "allocatable"},
// each quantity a string or null.
std::string GetAsJson(const std::string& node, const std::string& resource,
                      const std::optional<std::string>& capacity,
                      const std::optional<std::string>& allocatable) {
  rapidjson::StringBuffer buf;
  json::Writer w(buf);
  w.StartObject();
  w.Key("node");
  json::WriteString(w, node);
  w.Key("resource");
  json::WriteString(w, resource);
  for (const auto& [key, value] :
       {std::pair{"capacity", &capacity}, {"allocatable", &allocatable}}) {
    w.Key(key);
    if (*value) {
      json::WriteString(w, **value);
    } else {
      w.Null();
    }
  }
  w.EndObject();
  return StrCat(json::TextOf(buf), "\n");
}

// The count `capacity set` writes: --count K, or --discover's count of the
// healthy devices of `resource`. kExitOk, or the exit code after saying why.
int CountToSet(const LoadedConfig& loaded, const CapacityRequest& req, const std::string& resource,
               int64_t* count) {
  if (req.count.has_value() == req.discover) {
    return Fail(kExitUsage, "capacity set needs exactly one of --count K and --discover");
  }
  if (req.count) {
    if (!ParseInt(*req.count, count) || *count < 0) {
      return Fail(kExitUsage,
                  StrCat("--count: \"", *req.count, "\" is not a whole number of 0 or more"));
    }
    return kExitOk;
  }
  absl::StatusOr<int64_t> found = DiscoverCount(loaded, resource);
  if (!found.ok()) return Fail(kExitFailure, std::string(found.status().message()));
  *count = *found;
  return kExitOk;
}

using ApiClient = absl::StatusOr<std::unique_ptr<apiserver::RestClient>>;

// --dry-run: prints the request instead of sending it. It needs no server:
// without a connection it is printed with the path only, and stderr says
// why the server is not named.
int PrintRequest(const CapacityRequest& req, const ApiClient& rest,
                 const apiserver::NodeClient& client, const std::string& resource, int64_t count,
                 bool allocatable) {
  auto describe = [&](const std::string& method, const std::string& path, const std::string& body,
                      const std::string& type) {
    if (rest.ok()) return (*rest)->Describe(method, path, body, type);
    std::string out = StrCat(method, " ", path, "\n");
    if (!type.empty()) StrAppend(&out, "Content-Type: ", type, "\n");
    if (!body.empty()) StrAppend(&out, "\n", body, "\n");
    return out;
  };
  if (!rest.ok()) {
    std::fprintf(stderr, "gpu-agent capacity: note: --dry-run without an API server (%s)\n",
                 std::string(rest.status().message()).c_str());
  }
  if (req.verb == "get") {
    std::printf("%s", describe("GET", client.NodePath(), "", "").c_str());
    return kExitOk;
  }
  // Without asking the server, plan against a Node that has both maps.
  apiserver::NodeView assumed;
  assumed.has_status = assumed.has_capacity = assumed.has_allocatable = true;
  apiserver::JsonPatch patch;
  if (req.verb == "set") {
    patch = apiserver::PlanSetCapacity(assumed, resource, count, allocatable);
  } else {
    assumed.capacity[resource] = assumed.allocatable[resource] = "0";
    patch = apiserver::PlanRemoveCapacity(assumed, resource, allocatable);
  }
  std::printf(
      "%s",
      describe("PATCH", client.StatusPath(), patch.ToJson(), apiserver::kJsonPatchType).c_str());
  return kExitOk;
}

// `capacity get`: the Node's capacity and allocatable of `resource`.
int PrintCapacity(apiserver::NodeClient& client, const CapacityRequest& req,
                  const std::string& node, const std::string& resource) {
  absl::StatusOr<apiserver::NodeView> view = client.Get();
  if (!view.ok()) return Fail(kExitFailure, std::string(view.status().message()));
  const auto cap = view->Capacity(resource);
  const auto alloc = view->Allocatable(resource);
  if (req.output == "json") {
    std::fputs(GetAsJson(node, resource, cap, alloc).c_str(), stdout);
  } else {
    std::printf("node %s, %s: capacity %s, allocatable %s\n", node.c_str(), resource.c_str(),
                cap ? cap->c_str() : "(none)", alloc ? alloc->c_str() : "(none)");
  }
  return kExitOk;
}

// `capacity set` / `remove`: read, plan, patch (re-read and re-planned if
// the Node moves on), and say what changed.
int ChangeCapacity(apiserver::NodeClient& client, const CapacityRequest& req,
                   const std::string& node, const std::string& resource, int64_t count,
                   bool allocatable) {
  absl::StatusOr<apiserver::NodeClient::Applied> applied =
      client.Apply([&](const apiserver::NodeView& n) {
        return req.verb == "set" ? apiserver::PlanSetCapacity(n, resource, count, allocatable)
                                 : apiserver::PlanRemoveCapacity(n, resource, allocatable);
      });
  if (!applied.ok()) return Fail(kExitFailure, std::string(applied.status().message()));
  if (!applied->patched) {
    std::printf("node %s: %s %s\n", node.c_str(), resource.c_str(),
                req.verb == "set" ? StrCat("is already ", count).c_str() : "is not set");
  } else if (req.verb == "set") {
    std::printf("node %s: %s capacity %s (was %s)\n", node.c_str(), resource.c_str(),
                StrCat(count).c_str(),
                applied->before.Capacity(resource).value_or("not set").c_str());
  } else {
    std::printf("node %s: %s removed\n", node.c_str(), resource.c_str());
  }
  return kExitOk;
}

}  // namespace

int CapacityCommand(const LoadedConfig& loaded, const CapacityRequest& req) {
  const Config& config = loaded.config;
  const std::string node = req.node.empty() ? config.node_name : req.node;
  if (node.empty()) return Fail(kExitUsage, "no node: pass --node or set NODE_NAME");
  if (absl::Status s = ValidateNodeName(node); !s.ok()) {
    return Fail(kExitUsage, StrCat("--node: ", s.message()));
  }
  const std::string resource = req.resource.empty() ? config.resource_name : req.resource;
  if (absl::Status s = ValidateExtendedResourceName(resource); !s.ok()) {
    return Fail(kExitUsage, StrCat("--resource: ", s.message()));
  }
  int64_t count = 0;
  if (req.verb == "set") {
    if (const int code = CountToSet(loaded, req, resource, &count); code != kExitOk) return code;
  }
  int exit_code = kExitFailure;
  ApiClient rest = CommandRestClient(config, &exit_code);
  if (!rest.ok() && !req.dry_run) return Fail(exit_code, std::string(rest.status().message()));
  apiserver::NodeClient client(rest.ok() ? rest->get() : nullptr, node);
  const bool allocatable = config.static_mode.allocatable;
  if (req.dry_run) return PrintRequest(req, rest, client, resource, count, allocatable);
  if (req.verb == "get") return PrintCapacity(client, req, node, resource);
  return ChangeCapacity(client, req, node, resource, count, allocatable);
}

}  // namespace gpu_agent
