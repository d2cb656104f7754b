// Every device ID of every resource a generation's plan serves, allocated
// alone through the real allocator, and each CDI name the answer gives
// checked against the generation's CDI spec: the device plugin's answers
// name only devices the container runtime can resolve.
#ifndef GPU_AGENT_TESTS_SUPPORT_ALLOCATE_EACH_ID_H_
#define GPU_AGENT_TESTS_SUPPORT_ALLOCATE_EACH_ID_H_

#include <cstddef>
#include <map>
#include <string>

#include "agent/plan/generation.h"

namespace gpu_agent::testing {

struct AllocatedIds {
  std::map<std::string, size_t> devices;  // devices served, by resource
  size_t ids_checked = 0;                 // IDs allocated
  size_t names_checked = 0;               // CDI names found in the spec
};

// Allocates each ID alone. A CDI name is one of the answer's CDI devices or
// one of the comma-separated names of its annotations (cdi-annotations).
// Fails the running test for a generation without a CDI spec, an ID the
// allocator refuses, an ID given no CDI name, and a name the spec lacks.
AllocatedIds AllocateEachId(const Generation& gen);

}  // namespace gpu_agent::testing

#endif  // GPU_AGENT_TESTS_SUPPORT_ALLOCATE_EACH_ID_H_
