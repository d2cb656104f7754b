#include "base/resource_name.h"

#include "base/strings.h"
#include "base/text.h"

namespace gpu_agent {
namespace {

bool IsAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}
bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

}  // namespace

// RFC 1123 subdomain: lowercase labels of [a-z0-9-], dot separated, at most
// 253 characters.
absl::Status ValidateDnsSubdomain(std::string_view what, std::string_view s) {
  if (s.empty()) return absl::InvalidArgumentError(StrCat(what, " is empty"));
  if (s.size() > kMaxDnsSubdomain) {
    return absl::InvalidArgumentError(StrCat(what, " is longer than 253 characters"));
  }
  for (std::string_view label : StrSplit(s, '.')) {
    if (label.empty() || label.size() > 63 || !IsLowerAlnum(label.front()) ||
        !IsLowerAlnum(label.back())) {
      return absl::InvalidArgumentError(StrCat(
          what,
          " is not a DNS subdomain (lowercase letters, digits, '-' and '.', each part starting "
          "and ending with a letter or digit)"));
    }
    for (char c : label) {
      if (!IsLowerAlnum(c) && c != '-') {
        return absl::InvalidArgumentError(
            StrCat(what, " has the invalid character '", Printable(std::string_view(&c, 1), 4),
                   "' (allowed: lowercase letters, digits, '-' and '.')"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateExtendedResourceName(std::string_view name) {
  const size_t slash = name.find('/');
  if (slash == std::string_view::npos) {
    return absl::InvalidArgumentError(
        StrCat("resource name \"", name,
               "\" has no domain: extended resources are written <domain>/<name>, as in "
               "nvidia.com/gpu"));
  }
  std::string_view domain = name.substr(0, slash);
  std::string_view short_name = name.substr(slash + 1);
  if (short_name.find('/') != std::string_view::npos) {
    return absl::InvalidArgumentError(StrCat("resource name \"", name, "\" has more than one '/'"));
  }
  if (absl::Status s = ValidateDnsSubdomain(
          StrCat("the domain \"", domain, "\" of resource name \"", name, "\""), domain);
      !s.ok()) {
    return s;
  }
  if (domain == "kubernetes.io" || domain.ends_with(".kubernetes.io") || domain == "k8s.io" ||
      domain.ends_with(".k8s.io")) {
    return absl::InvalidArgumentError(
        StrCat("resource name \"", name, "\" uses the reserved domain \"", domain,
               "\": extended resources must be outside kubernetes.io and k8s.io"));
  }
  if (name.starts_with("requests.")) {
    return absl::InvalidArgumentError(StrCat(
        "resource name \"", name, "\" must not start with \"requests.\" (reserved for quotas)"));
  }
  if (short_name.empty()) {
    return absl::InvalidArgumentError(
        StrCat("resource name \"", name, "\" has an empty name after '/'"));
  }
  if (short_name.size() > 63) {
    return absl::InvalidArgumentError(StrCat("resource name \"", name, "\": the part after '/' is ",
                                             short_name.size(),
                                             " characters long, at most 63 are allowed"));
  }
  if (!IsAlnum(short_name.front()) || !IsAlnum(short_name.back())) {
    return absl::InvalidArgumentError(
        StrCat("resource name \"", name,
               "\": the part after '/' must start and end with a letter or digit"));
  }
  for (char c : short_name) {
    if (!IsAlnum(c) && c != '-' && c != '_' && c != '.') {
      return absl::InvalidArgumentError(StrCat("resource name \"", name,
                                               "\" has the invalid character '", std::string(1, c),
                                               "' (allowed: letters, digits, '-', '_' and '.')"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateNodeName(std::string_view name) {
  return ValidateDnsSubdomain(StrCat("node name \"", name, "\""), name);
}

}  // namespace gpu_agent
