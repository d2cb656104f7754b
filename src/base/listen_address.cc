// Parsing and checking the metrics endpoint's "host:port".
#include "base/listen_address.h"

#include <arpa/inet.h>

#include <string_view>

#include "base/strings.h"

namespace gpu_agent {
namespace {

bool IsIpv6(const std::string& text) {
  in6_addr addr{};
  return ::inet_pton(AF_INET6, text.c_str(), &addr) == 1;
}

}  // namespace

absl::StatusOr<HostPort> ParseListenAddress(const std::string& address) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        StrCat("metrics.address \"", address, "\": ", why, " (use host:port, as in 0.0.0.0:9400)"));
  };
  HostPort hp;
  std::string_view rest = address;
  if (!rest.empty() && rest.front() == '[') {
    const size_t close = rest.find(']');
    if (close == std::string_view::npos) return bad("unclosed '['");
    hp.host = std::string(rest.substr(1, close - 1));
    rest.remove_prefix(close + 1);
    if (rest.empty() || rest.front() != ':') return bad("missing :port");
    rest.remove_prefix(1);
  } else {
    const size_t colon = rest.rfind(':');
    if (colon == std::string_view::npos) return bad("missing :port");
    hp.host = std::string(rest.substr(0, colon));
    // Several ':' without brackets: an IPv6 address, then the port. An
    // address alone ("fd00::5") would otherwise be read as "fd00:" port 5.
    if (hp.host.find(':') != std::string::npos && !IsIpv6(hp.host)) {
      return bad("an IPv6 address needs its port after it, as in [fd00::5]:9400 or fd00::5:9400");
    }
    rest.remove_prefix(colon + 1);
  }
  if (!ParseInt(rest, &hp.port) || hp.port < 0 || hp.port > 65535) {
    return bad(StrCat("invalid port \"", rest, "\""));
  }
  if (hp.host.empty()) hp.host = "0.0.0.0";
  return hp;
}

absl::Status ValidateListenAddress(const std::string& address) {
  absl::StatusOr<HostPort> hp = ParseListenAddress(address);
  return hp.ok() ? absl::OkStatus() : hp.status();
}

std::string FormatHostPort(const std::string& host, int port) {
  return host.find(':') != std::string::npos ? StrCat("[", host, "]:", port)
                                             : StrCat(host, ":", port);
}

}  // namespace gpu_agent
