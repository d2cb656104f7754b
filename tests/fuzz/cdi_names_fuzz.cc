// CDI's name rules (vendor, class, device name), and the spec rendered with
// names that pass them: its JSON and YAML must read back to those names.
//
// Input: "<vendor>\0<class>\0<device name>".
#include <rapidjson/document.h>
#include <yaml-cpp/yaml.h>

#include "cdi/spec.h"
#include "fuzz_support.h"

using namespace gpu_agent;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string_view> p = fuzz::Split(fuzz::AsView(data, size), '\0', 3);
  if (p.size() < 3) return 0;
  const bool ok = cdi::ValidateVendor(p[0]).ok() && cdi::ValidateClass(p[1]).ok() &&
                  cdi::ValidateDeviceName(p[2]).ok();
  if (!ok) return 0;
  cdi::Spec spec;
  spec.kind = std::string(p[0]) + "/" + std::string(p[1]);
  spec.devices.push_back({std::string(p[2]), {{}, {{"/dev/nvidia0", ""}}, {}, {}}});
  fuzz::Check(cdi::ValidateSpec(spec).ok(), "a spec of valid names is invalid");

  const std::string json = cdi::RenderJson(spec);
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  fuzz::Check(!doc.HasParseError() && doc.IsObject(), "the JSON spec does not parse");
  fuzz::Check(doc["kind"].GetString() == spec.kind, "the JSON spec has another kind");
  fuzz::Check(doc["devices"][0]["name"].GetString() == spec.devices[0].name,
              "the JSON spec has another device name");

  const std::string yaml = cdi::RenderYaml(spec);
  try {
    YAML::Node y = YAML::Load(yaml);
    fuzz::Check(y["kind"].as<std::string>() == spec.kind, "the YAML spec has another kind");
    fuzz::Check(y["devices"][0]["name"].as<std::string>() == spec.devices[0].name,
                "the YAML spec has another device name");
  } catch (const YAML::Exception& e) {
    fuzz::Check(false, std::string("the YAML spec does not parse: ") + e.what());
  }
  (void)cdi::SpecFileName(spec.kind, "yaml");
  return 0;
}
