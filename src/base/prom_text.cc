// Prometheus text exposition: the lines PromText writes and its label escaping.
#include "base/prom_text.h"

#include <cmath>
#include <cstdio>

#include "base/strings.h"

namespace gpu_agent {
namespace {

std::string EscapeLabel(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace

void PromText::Family(const std::string& name, const std::string& type, const std::string& help) {
  StrAppend(&out_, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

void PromText::Sample(const std::string& name, const Labels& labels, double value) {
  out_ += name;
  if (!labels.empty()) {
    out_ += "{";
    for (size_t i = 0; i < labels.size(); ++i) {
      StrAppend(&out_, i ? "," : "", labels[i].first, "=\"", EscapeLabel(labels[i].second), "\"");
    }
    out_ += "}";
  }
  char buf[64];
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    std::snprintf(buf, sizeof buf, " %.0f\n", value);
  } else {
    std::snprintf(buf, sizeof buf, " %.9g\n", value);
  }
  out_ += buf;
}

}  // namespace gpu_agent
