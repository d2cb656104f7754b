#include "agent/plan/endpoint_names.h"

#include <cctype>
#include <optional>
#include <set>

#include "base/strings.h"

namespace gpu_agent {

std::string DerivedEndpoint(const std::string& resource) {
  const size_t slash = resource.find('/');
  const std::string domain = resource.substr(0, slash);
  std::string out = StrCat(domain.substr(0, domain.find('.')), "-", resource.substr(slash + 1));
  for (char& ch : out) {
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '.' && ch != '-' && ch != '_') {
      ch = '_';
    }
  }
  return out + ".sock";
}

std::vector<std::string> AssignEndpoints(const std::vector<std::string>& resources,
                                         const std::string& main_resource,
                                         const std::string& configured_endpoint) {
  std::set<std::string> used;
  auto take = [&](const std::string& e) {
    std::string candidate = e;
    for (int n = 2; !used.insert(candidate).second; ++n) {
      candidate = StrCat(e.substr(0, e.size() - 5), "-", n, ".sock");
    }
    return candidate;
  };
  std::optional<size_t> main;
  for (size_t i = 0; i < resources.size(); ++i) {
    if (resources.size() == 1 || resources[i] == main_resource) main = i;
  }
  if (main) used.insert(configured_endpoint);
  std::vector<std::string> out;
  for (size_t i = 0; i < resources.size(); ++i) {
    out.push_back(main == i ? configured_endpoint : take(DerivedEndpoint(resources[i])));
  }
  return out;
}

}  // namespace gpu_agent
