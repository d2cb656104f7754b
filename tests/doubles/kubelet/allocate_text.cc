#include "allocate_text.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <string_view>
#include <utility>
#include <vector>

namespace gpu_agent::testing {
namespace {

// protobuf's CEscape: the usual backslash escapes, other bytes outside
// printable ASCII as three octal digits.
std::string Quoted(std::string_view s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\"':
        out += "\\\"";
        break;
      case '\'':
        out += "\\'";
        break;
      case '\\':
        out += "\\\\";
        break;
      default:
        if (c < 0x20 || c >= 0x7f) {
          char oct[5];
          std::snprintf(oct, sizeof oct, "\\%03o", c);
          out += oct;
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

// One line under construction: each field followed by a space, the last
// space taken off at the end, as the text printer's single-line mode does.
class Line {
 public:
  // A proto3 string: left out when empty, but where `always` (a map entry's
  // key and value, which the text format always writes).
  void String(std::string_view name, const std::string& v, bool always = false) {
    if (always || !v.empty()) text_.append(name).append(": ").append(Quoted(v)).append(" ");
  }
  void Bool(std::string_view name, bool v) {
    if (v) text_.append(name).append(": true ");
  }
  void Open(std::string_view name) { text_.append(name).append(" { "); }
  void Close() { text_.append("} "); }
  void Map(std::string_view name, const google::protobuf::Map<std::string, std::string>& m) {
    std::vector<std::pair<std::string, std::string>> sorted(m.begin(), m.end());
    std::sort(sorted.begin(), sorted.end());
    for (const auto& [k, v] : sorted) {
      Open(name);
      String("key", k, /*always=*/true);
      String("value", v, /*always=*/true);
      Close();
    }
  }
  void Container(const v1beta1::ContainerAllocateResponse& r) {
    Map("envs", r.envs());
    for (const auto& m : r.mounts()) {
      Open("mounts");
      String("container_path", m.container_path());
      String("host_path", m.host_path());
      Bool("read_only", m.read_only());
      Close();
    }
    for (const auto& d : r.devices()) {
      Open("devices");
      String("container_path", d.container_path());
      String("host_path", d.host_path());
      String("permissions", d.permissions());
      Close();
    }
    Map("annotations", r.annotations());
    for (const auto& c : r.cdi_devices()) {
      Open("cdi_devices");
      String("name", c.name());
      Close();
    }
  }
  std::string Done() {
    if (!text_.empty() && text_.back() == ' ') text_.pop_back();
    return std::move(text_);
  }

 private:
  std::string text_;
};

}  // namespace

std::string AllocateText(const v1beta1::ContainerAllocateResponse& r) {
  Line line;
  line.Container(r);
  return line.Done();
}

std::string AllocateText(const v1beta1::AllocateResponse& r) {
  Line line;
  for (const auto& c : r.container_responses()) {
    line.Open("container_responses");
    line.Container(c);
    line.Close();
  }
  return line.Done();
}

}  // namespace gpu_agent::testing
