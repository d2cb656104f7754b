#include "agent/cli/dra_command.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <yaml-cpp/yaml.h>

#include <cstdio>

#include "agent/plan/dra_plan.h"
#include "agent/plan/generation.h"
#include "base/exit_code.h"
#include "base/strings.h"
#include "dra/resource_slice.h"

namespace gpu_agent {
namespace {

// A string YAML would read back as another type is quoted.
bool NeedsQuotes(std::string_view s) {
  if (s.empty() || s == "true" || s == "false" || s == "null" || s == "~" || s == "yes" ||
      s == "no" || s == "on" || s == "off") {
    return true;
  }
  double d = 0;
  return ParseInt(s, &d) || (s.find_first_not_of("0123456789.eE+-") == std::string_view::npos);
}

void Emit(YAML::Emitter& e, const rapidjson::Value& v) {
  if (v.IsObject()) {
    e << YAML::BeginMap;
    for (const auto& m : v.GetObject()) {
      e << YAML::Key << m.name.GetString() << YAML::Value;
      Emit(e, m.value);
    }
    e << YAML::EndMap;
  } else if (v.IsArray()) {
    e << YAML::BeginSeq;
    for (const auto& item : v.GetArray()) Emit(e, item);
    e << YAML::EndSeq;
  } else if (v.IsString()) {
    if (NeedsQuotes(v.GetString())) e << YAML::DoubleQuoted;
    e << v.GetString();
  } else if (v.IsBool()) {
    e << v.GetBool();
  } else if (v.IsInt64()) {
    e << v.GetInt64();
  } else if (v.IsUint64()) {
    e << v.GetUint64();
  } else if (v.IsNumber()) {
    e << v.GetDouble();
  } else {
    e << YAML::Null;
  }
}

}  // namespace

int DraSlicesCommand(const LoadedConfig& loaded, const std::string& output) {
  const Config& config = loaded.config;
  GenerationOptions options;
  options.plan = GenerationOptions::Plan::kNone;
  options.cdi = GenerationOptions::Cdi::kNever;  // slices name devices, not CDI ids
  absl::StatusOr<std::shared_ptr<const Generation>> gen = DiscoverGeneration(loaded, options);
  if (!gen.ok()) {
    std::fprintf(stderr, "gpu-agent: %s\n", std::string(gen.status().message()).c_str());
    return ExitCodeFor(gen.status());
  }
  for (const std::string& note : (*gen)->warnings) {
    std::fprintf(stderr, "gpu-agent: note: %s\n", note.c_str());
  }
  dra::SliceInput in;
  in.driver = config.dra.driver_name;
  in.node = DraPoolName(config);
  in.devices = DraDevicesOf((*gen)->model, (*gen)->inventory);
  // As a server that serves consumable capacity (1.36 by
  // default) has them; `run` asks the server first.
  in.consumable_capacity = true;
  if (in.node.empty()) {
    std::fprintf(stderr, "gpu-agent: nodeName is empty and this host has no name to use\n");
    return kExitUsage;
  }
  const std::vector<std::string> slices = dra::BuildResourceSlices(in);
  std::string text;
  if (output == "json") {
    rapidjson::StringBuffer buf;
    rapidjson::Writer<rapidjson::StringBuffer> w(buf);
    w.StartObject();
    w.Key("apiVersion");
    w.String("v1");
    w.Key("kind");
    w.String("List");
    w.Key("items");
    w.StartArray();
    for (const std::string& s : slices) {
      w.RawValue(s.data(), s.size(), rapidjson::kObjectType);  // each built by the Writer
    }
    w.EndArray();
    w.EndObject();
    text = StrCat(std::string_view(buf.GetString(), buf.GetSize()), "\n");
  } else {
    for (const std::string& s : slices) {
      rapidjson::Document d;
      d.Parse(s.c_str());
      YAML::Emitter e;
      Emit(e, d);
      StrAppend(&text, "---\n", e.c_str(), "\n");
    }
  }
  std::fwrite(text.data(), 1, text.size(), stdout);
  return std::fflush(stdout) == 0 ? kExitOk : kExitFailure;
}

}  // namespace gpu_agent
