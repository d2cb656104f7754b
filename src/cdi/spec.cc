#include "cdi/spec.h"

#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>
#include <yaml-cpp/yaml.h>

#include <set>

#include "base/strings.h"

namespace gpu_agent::cdi {
namespace {

bool IsLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlnum(char c) { return IsLetter(c) || IsDigit(c); }

// `what` is "vendor", "class" or "device name"; `extra` the punctuation characters
// allowed between the first and last character.
absl::Status CheckName(std::string_view name, std::string_view what, bool digit_first,
                       std::string_view extra) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(StrCat("invalid CDI ", what, " \"", name, "\": ", why));
  };
  if (name.empty()) return bad("it is empty");
  if (!(IsLetter(name.front()) || (digit_first && IsDigit(name.front())))) {
    return bad(digit_first ? "it must start with a letter or digit"
                           : "it must start with a letter");
  }
  for (size_t i = 1; i + 1 < name.size(); ++i) {
    const char c = name[i];
    if (!IsAlnum(c) && extra.find(c) == std::string_view::npos) {
      std::string allowed;
      for (char e : extra) StrAppend(&allowed, allowed.empty() ? "" : ", ", "'", e, "'");
      return bad(StrCat("character '", c, "' at position ", i + 1,
                        " is not allowed (only letters, digits and ", allowed, ")"));
    }
  }
  if (!IsAlnum(name.back())) return bad("it must end with a letter or digit");
  return absl::OkStatus();
}

bool IsAbsolute(const std::string& p) { return !p.empty() && p.front() == '/'; }

absl::Status ValidateEdits(const ContainerEdits& e, const std::string& where) {
  auto need_abs = [&](const std::string& p, std::string_view field) -> absl::Status {
    if (IsAbsolute(p)) return absl::OkStatus();
    return absl::InvalidArgumentError(
        StrCat(where, ": ", field, " \"", p, "\" is not an absolute path"));
  };
  for (const DeviceNode& n : e.device_nodes) {
    if (absl::Status s = need_abs(n.path, "device node path"); !s.ok()) return s;
    if (!n.host_path.empty()) {
      if (absl::Status s = need_abs(n.host_path, "device node hostPath"); !s.ok()) return s;
    }
  }
  for (const Mount& m : e.mounts) {
    if (absl::Status s = need_abs(m.host_path, "mount hostPath"); !s.ok()) return s;
    if (absl::Status s = need_abs(m.container_path, "mount containerPath"); !s.ok()) return s;
  }
  for (const Hook& h : e.hooks) {
    if (absl::Status s = need_abs(h.path, "hook path"); !s.ok()) return s;
  }
  for (const std::string& v : e.env) {
    if (v.find('=') == std::string::npos || v.front() == '=') {
      return absl::InvalidArgumentError(StrCat(where, ": env entry \"", v, "\" is not NAME=value"));
    }
  }
  return absl::OkStatus();
}

template <typename Writer>
void JsonStrings(Writer& w, const char* key, const std::vector<std::string>& items) {
  if (items.empty()) return;
  w.Key(key);
  w.StartArray();
  for (const std::string& s : items)
    w.String(s.c_str(), static_cast<rapidjson::SizeType>(s.size()));
  w.EndArray();
}

template <typename Writer>
void JsonString(Writer& w, const char* key, const std::string& value) {
  w.Key(key);
  w.String(value.c_str(), static_cast<rapidjson::SizeType>(value.size()));
}

template <typename Writer>
void JsonEdits(Writer& w, const ContainerEdits& e) {
  w.StartObject();
  JsonStrings(w, "env", e.env);
  if (!e.device_nodes.empty()) {
    w.Key("deviceNodes");
    w.StartArray();
    for (const DeviceNode& n : e.device_nodes) {
      w.StartObject();
      JsonString(w, "path", n.path);
      if (!n.host_path.empty()) JsonString(w, "hostPath", n.host_path);
      w.EndObject();
    }
    w.EndArray();
  }
  if (!e.mounts.empty()) {
    w.Key("mounts");
    w.StartArray();
    for (const Mount& m : e.mounts) {
      w.StartObject();
      JsonString(w, "hostPath", m.host_path);
      JsonString(w, "containerPath", m.container_path);
      JsonStrings(w, "options", m.options);
      w.EndObject();
    }
    w.EndArray();
  }
  if (!e.hooks.empty()) {
    w.Key("hooks");
    w.StartArray();
    for (const Hook& h : e.hooks) {
      w.StartObject();
      JsonString(w, "hookName", h.hook_name);
      JsonString(w, "path", h.path);
      JsonStrings(w, "args", h.args);
      w.EndObject();
    }
    w.EndArray();
  }
  w.EndObject();
}

// Every scalar double-quoted: CDI consumers turn YAML into JSON before
// decoding it, so a bare 0 (an index device name) would become a number.
void YamlStrings(YAML::Emitter& y, const char* key, const std::vector<std::string>& items) {
  if (items.empty()) return;
  y << YAML::Key << key << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const std::string& s : items) y << YAML::DoubleQuoted << s;
  y << YAML::EndSeq;
}

void YamlString(YAML::Emitter& y, const char* key, const std::string& value) {
  y << YAML::Key << key << YAML::Value << YAML::DoubleQuoted << value;
}

