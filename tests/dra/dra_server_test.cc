// DraServer on real unix sockets, against the DRA kubelet stand-in: the
// registration (GetInfo's answer, the version the kubelet picks, a refusal
// logged with its reason), prepare and unprepare on both versions, every
// claim answered, the health stream, and the sockets removed on Stop.
#include "dra/dra_server.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dra_kubelet.h"
#include "support/test_support.h"

namespace gpu_agent::dra {
namespace {

using gpu_agent::testing::DraKubelet;
using gpu_agent::testing::TempDir;
using gpu_agent::testing::WaitFor;

constexpr char kDriver[] = "gpu.gpu-agent.github.io";

// Answers every claim from a table; a claim not in it is left out, which
// the server must still answer.
class TableHandler : public ClaimHandler {
 public:
  std::map<std::string, PrepareOutcome> Prepare(const std::vector<ClaimRef>& claims) override {
    std::map<std::string, PrepareOutcome> out;
    for (const ClaimRef& c : claims) {
      std::lock_guard<std::mutex> lock(mu_);
      asked.push_back(c);
      if (auto it = table.find(c.uid); it != table.end()) out[c.uid] = it->second;
    }
    return out;
  }
  std::map<std::string, std::string> Unprepare(const std::vector<ClaimRef>& claims) override {
    std::map<std::string, std::string> out;
    for (const ClaimRef& c : claims) out[c.uid] = c.uid == "bad" ? "cannot remove" : "";
    return out;
  }
  std::map<std::string, PrepareOutcome> table;
  std::mutex mu_;
  std::vector<ClaimRef> asked;
};

class DraServerTest : public ::testing::Test {
 protected:
  DraServerTest() {
    ::mkdir(dir_.Join("registry").c_str(), 0755);
    ::mkdir(dir_.Join("plugins").c_str(), 0755);
    options_ = {kDriver, dir_.Join("registry"), dir_.Join("plugins")};
    handler_ = std::make_shared<TableHandler>();
    PreparedDevice d{{"gpu"}, "node-a", "gpu-0", {"gpu-agent.github.io/gpu=uid-1-gpu-0"}, ""};
    handler_->table["uid-1"] = {{d}, ""};
    handler_->table["uid-2"] = {{}, "claim ns/two: not allocated"};
  }

