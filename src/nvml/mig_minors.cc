#include "nvml/mig_minors.h"

#include <fstream>
#include <sstream>

#include "base/file_util.h"
#include "base/strings.h"
#include "base/text.h"

namespace gpu_agent::nvml {

absl::StatusOr<MigMinors> MigMinors::Parse(std::string_view text, const std::string& file) {
  MigMinors out;
  out.file_ = file;
  size_t line_no = 0;
  for (std::string_view line : StrSplit(text, '\n')) {
    ++line_no;
    line = StripWhitespace(line);
    if (line.empty()) continue;
    const size_t space = line.find_first_of(" \t");
    auto bad = [&](const std::string& why) {
      return absl::InvalidArgumentError(
          StrCat(file, ":", line_no, ": ", why, " (line \"", Printable(line, 80), "\")"));
    };
    if (space == std::string_view::npos) return bad("expected \"<capability> <minor>\"");
    const std::string_view name = line.substr(0, space);
    const std::string_view number = StripWhitespace(line.substr(space));
    int minor = 0;
    if (!ParseInt(number, &minor) || minor < 0) {
      return bad(StrCat("minor \"", Printable(number, 40), "\" is not a whole number"));
    }
    if (!out.minors_.emplace(std::string(name), minor).second) {
      return bad(StrCat("\"", name, "\" is listed twice"));
    }
  }
  if (out.minors_.empty()) {
    return absl::InvalidArgumentError(StrCat(file,
                                             ": empty; the driver lists MIG capabilities "
                                             "here when it supports MIG"));
  }
  return out;
}

absl::StatusOr<MigMinors> MigMinors::Read(const std::string& proc_root) {
  const std::string file = JoinRoot(proc_root, "/driver/nvidia-caps/mig-minors");
  std::ifstream in(file);
  if (!in) {
    return absl::NotFoundError(
        StrCat(file, ": cannot read it (", PathExists(file) ? "no permission" : "missing",
               "); MIG devices need the nvidia-caps capability minors the driver lists there. "
               "Is the driver loaded with MIG support, and procRoot right?"));
  }
  std::stringstream buf;
  buf << in.rdbuf();
  return Parse(buf.str(), file);
}

absl::StatusOr<std::vector<std::string>> MigMinors::DeviceNodes(int gpu_minor, int gi,
                                                                int ci) const {
  std::vector<std::string> nodes;
  for (const std::string& cap : {StrCat("gpu", gpu_minor, "/gi", gi, "/access"),
                                 StrCat("gpu", gpu_minor, "/gi", gi, "/ci", ci, "/access")}) {
    auto it = minors_.find(cap);
    if (it == minors_.end()) {
      return absl::NotFoundError(StrCat(file_, " has no entry \"", cap, "\""));
    }
    nodes.push_back(StrCat("/dev/nvidia-caps/nvidia-cap", it->second));
  }
  return nodes;
}

}  // namespace gpu_agent::nvml
