// `gpu-agent config --plan`: what `run` would advertise on this node, per
// resource, from the generation `run` builds.
#ifndef GPU_AGENT_AGENT_CLI_PLAN_REPORT_H_
#define GPU_AGENT_AGENT_CLI_PLAN_REPORT_H_

#include <string>

#include "agent/plan/generation.h"

namespace gpu_agent {

// The plan as `format` ("text", "json" or "yaml"): per resource its name,
// socket (plugin mode), devices advertised and healthy, the units behind
// them and replicas per unit, the device IDs; and the CDI spec's kind and
// device names when the generation holds one.
std::string PlanReport(const Generation& gen, const std::string& format);

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_CLI_PLAN_REPORT_H_
