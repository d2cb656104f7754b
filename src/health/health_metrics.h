// The GPU health metric families: each GPU's standing on each polled check
// (gpu_agent_gpu_health{uuid,check}, with check="overall" the GPU's worst,
// outages included) and one gauge per check with the quantity it judged.
#ifndef GPU_AGENT_HEALTH_HEALTH_METRICS_H_
#define GPU_AGENT_HEALTH_HEALTH_METRICS_H_

#include <vector>

#include "base/prom_text.h"
#include "health/health_watcher.h"

namespace gpu_agent::health {

void RenderHealthMetrics(const std::vector<CheckStatus>& checks,
                         const std::vector<HealthWatcher::Outage>& outages, uint64_t polls,
                         uint64_t poll_calls, PromText* p);

}  // namespace gpu_agent::health

#endif  // GPU_AGENT_HEALTH_HEALTH_METRICS_H_