void YamlEdits(YAML::Emitter& y, const ContainerEdits& e) {
  y << YAML::BeginMap;
  YamlStrings(y, "env", e.env);
  if (!e.device_nodes.empty()) {
    y << YAML::Key << "deviceNodes" << YAML::Value << YAML::BeginSeq;
    for (const DeviceNode& n : e.device_nodes) {
      y << YAML::BeginMap;
      YamlString(y, "path", n.path);
      if (!n.host_path.empty()) YamlString(y, "hostPath", n.host_path);
      y << YAML::EndMap;
    }
    y << YAML::EndSeq;
  }
  if (!e.mounts.empty()) {
    y << YAML::Key << "mounts" << YAML::Value << YAML::BeginSeq;
    for (const Mount& m : e.mounts) {
      y << YAML::BeginMap;
      YamlString(y, "hostPath", m.host_path);
      YamlString(y, "containerPath", m.container_path);
      YamlStrings(y, "options", m.options);
      y << YAML::EndMap;
    }
    y << YAML::EndSeq;
  }
  if (!e.hooks.empty()) {
    y << YAML::Key << "hooks" << YAML::Value << YAML::BeginSeq;
    for (const Hook& h : e.hooks) {
      y << YAML::BeginMap;
      YamlString(y, "hookName", h.hook_name);
      YamlString(y, "path", h.path);
      YamlStrings(y, "args", h.args);
      y << YAML::EndMap;
    }
    y << YAML::EndSeq;
  }
  y << YAML::EndMap;
}

}  // namespace

absl::Status ValidateVendor(std::string_view vendor) {
  return CheckName(vendor, "vendor", false, "_-.");
}

absl::Status ValidateClass(std::string_view cls) {
  if (cls.size() > 63) {
    return absl::InvalidArgumentError(
        StrCat("invalid CDI class \"", cls, "\": longer than 63 characters"));
  }
  return CheckName(cls, "class", false, "_-.");
}

absl::Status ValidateDeviceName(std::string_view name) {
  return CheckName(name, "device name", true, "_-.:");
}

absl::Status ValidateSpec(const Spec& spec) {
  const size_t slash = spec.kind.find('/');
  if (slash == std::string::npos) {
    return absl::InvalidArgumentError(
        StrCat("CDI kind \"", spec.kind, "\" is not <vendor>/<class>"));
  }
  if (absl::Status s = ValidateVendor(spec.kind.substr(0, slash)); !s.ok()) return s;
  if (absl::Status s = ValidateClass(spec.kind.substr(slash + 1)); !s.ok()) return s;
  if (spec.devices.empty()) {
    return absl::InvalidArgumentError(StrCat("CDI spec for ", spec.kind, " has no device"));
  }
  if (absl::Status s = ValidateEdits(spec.edits, "spec containerEdits"); !s.ok()) return s;
  std::set<std::string> names;
  for (const Device& d : spec.devices) {
    if (absl::Status s = ValidateDeviceName(d.name); !s.ok()) return s;
    if (!names.insert(d.name).second) {
      return absl::InvalidArgumentError(
          StrCat("CDI device ", spec.kind, "=", d.name, " is listed twice"));
    }
    if (absl::Status s = ValidateEdits(d.edits, StrCat("device ", d.name)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

std::string MinimumVersion(const Spec& spec) {
  const std::string cls = spec.kind.substr(spec.kind.find('/') + 1);
  if (cls.find('.') != std::string::npos) return "0.6.0";
  auto host_paths = [](const ContainerEdits& e) {
    for (const DeviceNode& n : e.device_nodes) {
      if (!n.host_path.empty()) return true;
    }
    return false;
  };
  if (host_paths(spec.edits)) return "0.5.0";
  for (const Device& d : spec.devices) {
    if (!d.name.empty() && !IsLetter(d.name.front())) return "0.5.0";
    if (host_paths(d.edits)) return "0.5.0";
  }
  // Mounts carry no "type" here, which would need 0.4.0.
  return "0.3.0";
}

std::string RenderJson(const Spec& spec) {
  rapidjson::StringBuffer buf;
  rapidjson::PrettyWriter<rapidjson::StringBuffer> w(buf);
  w.SetIndent(' ', 2);
  w.StartObject();
  JsonString(w, "cdiVersion", MinimumVersion(spec));
  JsonString(w, "kind", spec.kind);
  w.Key("devices");
  w.StartArray();
  for (const Device& d : spec.devices) {
    w.StartObject();
    JsonString(w, "name", d.name);
    w.Key("containerEdits");
    JsonEdits(w, d.edits);
    w.EndObject();
  }
  w.EndArray();
  w.Key("containerEdits");
  JsonEdits(w, spec.edits);
  w.EndObject();
  return StrCat(std::string_view(buf.GetString(), buf.GetSize()), "\n");
}

std::string RenderYaml(const Spec& spec) {
  YAML::Emitter y;
  y << YAML::BeginMap;
  YamlString(y, "cdiVersion", MinimumVersion(spec));
  YamlString(y, "kind", spec.kind);
  y << YAML::Key << "devices" << YAML::Value << YAML::BeginSeq;
  for (const Device& d : spec.devices) {
    y << YAML::BeginMap;
    YamlString(y, "name", d.name);
    y << YAML::Key << "containerEdits" << YAML::Value;
    YamlEdits(y, d.edits);
    y << YAML::EndMap;
  }
  y << YAML::EndSeq;
  y << YAML::Key << "containerEdits" << YAML::Value;
  YamlEdits(y, spec.edits);
  y << YAML::EndMap;
  return StrCat("---\n", y.c_str(), "\n");
}

std::string SpecFileName(std::string_view kind, std::string_view ext) {
  std::string name(kind);
  if (size_t slash = name.find('/'); slash != std::string::npos) name[slash] = '-';
  return StrCat(name, ".", ext);
}

}  // namespace gpu_agent::cdi
