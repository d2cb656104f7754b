// ResourceSlices as a DRA driver writes them, for the tests of the slice
// publisher and the API server stand-in. Header-only: a slice here is its
// JSON text.
#ifndef GPU_AGENT_TESTS_SUPPORT_SLICE_JSON_H_
#define GPU_AGENT_TESTS_SUPPORT_SLICE_JSON_H_

#include <cstdint>
#include <string>

namespace gpu_agent::testing {

// The `index`-th of `count` slices of `driver`'s pool `node` at
// `generation`, named "<node>-<driver>-<index>"; `devices` is the text of
// its devices list's elements.
inline std::string SliceJson(const std::string& node, const std::string& driver, int index,
                             int count, int64_t generation, const std::string& devices) {
  return R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":")" +
         node + "-" + driver + "-" + std::to_string(index) + R"("},"spec":{"driver":")" + driver +
         R"(","nodeName":")" + node + R"(","pool":{"name":")" + node + R"(","generation":)" +
         std::to_string(generation) + R"(,"resourceSliceCount":)" + std::to_string(count) +
         R"(},"devices":[)" + devices + "]}}";
}

// The device "gpu-<index>", with nothing but its name.
inline std::string NamedDevice(int index) {
  return R"({"name":"gpu-)" + std::to_string(index) + R"("})";
}

}  // namespace gpu_agent::testing

#endif  // GPU_AGENT_TESTS_SUPPORT_SLICE_JSON_H_
