#include "dra/claim_ref.h"

#include <cctype>

#include "base/resource_name.h"
#include "base/strings.h"
#include "base/text.h"

namespace gpu_agent::dra {

std::string NamedClaim(const ClaimRef& c) {
  return StrCat("claim ", Printable(c.name_space, 63), "/", Printable(c.name, 253));
}

absl::Status ValidateClaimUid(std::string_view uid) {
  if (uid.empty()) return absl::InvalidArgumentError("no UID");
  if (uid.size() > kMaxClaimUid) {
    return absl::InvalidArgumentError(
        StrCat("UID of ", uid.size(), " characters, over ", kMaxClaimUid));
  }
  for (const char c : uid) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') {
      return absl::InvalidArgumentError(StrCat("UID \"", Printable(uid, kMaxClaimUid),
                                               "\" has a character other than a letter, a "
                                               "digit or '-'"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateClaimRef(const ClaimRef& c) {
  absl::Status s = ValidateClaimUid(c.uid);
  if (s.ok()) s = ValidateDnsSubdomain("its namespace", c.name_space);
  if (s.ok() && (c.name_space.size() > 63 || c.name_space.find('.') != std::string::npos)) {
    s = absl::InvalidArgumentError(
        "its namespace is not a DNS label (at most 63 characters, no '.')");
  }
  if (s.ok()) s = ValidateDnsSubdomain("its name", c.name);
  if (s.ok()) return s;
  return absl::InvalidArgumentError(
      StrCat(NamedClaim(c), " cannot be a ResourceClaim: ", s.message()));
}

}  // namespace gpu_agent::dra
