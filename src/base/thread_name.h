// Names the calling thread (up to 15 characters; longer names are cut), so
// `top -H`, /proc/<pid>/task/*/comm and a debugger tell the agent's threads
// apart from gRPC's and each other.
#ifndef GPU_AGENT_BASE_THREAD_NAME_H_
#define GPU_AGENT_BASE_THREAD_NAME_H_

#include <pthread.h>

#include <string>

namespace gpu_agent {

inline void NameThisThread(const std::string& name) {
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
}

}  // namespace gpu_agent

#endif  // GPU_AGENT_BASE_THREAD_NAME_H_
