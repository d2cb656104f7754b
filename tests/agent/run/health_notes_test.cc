// What the health watcher's reports become on the Node (health/
// health_notes.h, started by agent/run/health_wiring.h), against the API
// server stand-in: an XID outage is told as check "xid" and its return as a
// recovery; an outage a polled check caused is told once, by the check;
// nothing is sent where events are off.
#include <gtest/gtest.h>

#include "agent/run/health_wiring.h"
#include "api_server_stub.h"
#include "support/test_support.h"

namespace gpu_agent {
namespace {

using testing::ApiServerStub;
using testing::WaitFor;

constexpr char kUuid[] = "GPU-3b0e2482-5b11-5d2c-928f-0dd79ad9a0f2";

class HealthNotesTest : public ::testing::Test {
 protected:
  void SetUp() override { api_.AddNode("n1"); }
  std::shared_ptr<health::HealthNotes> Start(const std::string& setting, bool static_mode) {
    Config c;
    c.node_name = "n1";
    c.api_server.proxy = api_.url();
    c.health.node_events = setting;
    std::shared_ptr<health::HealthNotes> notes =
        StartHealthNotes(c, static_mode ? "static" : "plugin");
    nvml::Inventory inv;
    nvml::GpuRecord g;
    g.index = 5;
    g.uuid = kUuid;
    inv.gpus.push_back(g);
    notes->SetGpus(inv);
    return notes;
  }
  ApiServerStub api_;
};

TEST_F(HealthNotesTest, AnOutageACheckCausedIsToldOnceByTheCheck) {
  auto notes = Start("auto", /*static_mode=*/true);
  ASSERT_TRUE(notes->on());
  health::CheckChange c;
  c.now = {kUuid, health::CheckId::kNvLink, health::Severity::kUnhealthy, "1 of 18 links down (4)",
           1};
  notes->OnCheck(c);
  notes->OnChange(
      {DeviceKey::Gpu(kUuid), false, "health check nvlink: 1 of 18 links down (4)", -1});
  ASSERT_TRUE(WaitFor([&] { return api_.events().size() == 1; }));
  EXPECT_FALSE(WaitFor([&] { return api_.events().size() > 1; }, std::chrono::milliseconds(300)));
  EXPECT_NE(api_.events()[0].find(std::string("GPU 5 (") + kUuid + "): nvlink unhealthy"),
            std::string::npos)
      << api_.events()[0];
  // Its return to service is no XID recovery either.
  notes->OnChange({DeviceKey::Gpu(kUuid), true, "recovered", -1});
  EXPECT_FALSE(WaitFor([&] { return api_.events().size() > 1; }, std::chrono::milliseconds(300)));
}

TEST_F(HealthNotesTest, AnXidOutageIsCheckXid) {
  auto notes = Start("on", /*static_mode=*/false);
  ASSERT_TRUE(notes->on());
  notes->OnChange({DeviceKey::Gpu(kUuid), false, "XID 79", 79});
  ASSERT_TRUE(WaitFor([&] { return api_.events().size() == 1; }));
  EXPECT_NE(api_.events()[0].find(std::string("GPU 5 (") + kUuid + "): xid unhealthy: XID 79"),
            std::string::npos)
      << api_.events()[0];
  // A MIG-scoped one names its instance.
  notes->OnChange({DeviceKey{kUuid, 1, 0}, false, "XID 94", 94});
  ASSERT_TRUE(WaitFor([&] { return api_.events().size() == 2; }));
  EXPECT_NE(api_.events()[1].find("xid (GPU instance 1, compute instance 0) unhealthy"),
            std::string::npos)
      << api_.events()[1];
  EXPECT_NE(api_.Condition("n1", "GpuHealthy").find("\"status\":\"False\""), std::string::npos);
}

TEST_F(HealthNotesTest, OffSendsNothing) {
  for (const auto& [setting, static_mode] :
       std::vector<std::pair<std::string, bool>>{{"off", true}, {"auto", false}}) {
    auto notes = Start(setting, static_mode);
    EXPECT_FALSE(notes->on()) << setting;
    notes->OnChange({DeviceKey::Gpu(kUuid), false, "XID 79", 79});
  }
  EXPECT_FALSE(WaitFor([&] { return !api_.calls().empty(); }, std::chrono::milliseconds(300)));
}

}  // namespace
}  // namespace gpu_agent
