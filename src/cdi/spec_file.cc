#include "cdi/spec_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "base/file_util.h"
#include "base/log.h"
#include "base/strings.h"

namespace gpu_agent::cdi {

absl::Status SpecFile::Write(const Spec& spec, const std::string& dir, const std::string& setting) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        StrCat(setting, ": cannot create ", dir, ": ", ec.message()));
  }
  const std::string path = StrCat(dir, "/", SpecFileName(spec.kind, "json"));
  if (absl::Status s = WriteFileAtomically(path, RenderJson(spec)); !s.ok()) {
    return absl::Status(s.code(), StrCat(setting, ": ", s.message()));
  }
  if (!path_.empty() && path_ != path) Remove();
  path_ = path;
  LogInfo("CDI spec written",
          {{"path", path_}, {"kind", spec.kind}, {"devices", StrCat(spec.devices.size())}});
  return absl::OkStatus();
}

void SpecFile::Remove() {
  if (path_.empty()) return;
  if (::unlink(path_.c_str()) != 0 && errno != ENOENT) {
    LogWarning("cannot remove the CDI spec", {{"path", path_}, {"error", std::strerror(errno)}});
  } else {
    LogInfo("CDI spec removed", {{"path", path_}});
  }
  path_.clear();
}

}  // namespace gpu_agent::cdi
