#include "agent/cli/plan_report.h"

#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>
#include <yaml-cpp/yaml.h>

#include <set>
#include <vector>

#include "base/strings.h"
#include "deviceplugin/health_ledger.h"

namespace gpu_agent {
namespace {

struct ResourceView {
  std::string name;
  std::string endpoint;  // empty: not served (static mode)
  size_t devices = 0;    // advertised: the capacity plugin mode reports
  size_t healthy = 0;
  size_t units = 0;     // GPUs or MIG devices behind them
  size_t replicas = 1;  // per unit
  std::vector<std::string> ids;
};

struct PlanView {
  std::string mode;
  std::vector<ResourceView> resources;
  bool has_cdi = false;
  std::string cdi_kind;
  std::vector<std::string> cdi_devices;
  std::vector<std::string> dra_devices;  // DRA mode: the devices its slices publish
};

PlanView ViewOf(const Generation& gen) {
  PlanView v;
  v.mode = gen.config().mode;
  const bool serving = gen.config().agent_mode() != AgentMode::kStatic;
  for (const deviceplugin::ResourceSpec& r : gen.plan.resources) {
    ResourceView rv;
    rv.name = r.resource_name;
    if (serving) rv.endpoint = r.endpoint;
    std::set<std::string> units;
    for (const deviceplugin::PluginDevice& d : r.devices) {
      rv.ids.push_back(d.id);
      units.insert(d.gpu_id);
    }
    rv.healthy = deviceplugin::CountHealthy(r.devices);
    rv.devices = r.devices.size();
    rv.units = units.size();
    rv.replicas = rv.units == 0 ? 1 : rv.devices / rv.units;
    v.resources.push_back(std::move(rv));
  }
  if (gen.config().agent_mode() == AgentMode::kDra) {
    for (const DeviceUnit& u : gen.model.units) v.dra_devices.push_back(u.name);
  }
  if (gen.cdi) {
    v.has_cdi = true;
    v.cdi_kind = gen.cdi->spec.kind;
    for (const cdi::Device& d : gen.cdi->spec.devices) v.cdi_devices.push_back(d.name);
  }
  return v;
}

std::string AsText(const PlanView& v) {
  std::string out =
      StrCat("# what `gpu-agent run` would advertise on this node (mode ", v.mode, ")\n");
  if (v.resources.empty() && v.mode != "dra") StrAppend(&out, "no resources\n");
  if (v.mode == "dra") {
    StrAppend(&out,
              "dra\n  devices:  ", v.dra_devices.empty() ? "none" : StrJoin(v.dra_devices, " "),
              "\n");
  }
  for (const ResourceView& r : v.resources) {
    StrAppend(&out, r.name, "\n");
    if (!r.endpoint.empty()) StrAppend(&out, "  endpoint: ", r.endpoint, "\n");
    StrAppend(&out, "  devices:  ", r.devices, " (", r.healthy, " healthy)\n");
    StrAppend(&out, "  units:    ", r.units, " x ", r.replicas, " replica",
              r.replicas == 1 ? "" : "s", "\n");
    StrAppend(&out, "  ids:      ", r.ids.empty() ? "none" : StrJoin(r.ids, " "), "\n");
  }
  if (v.has_cdi) {
    StrAppend(&out, "cdi\n  kind:     ", v.cdi_kind, "\n  devices:  ", StrJoin(v.cdi_devices, " "),
              "\n");
  }
  return out;
}

std::string AsJson(const PlanView& v) {
  rapidjson::StringBuffer buf;
  rapidjson::PrettyWriter<rapidjson::StringBuffer> w(buf);
  w.SetIndent(' ', 2);
  auto str = [&w](const std::string& s) {
    w.String(s.c_str(), static_cast<rapidjson::SizeType>(s.size()));
  };
  w.StartObject();
  w.Key("mode");
  str(v.mode);
  w.Key("resources");
  w.StartArray();
  for (const ResourceView& r : v.resources) {
    w.StartObject();
    w.Key("name");
    str(r.name);
    if (!r.endpoint.empty()) {
      w.Key("endpoint");
      str(r.endpoint);
    }
    w.Key("devices");
    w.Uint64(r.devices);
    w.Key("healthy");
    w.Uint64(r.healthy);
    w.Key("units");
    w.Uint64(r.units);
    w.Key("replicas");
    w.Uint64(r.replicas);
    w.Key("ids");
    w.StartArray();
    for (const std::string& id : r.ids) str(id);
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  if (v.mode == "dra") {
    w.Key("draDevices");
    w.StartArray();
    for (const std::string& d : v.dra_devices) str(d);
    w.EndArray();
  }
  if (v.has_cdi) {
    w.Key("cdi");
    w.StartObject();
    w.Key("kind");
    str(v.cdi_kind);
    w.Key("devices");
    w.StartArray();
    for (const std::string& d : v.cdi_devices) str(d);
    w.EndArray();
    w.EndObject();
  }
  w.EndObject();
  return StrCat(std::string_view(buf.GetString(), buf.GetSize()), "\n");
}

std::string AsYaml(const PlanView& v) {
  YAML::Emitter e;
  e << YAML::BeginMap << YAML::Key << "mode" << YAML::Value << v.mode;
  e << YAML::Key << "resources" << YAML::Value << YAML::BeginSeq;
  for (const ResourceView& r : v.resources) {
    e << YAML::BeginMap << YAML::Key << "name" << YAML::Value << r.name;
    if (!r.endpoint.empty()) e << YAML::Key << "endpoint" << YAML::Value << r.endpoint;
    e << YAML::Key << "devices" << YAML::Value << r.devices;
    e << YAML::Key << "healthy" << YAML::Value << r.healthy;
    e << YAML::Key << "units" << YAML::Value << r.units;
    e << YAML::Key << "replicas" << YAML::Value << r.replicas;
    e << YAML::Key << "ids" << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (const std::string& id : r.ids) e << id;
    e << YAML::EndSeq << YAML::EndMap;
  }
  e << YAML::EndSeq;
  if (v.mode == "dra") {
    e << YAML::Key << "draDevices" << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (const std::string& d : v.dra_devices) e << d;
    e << YAML::EndSeq;
  }
  if (v.has_cdi) {
    e << YAML::Key << "cdi" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "kind" << YAML::Value << v.cdi_kind;
    e << YAML::Key << "devices" << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (const std::string& d : v.cdi_devices) e << d;
    e << YAML::EndSeq << YAML::EndMap;
  }
  e << YAML::EndMap;
  return StrCat(e.c_str(), "\n");
}

}  // namespace

std::string PlanReport(const Generation& gen, const std::string& format) {
  const PlanView v = ViewOf(gen);
  if (format == "json") return AsJson(v);
  if (format == "yaml") return AsYaml(v);
  return AsText(v);
}

}  // namespace gpu_agent
