// What the slice publisher knows of one node's ResourceSlices: those on the
// server (by name, as last seen) and those wanted, compared on what the
// agent sets (a field the server adds is no difference); and one line of a
// ResourceSlice watch, read with base/json's bounds.
#ifndef GPU_AGENT_DRA_SLICE_SET_H_
#define GPU_AGENT_DRA_SLICE_SET_H_

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace gpu_agent::dra {

class SliceSet {
 public:
  std::map<std::string, std::string> have;  // name -> object JSON
  std::map<std::string, std::string> want;  // name -> object JSON
  int64_t generation = 0;                   // 0: not yet decided
  // name -> the resourceVersions the server gave this publisher's own last
  // writes of it (a few), newest last: a watch event of an earlier one is
  // the echo of a write since overtaken, no one else's change.
  std::map<std::string, std::deque<std::string>> written;

  // Records a write of `name` stored at `resource_version`.
  void Wrote(const std::string& name, const std::string& resource_version);
  // Whether an event of `name` at `resource_version` is an echo of one of
  // this publisher's writes older than what it has of the slice, or of a
  // slice it has deleted since.
  bool StaleEcho(const std::string& name, const std::string& resource_version) const;

  // Whether the slice `name` is as wanted (absent when unwanted).
  bool Matches(const std::string& name) const;
  bool AllMatch() const;
  void Want(const std::vector<std::string>& slices);
  // Whether `slices` are those wanted, byte for byte.
  bool Wants(const std::vector<std::string>& slices) const;
};

struct SliceWatchEvent {
  std::string type;              // ADDED, MODIFIED, DELETED, BOOKMARK or ERROR
  std::string name;              // the slice's metadata.name (none for ERROR)
  std::string resource_version;  // metadata.resourceVersion, where given
  std::string driver;            // spec.driver
  std::string node_name;         // spec.nodeName
  int code = 0;                  // ERROR: the Status code (410: the version is too old)
  std::string object;            // the object, as compact JSON
};
// Errors: not JSON within the bounds, no string `type`, or no `object`.
absl::StatusOr<SliceWatchEvent> ParseSliceWatchEvent(std::string_view line);

}  // namespace gpu_agent::dra

#endif  // GPU_AGENT_DRA_SLICE_SET_H_