  void StartServer() {
    auto server = DraServer::Start(options_, handler_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  DraKubelet::Options KubeletOptions() {
    DraKubelet::Options o;
    o.registry_dir = options_.registry_dir;
    return o;
  }

  TempDir dir_;
  DraServerOptions options_;
  std::shared_ptr<TableHandler> handler_;
  std::unique_ptr<DraServer> server_;
};

TEST_F(DraServerTest, GetInfoNamesTheDraSocketAndListsV1First) {
  StartServer();
  DraKubelet kubelet(KubeletOptions());
  ASSERT_TRUE(kubelet.Start());
  ASSERT_TRUE(kubelet.WaitForPlugin(kDriver));
  const DraKubelet::Plugin p = *kubelet.plugin(kDriver);
  EXPECT_EQ(p.socket, dir_.Join("registry") + "/" + kDriver + "-reg.sock");
  EXPECT_EQ(p.endpoint, dir_.Join("plugins") + "/" + kDriver + "/dra.sock");
  EXPECT_EQ(p.supported_versions,
            (std::vector<std::string>{"v1.DRAPlugin", "v1beta1.DRAPlugin", "v1.DRAResourceHealth",
                                      "v1beta1.DRAResourceHealth", "v1alpha1.DRAResourceHealth"}));
  EXPECT_EQ(p.version, "v1.DRAPlugin");
  EXPECT_TRUE(p.health());
  EXPECT_EQ(p.health_version, "v1.DRAResourceHealth");
  EXPECT_TRUE(WaitFor([&] { return server_->registration().registered; }));
  EXPECT_EQ(server_->registration().registrations, 1u);
}

TEST_F(DraServerTest, AKubeletThatKnowsOnlyV1beta1PreparesOnV1beta1) {
  StartServer();
  DraKubelet::Options o = KubeletOptions();
  o.known_versions = {"v1beta1.DRAPlugin"};
  DraKubelet kubelet(o);
  ASSERT_TRUE(kubelet.Start());
  ASSERT_TRUE(kubelet.WaitForPlugin(kDriver));
  EXPECT_EQ(kubelet.plugin(kDriver)->version, "v1beta1.DRAPlugin");
  std::map<std::string, PrepareOutcome> out;
  ASSERT_TRUE(kubelet.Prepare(kDriver, {{"ns", "uid-1", "one"}}, &out).ok());
  ASSERT_EQ(out.count("uid-1"), 1u);
  ASSERT_EQ(out["uid-1"].devices.size(), 1u);
  EXPECT_EQ(out["uid-1"].devices[0].device, "gpu-0");
  EXPECT_EQ(out["uid-1"].devices[0].pool, "node-a");
  EXPECT_EQ(out["uid-1"].devices[0].request_names, std::vector<std::string>{"gpu"});
  EXPECT_EQ(out["uid-1"].devices[0].cdi_ids,
            std::vector<std::string>{"gpu-agent.github.io/gpu=uid-1-gpu-0"});
}

TEST_F(DraServerTest, ARefusedRegistrationIsRecordedWithTheKubeletsReason) {
  StartServer();
  DraKubelet::Options o = KubeletOptions();
  o.refuse_reason = "driver name already registered by another plugin";
  DraKubelet kubelet(o);
  ASSERT_TRUE(kubelet.Start());
  ASSERT_TRUE(WaitFor([&] { return server_->registration().refusals == 1; }));
  EXPECT_FALSE(server_->registration().registered);
  EXPECT_EQ(server_->registration().last_refusal, o.refuse_reason);
  EXPECT_FALSE(kubelet.plugin(kDriver).has_value());
}

TEST_F(DraServerTest, EveryClaimOfABatchIsAnsweredEachWithItsOwnError) {
  StartServer();
  DraKubelet kubelet(KubeletOptions());
  ASSERT_TRUE(kubelet.Start());
  ASSERT_TRUE(kubelet.WaitForPlugin(kDriver));
  std::map<std::string, PrepareOutcome> out;
  ASSERT_TRUE(
      kubelet
          .Prepare(kDriver,
                   {{"ns", "uid-1", "one"}, {"ns", "uid-2", "two"}, {"ns", "uid-3", "three"}}, &out)
          .ok());
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out["uid-1"].error, "");
  EXPECT_EQ(out["uid-2"].error, "claim ns/two: not allocated");
  // The handler left uid-3 out: answered with an error naming it.
  EXPECT_NE(out["uid-3"].error.find("ns/three (uid-3)"), std::string::npos) << out["uid-3"].error;
  EXPECT_EQ(server_->stats().prepare_calls, 1u);
  EXPECT_EQ(server_->stats().claim_errors, 2u);

  std::map<std::string, std::string> un;
  ASSERT_TRUE(kubelet.Unprepare(kDriver, {{"ns", "uid-1", "one"}, {"ns", "bad", "b"}}, &un).ok());
  EXPECT_EQ(un, (std::map<std::string, std::string>{{"uid-1", ""}, {"bad", "cannot remove"}}));
}

TEST_F(DraServerTest, TheHealthStreamSendsTheDevicesOnOpenOnEveryVersionAKubeletPicks) {
  StartServer();
  // A reason past the 1,024 characters the kubelet keeps is cut as it
  // would cut it.
  const std::string long_reason = "XID 79 " + std::string(1100, 'x');
  // Bytes that are not UTF-8 would make the kubelet refuse the whole message
  // (proto3 strings are UTF-8; so does this stand-in's decoder).
  const std::string stray = std::string("link \xff down \xe2\x82", 14);
  server_->SetHealth({{"node-a", "gpu-0", true, ""},
                      {"node-a", "gpu-1", false, "XID 48: double-bit ECC error"},
                      {"node-a", "gpu-2", false, long_reason},
                      {"node-a", "gpu-3", false, stray}});
  // Newer kubelets take the newest they know; 1.34's knows only v1alpha1.
  const std::vector<std::pair<std::vector<std::string>, std::string>> kubelets = {
      {{"v1.DRAResourceHealth", "v1alpha1.DRAResourceHealth"}, "v1.DRAResourceHealth"},
      {{"v1beta1.DRAResourceHealth", "v1alpha1.DRAResourceHealth"}, "v1beta1.DRAResourceHealth"},
      {{"v1alpha1.DRAResourceHealth"}, "v1alpha1.DRAResourceHealth"},
  };
  for (const auto& [known, picked] : kubelets) {
    SCOPED_TRACE(picked);
    DraKubelet::Options o = KubeletOptions();
    o.known_health_versions = known;
    DraKubelet kubelet(o);
    ASSERT_TRUE(kubelet.Start());
    ASSERT_TRUE(kubelet.WaitForPlugin(kDriver));
    EXPECT_EQ(kubelet.plugin(kDriver)->health_version, picked);
    std::vector<DraKubelet::Health> health;
    ASSERT_TRUE(kubelet.FirstHealth(kDriver, &health).ok());
    ASSERT_EQ(health.size(), 4u);
    EXPECT_EQ(health[0].pool, "node-a");
    EXPECT_EQ(health[0].device, "gpu-0");
    EXPECT_TRUE(health[0].healthy);
    EXPECT_EQ(health[0].message, "");
    EXPECT_EQ(health[1].device, "gpu-1");
    EXPECT_FALSE(health[1].healthy);
    EXPECT_EQ(health[1].message, "XID 48: double-bit ECC error");
    EXPECT_FALSE(health[2].healthy);
    EXPECT_EQ(health[2].message, long_reason.substr(0, 1021) + "...");
    EXPECT_EQ(health[3].message, "link \xef\xbf\xbd down \xef\xbf\xbd\xef\xbf\xbd");
    kubelet.Stop();
  }
}

TEST_F(DraServerTest, AHealthStreamDroppedWhileOpenIsForgottenAndTheNextGetsTheCurrentList) {
  StartServer();
  server_->SetHealth({{"node-a", "gpu-0", true, ""}});
  DraKubelet kubelet(KubeletOptions());
  ASSERT_TRUE(kubelet.Start());
  ASSERT_TRUE(kubelet.WaitForPlugin(kDriver));
  ASSERT_TRUE(kubelet.WatchHealth(kDriver));
  ASSERT_TRUE(WaitFor([&] { return kubelet.health_lists() == 1; }));
  EXPECT_TRUE(WaitFor([&] { return server_->stats().health_streams == 1; }));
  // A change reaches the open stream.
  server_->SetHealth({{"node-a", "gpu-0", false, "XID 79"}});
  ASSERT_TRUE(WaitFor([&] { return kubelet.health_lists() == 2; }));
  ASSERT_EQ(kubelet.last_health().size(), 1u);
  EXPECT_FALSE(kubelet.last_health()[0].healthy);
  // The connection breaks under the open stream: the server lets it go.
  ASSERT_TRUE(kubelet.DropConnection(kDriver));
  ASSERT_TRUE(WaitFor([&] { return kubelet.health_watch_end().has_value(); }));
  EXPECT_TRUE(WaitFor([&] { return server_->stats().health_streams == 0; }));
  // A change with no stream open, then the kubelet's next stream: the
  // current list at once.
  server_->SetHealth({{"node-a", "gpu-0", true, ""}});
  ASSERT_TRUE(kubelet.WatchHealth(kDriver));
  ASSERT_TRUE(WaitFor([&] { return kubelet.health_lists() == 1; }));
  ASSERT_EQ(kubelet.last_health().size(), 1u);
  EXPECT_TRUE(kubelet.last_health()[0].healthy);
  EXPECT_TRUE(WaitFor([&] { return server_->stats().health_streams == 1; }));
  kubelet.StopHealthWatch();
  EXPECT_TRUE(WaitFor([&] { return server_->stats().health_streams == 0; }));
}

// A rolling update's instance: its sockets carry its pod UID, so a new pod
// registers beside the old one; while another instance serves the health
// stream this one ends its streams and refuses new ones, and serves again
// when it is asked to.
TEST_F(DraServerTest, AnInstancesSocketsCarryItsUidAndItsHealthStreamCanStandDown) {
  options_.instance = "9a2e4b77-5c3d-4f1a-8b62-1e7b2c8f1b02";
  StartServer();
  server_->SetHealth({{"node-a", "gpu-0", true, ""}});
  DraKubelet kubelet(KubeletOptions());
  ASSERT_TRUE(kubelet.Start());
  ASSERT_TRUE(kubelet.WaitForPlugin(kDriver));
  const DraKubelet::Plugin p = *kubelet.plugin(kDriver);
  EXPECT_EQ(p.socket,
            dir_.Join("registry") + "/" + kDriver + "-" + options_.instance + "-reg.sock");
  EXPECT_EQ(p.endpoint,
            dir_.Join("plugins") + "/" + kDriver + "/dra-" + options_.instance + ".sock");
  ASSERT_TRUE(kubelet.WatchHealth(kDriver));
  ASSERT_TRUE(WaitFor([&] { return kubelet.health_lists() == 1; }));
  server_->SetHealthServing(false);
  ASSERT_TRUE(WaitFor([&] { return kubelet.health_watch_end().has_value(); }));
  EXPECT_EQ(kubelet.health_watch_end()->error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(kubelet.health_watch_end()->error_message(),
            "another instance of gpu.gpu-agent.github.io on this node serves its devices' health");
  std::vector<DraKubelet::Health> health;
  EXPECT_EQ(kubelet.FirstHealth(kDriver, &health).error_code(), grpc::StatusCode::UNAVAILABLE);
  server_->SetHealthServing(true);
  ASSERT_TRUE(kubelet.FirstHealth(kDriver, &health).ok());
  EXPECT_EQ(health.size(), 1u);
}

// The pod UID in both sockets' names while the paths fit what gRPC binds
// (105 bytes); past that, its first 8 characters, in both.
TEST(DraServerSocketsTest, ThePodUidIsCutWhereTheWholeWouldNotFit) {
  DraServerOptions o;
  o.driver_name = kDriver;
  o.registry_dir = "/var/lib/kubelet/plugins_registry";
  o.plugin_dir = "/var/lib/kubelet/plugins";
  o.instance = "9a2e4b77-5c3d-4f1a-8b62-1e7b2c8f1b02";
  EXPECT_EQ(InstanceTag(o), o.instance);
  EXPECT_EQ(RegistrationSocketPath(o),
            "/var/lib/kubelet/plugins_registry/gpu.gpu-agent.github.io-"
            "9a2e4b77-5c3d-4f1a-8b62-1e7b2c8f1b02-reg.sock");
  o.registry_dir = "/tmp/modern/kubelet/plugins_registry";  // 106 bytes with the whole UID
  EXPECT_EQ(InstanceTag(o), "9a2e4b77");
  EXPECT_EQ(RegistrationSocketPath(o),
            "/tmp/modern/kubelet/plugins_registry/gpu.gpu-agent.github.io-9a2e4b77-reg.sock");
  EXPECT_EQ(PluginSocketPath(o),
            "/var/lib/kubelet/plugins/gpu.gpu-agent.github.io/dra-9a2e4b77.sock");
  o.instance = "";
  EXPECT_EQ(PluginSocketPath(o), "/var/lib/kubelet/plugins/gpu.gpu-agent.github.io/dra.sock");
}

// The kubelet takes a device it has heard nothing of for 30 s as of unknown
// health: while a stream is open the list goes out again, unchanged, every
// health_resend (here 50 ms for the test; 10 s by default).
TEST_F(DraServerTest, AnOpenHealthStreamGetsTheListAgainBeforeTheKubeletsTimeout) {
  options_.health_resend = std::chrono::milliseconds(50);
  StartServer();
  server_->SetHealth({{"node-a", "gpu-0", false, "XID 79"}});
  DraKubelet kubelet(KubeletOptions());
  ASSERT_TRUE(kubelet.Start());
  ASSERT_TRUE(kubelet.WaitForPlugin(kDriver));
  ASSERT_TRUE(kubelet.WatchHealth(kDriver));
  // Three lists with no change at all: the first at open, two resent.
  ASSERT_TRUE(WaitFor([&] { return kubelet.health_lists() >= 3; }));
  EXPECT_GE(server_->stats().health_resends, 2u);
  ASSERT_EQ(kubelet.last_health().size(), 1u);
  EXPECT_FALSE(kubelet.last_health()[0].healthy);
  EXPECT_EQ(kubelet.last_health()[0].message, "XID 79");
  kubelet.StopHealthWatch();
}

TEST_F(DraServerTest, TheDefaultHeartbeatIsWellInsideTheKubeletsThirtySeconds) {
  EXPECT_LE(DraServerOptions().health_resend, std::chrono::seconds(15));
}

TEST_F(DraServerTest, AKubeletThatKnowsNoHealthVersionStillRegisters) {
  StartServer();
  DraKubelet::Options o = KubeletOptions();
  o.known_health_versions = {};
  DraKubelet kubelet(o);
  ASSERT_TRUE(kubelet.Start());
  ASSERT_TRUE(kubelet.WaitForPlugin(kDriver));
  EXPECT_EQ(kubelet.plugin(kDriver)->version, "v1.DRAPlugin");
  EXPECT_FALSE(kubelet.plugin(kDriver)->health());
  EXPECT_TRUE(WaitFor([&] { return server_->registration().registered; }));
}

TEST_F(DraServerTest, StopRemovesBothSocketsAndTheKubeletForgetsThePlugin) {
  StartServer();
  DraKubelet kubelet(KubeletOptions());
  ASSERT_TRUE(kubelet.Start());
  ASSERT_TRUE(kubelet.WaitForPlugin(kDriver));
  const std::string reg = server_->registration_socket();
  const std::string dra = server_->plugin_socket();
  server_->Stop();
  struct stat st;
  EXPECT_NE(::stat(reg.c_str(), &st), 0);
  EXPECT_NE(::stat(dra.c_str(), &st), 0);
  EXPECT_TRUE(WaitFor([&] { return !kubelet.plugin(kDriver).has_value(); }));
}

TEST_F(DraServerTest, ASocketSomeoneRemovesIsServedAgainAndRegisteredAnew) {
  StartServer();
  DraKubelet kubelet(KubeletOptions());
  ASSERT_TRUE(kubelet.Start());
  ASSERT_TRUE(kubelet.WaitForPlugin(kDriver));
  ASSERT_EQ(::unlink(server_->registration_socket().c_str()), 0);
  ASSERT_TRUE(WaitFor([&] { return kubelet.registrations() == 2; }));
  EXPECT_TRUE(kubelet.plugin(kDriver).has_value());
  ASSERT_EQ(::unlink(server_->plugin_socket().c_str()), 0);
  ASSERT_TRUE(WaitFor([&] { return server_->stats().socket_heals == 2; }))
      << server_->stats().socket_heals;
  std::map<std::string, PrepareOutcome> out;
  ASSERT_TRUE(WaitFor([&] {
    out.clear();
    return kubelet.Prepare(kDriver, {{"ns", "uid-1", "one"}}, &out).ok();
  }));
  EXPECT_EQ(out["uid-1"].devices.size(), 1u);
  server_->Stop();
  struct stat st;
  EXPECT_NE(::stat(server_->registration_socket().c_str(), &st), 0);
  EXPECT_NE(::stat(server_->plugin_socket().c_str(), &st), 0);
}

TEST_F(DraServerTest, AMissingRegistryFolderIsAnErrorNamingIt) {
  options_.registry_dir = dir_.Join("nowhere");
  auto server = DraServer::Start(options_, handler_);
  ASSERT_FALSE(server.ok());
  EXPECT_NE(server.status().message().find(dir_.Join("nowhere")), std::string::npos)
      << server.status();
}

}  // namespace
}  // namespace gpu_agent::dra
