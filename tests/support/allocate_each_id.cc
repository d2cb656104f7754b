#include "support/allocate_each_id.h"

#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string_view>
#include <vector>

#include "base/strings.h"
#include "deviceplugin/allocator.h"
#include "deviceplugin/device_publisher.h"

namespace gpu_agent::testing {

AllocatedIds AllocateEachId(const Generation& gen) {
  AllocatedIds out;
  if (!gen.cdi.has_value()) {
    ADD_FAILURE() << "the generation has no CDI spec to resolve the names Allocate returns";
    return out;
  }
  const cdi::Spec& spec = gen.cdi->spec;
  std::set<std::string> in_spec;
  for (const cdi::Device& d : spec.devices) in_spec.insert(StrCat(spec.kind, "=", d.name));
  const deviceplugin::Allocator allocator(gen.plan.allocate);
  for (const deviceplugin::ResourceSpec& r : gen.plan.resources) {
    out.devices[r.resource_name] = r.devices.size();
    deviceplugin::DevicePublisher publisher(r);
    std::shared_ptr<const deviceplugin::DeviceSnapshot> snap = publisher.Current();
    for (const deviceplugin::PluginDevice& d : snap->devices) {
      v1beta1::ContainerAllocateRequest req;
      req.add_devices_ids(d.id);
      v1beta1::ContainerAllocateResponse resp;
      const bool allocated = allocator.AllocateContainer(*snap, req, &resp).ok();
      EXPECT_TRUE(allocated) << d.id;
      if (!allocated) continue;
      ++out.ids_checked;
      std::vector<std::string> names;
      for (const auto& c : resp.cdi_devices()) names.push_back(c.name());
      for (const auto& [key, value] : resp.annotations()) {
        for (std::string_view n : StrSplit(value, ',')) names.emplace_back(n);
      }
      EXPECT_FALSE(names.empty()) << d.id << " was given no CDI device";
      for (const std::string& n : names) {
        EXPECT_TRUE(in_spec.count(n)) << r.resource_name << " device " << d.id << " is given " << n
                                      << ", which the spec lacks";
        ++out.names_checked;
      }
    }
  }
  return out;
}

}  // namespace gpu_agent::testing
