// `gpu-agent capacity` as a subprocess against the API server stand-in,
// over plain HTTP (kubectl proxy) and HTTPS with a CA made at test time.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>

#include "api_server_stub.h"
#include "support/agent_env.h"

namespace gpu_agent::testing {
namespace {

constexpr const char* kGpu = "nvidia.com/gpu";

class CapacityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    pki_dir_ = new TempDir;
    pki_ = new TestPki(MakeTestPki(pki_dir_->path()));
  }
  static void TearDownTestSuite() {
    delete pki_;
    delete pki_dir_;
  }

  RunResult Capacity(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
    args.insert(args.begin(), "capacity");
    return RunAgent(args, env);
  }

  static TempDir* pki_dir_;
  static TestPki* pki_;
  TempDir dir_;
};
TempDir* CapacityTest::pki_dir_ = nullptr;
TestPki* CapacityTest::pki_ = nullptr;

TEST_F(CapacityTest, SetThroughProxySendsTheDocumentedRequest) {
  ApiServerStub api;
  api.AddNode("gpu-node-1");
  RunResult r = Capacity({"set", "--proxy=" + api.url(), "--node", "gpu-node-1", "--count", "4"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(api.Capacity("gpu-node-1", kGpu), "4");
  EXPECT_EQ(api.Allocatable("gpu-node-1", kGpu), "4");
  ASSERT_EQ(api.patch_count(), 1);
  EXPECT_EQ(api.patch_content_types()[0], "application/json-patch+json");
  EXPECT_EQ(api.patch_bodies()[0],
            R"([{"op":"test","path":"/metadata/resourceVersion","value":"101"},)"
            R"({"op":"add","path":"/status/capacity/nvidia.com~1gpu","value":"4"},)"
            R"({"op":"add","path":"/status/allocatable/nvidia.com~1gpu","value":"4"}])");
  EXPECT_NE(r.out.find("nvidia.com/gpu capacity 4 (was not set)"), std::string::npos) << r.out;
  // Again: nothing to do, no PATCH.
  r = Capacity({"set", "--proxy=" + api.url(), "--node", "gpu-node-1", "--count", "4"});
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(api.patch_count(), 1);
  EXPECT_NE(r.out.find("is already 4"), std::string::npos);
}

TEST_F(CapacityTest, CreatesMissingCapacityObject) {
  ApiServerStub api;
  api.AddNode("fresh", {}, /*with_capacity=*/false);
  RunResult r = Capacity(
      {"set", "--proxy=" + api.url(), "--node", "fresh", "--count", "2", "--allocatable=false"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(api.Capacity("fresh", kGpu), "2");
  EXPECT_EQ(api.Allocatable("fresh", kGpu), std::nullopt);
}

TEST_F(CapacityTest, GetAndRemove) {
  ApiServerStub api;
  api.AddNode("n1", {{"cpu", "8"}, {kGpu, "8"}});
  RunResult r = Capacity({"get", "--proxy=" + api.url(), "--node", "n1", "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "{\"node\":\"n1\",\"resource\":\"nvidia.com/gpu\",\"capacity\":\"8\",\"allocatable\":"
            "\"8\"}\n");
  r = Capacity({"remove", "--proxy=" + api.url(), "--node", "n1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(api.Capacity("n1", kGpu), std::nullopt);
  EXPECT_EQ(api.Capacity("n1", "cpu"), "8");
  r = Capacity({"get", "--proxy=" + api.url(), "--node", "n1"});
  EXPECT_NE(r.out.find("capacity (none)"), std::string::npos) << r.out;
}

TEST_F(CapacityTest, DryRunPrintsTheRequestWithTheTokenRedacted) {
  const std::string token = dir_.Write("token", "s3cr3t-token\n");
  RunResult r =
      Capacity({"set", "--server", "https://10.0.0.1:6443", "--token-file", token, "--node",
                "gpu-node-1", "--count", "4", "--resource", "example.com/fpga", "--dry-run"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "PATCH https://10.0.0.1:6443/api/v1/nodes/gpu-node-1/status\n"
            "Authorization: Bearer <redacted>\n"
            "Content-Type: application/json-patch+json\n"
            "User-Agent: gpu-agent/0.1.0\n\n"
            R"([{"op":"add","path":"/status/capacity/example.com~1fpga","value":"4"},)"
            R"({"op":"add","path":"/status/allocatable/example.com~1fpga","value":"4"}])"
            "\n");
  EXPECT_EQ(r.out.find("s3cr3t"), std::string::npos);
}

TEST_F(CapacityTest, HttpsWithCaAndTokenAndNodeNameFromEnv) {
  ApiServerStub api(pki_->cert, pki_->key);
  api.AddNode("n2");
  api.AllowToken("good");
  const std::string token = dir_.Write("token", "good");
  RunResult r = Capacity({"set", "--server", api.url(), "--certificate-authority", pki_->ca,
                          "--token-file", token, "--count", "3"},
                         {{"NODE_NAME", "n2"}});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(api.Capacity("n2", kGpu), "3");
}

TEST_F(CapacityTest, TlsFailuresSayWhy) {
  ApiServerStub api(pki_->cert, pki_->key);
  api.AddNode("n3");
  RunResult wrong_ca = Capacity(
      {"get", "--server", api.url(), "--certificate-authority", pki_->other_ca, "--node", "n3"});
  EXPECT_EQ(wrong_ca.code, 1);
  EXPECT_NE(wrong_ca.err.find("TLS: the certificate of API server https://localhost"),
            std::string::npos)
      << wrong_ca.err;
  EXPECT_NE(wrong_ca.err.find("unable to get local issuer certificate"), std::string::npos)
      << wrong_ca.err;
  // Right CA, wrong name: the certificate is for localhost, not 127.0.0.1.
  RunResult wrong_host =
      Capacity({"get", "--server", "https://127.0.0.1:" + std::to_string(api.port()),
                "--certificate-authority", pki_->ca, "--node", "n3"});
  EXPECT_EQ(wrong_host.code, 1);
  EXPECT_NE(wrong_host.err.find("does not match the host name"), std::string::npos)
      << wrong_host.err;
  // Only when asked explicitly is verification off.
  RunResult insecure =
      Capacity({"get", "--server", "https://127.0.0.1:" + std::to_string(api.port()),
                "--insecure-skip-tls-verify", "--node", "n3"});
  EXPECT_EQ(insecure.code, 0) << insecure.err;
}

TEST_F(CapacityTest, RotatedTokenIsReReadAfter401) {
  ApiServerStub api;
  api.AddNode("n4");
  api.AllowToken("new-token");
  const std::string token = dir_.Write("token", "old-token");
  api.OnUnauthorized([&] { dir_.Write("token", "new-token"); });  // the kubelet rotates it
  RunResult r = Capacity(
      {"set", "--server", api.url(), "--token-file", token, "--node", "n4", "--count", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(api.Capacity("n4", kGpu), "1");
}

TEST_F(CapacityTest, ApiErrorsAreExplained) {
  ApiServerStub api;
  api.AddNode("n5");
  api.AllowToken("reader", /*may_patch=*/false, "system:serviceaccount:kube-system:gpu-agent");
  api.AllowToken("writer");
  const std::string reader = dir_.Write("reader", "reader");
  const std::string writer = dir_.Write("writer", "writer");
  const std::string bad = dir_.Write("bad", "nope");
  auto set = [&](const std::string& token_file, const std::string& node) {
    return Capacity(
        {"set", "--server", api.url(), "--token-file", token_file, "--node", node, "--count", "2"});
  };
  RunResult unauth = set(bad, "n5");
  EXPECT_EQ(unauth.code, 1);
  EXPECT_NE(unauth.err.find("rejected the credentials (401 Unauthorized)"), std::string::npos)
      << unauth.err;
  RunResult forbidden = set(reader, "n5");
  EXPECT_EQ(forbidden.code, 1);
  EXPECT_NE(forbidden.err.find("cannot patch resource \"nodes/status\""), std::string::npos)
      << forbidden.err;
  EXPECT_NE(forbidden.err.find("resources [\"nodes/status\"], verbs [\"patch\"]"),
            std::string::npos)
      << forbidden.err;
  RunResult missing = set(writer, "no-such-node");
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.err.find("node \"no-such-node\" not found"), std::string::npos) << missing.err;
  api.FailNextPatches(422);
  RunResult invalid = set(writer, "n5");
  EXPECT_EQ(invalid.code, 1);
  EXPECT_NE(invalid.err.find("the server rejected our request due to an error in our request"),
            std::string::npos);
  EXPECT_NE(invalid.err.find("Sent: [{\"op\":\"test\""), std::string::npos) << invalid.err;
  EXPECT_NE(invalid.err.find("resourceVersion"), std::string::npos);
  api.FailNextPatches(500);
  RunResult failed = set(writer, "n5");
  EXPECT_EQ(failed.code, 1);
  EXPECT_NE(failed.err.find("the API server failed (500"), std::string::npos) << failed.err;
  api.FailNextPatches(429);
  RunResult throttled = set(writer, "n5");
  EXPECT_NE(throttled.err.find("throttling (429)"), std::string::npos) << throttled.err;
  // A 409 is retried after re-reading.
  api.FailNextPatches(409);
  RunResult conflict = set(writer, "n5");
  EXPECT_EQ(conflict.code, 0) << conflict.err;
  EXPECT_EQ(api.Capacity("n5", kGpu), "2");
}

TEST_F(CapacityTest, BadServerAnswers) {
  ApiServerStub api;
  api.AddNode("n6");
  api.SetGetMode(ApiServerStub::GetMode::kGarbage);
  RunResult garbage = Capacity({"get", "--proxy=" + api.url(), "--node", "n6"});
  EXPECT_EQ(garbage.code, 1);
  EXPECT_NE(garbage.err.find("is not valid JSON"), std::string::npos) << garbage.err;
  EXPECT_NE(garbage.err.find("line 1, column 1"), std::string::npos) << garbage.err;
  api.SetGetMode(ApiServerStub::GetMode::kHuge);
  RunResult huge = Capacity({"get", "--proxy=" + api.url(), "--node", "n6"});
  EXPECT_EQ(huge.code, 1);
  EXPECT_NE(huge.err.find("bytes; refused"), std::string::npos) << huge.err;
  api.SetGetMode(ApiServerStub::GetMode::kHang);
  RunResult hang =
      Capacity({"get", "--proxy=" + api.url(), "--node", "n6", "--request-timeout", "1s"});
  EXPECT_EQ(hang.code, 1);
  EXPECT_NE(hang.err.find("did not answer in time"), std::string::npos) << hang.err;
  api.SetGetMode(ApiServerStub::GetMode::kNormal);
  // One answer cut off (a server restart behind a kept-alive connection) is
  // asked again at once on a new connection; two in a row are an error.
  api.DropNextGets(1);
  const int gets = api.get_count();
  RunResult resent = Capacity({"get", "--proxy=" + api.url(), "--node", "n6"});
  EXPECT_EQ(resent.code, 0) << resent.err;
  EXPECT_EQ(api.get_count(), gets + 2);
  api.DropNextGets(2);
  RunResult dropped = Capacity({"get", "--proxy=" + api.url(), "--node", "n6"});
  EXPECT_EQ(dropped.code, 1);
  EXPECT_NE(dropped.err.find("closed the connection mid-answer"), std::string::npos) << dropped.err;
  RunResult refused = Capacity({"get", "--proxy=http://127.0.0.1:1", "--node", "n6"});
  EXPECT_EQ(refused.code, 1);
  EXPECT_NE(refused.err.find("cannot connect to kubectl proxy at http://127.0.0.1:1"),
            std::string::npos)
      << refused.err;
}

TEST_F(CapacityTest, BadInputsAreUsageErrors) {
  struct Case {
    std::vector<std::string> args;
    std::string expect;
  } cases[] = {
      {{"set", "--proxy", "--node", "n", "--count", "-1"}, "is not a whole number of 0 or more"},
      {{"set", "--proxy", "--node", "n", "--count", "two"}, "\"two\" is not a whole number"},
      {{"set", "--proxy", "--node", "n"}, "exactly one of --count K and --discover"},
      {{"set", "--proxy", "--node", "n", "--count", "1", "--discover"}, "excludes"},
      {{"set", "--proxy", "--node", "Bad_Node", "--count", "1"}, "node name \"Bad_Node\""},
      {{"set", "--proxy", "--count", "1"}, "no node: pass --node or set NODE_NAME"},
      {{"set", "--proxy", "--node", "n", "--count", "1", "--resource", "gpu"}, "has no domain"},
      {{"set", "--proxy", "--node", "n", "--count", "1", "--resource", "kubernetes.io/gpu"},
       "reserved domain"},
      {{"set", "--proxy", "--node", "n", "--count", "1", "--resource", "requests.example.com/gpu"},
       "must not start with \"requests.\""},
      {{"set", "--proxy", "--node", "n", "--count", "1", "--resource",
        "example.com/" + std::string(64, 'x')},
       "at most 63"},
      {{"get", "--server", "htp://x", "--node", "n"}, "scheme must be http or https"},
      {{"get", "--server", "https://host:99999", "--node", "n"}, "invalid port"},
      {{"get", "--proxy", "--server", "https://x", "--node", "n"}, "excludes"},
  };
  for (const Case& c : cases) {
    RunResult r = Capacity(c.args);
    EXPECT_EQ(r.code, 2) << c.expect << "\n" << r.err;
    EXPECT_NE((r.out + r.err).find(c.expect), std::string::npos) << r.err;
  }
}

std::string Base64File(const std::string& path) {
  std::string out;
  FILE* p = ::popen(("base64 -w0 " + path).c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  ::pclose(p);
  return out;
}

TEST_F(CapacityTest, KubeconfigWithEachCredentialKind) {
  ApiServerStub api(pki_->cert, pki_->key);
  api.AddNode("kc");
  api.AllowToken("inline-token");
  api.AllowToken("exec-token");
  const std::string port = std::to_string(api.port());
  const std::string plugin =
      dir_.Write("bin/token.sh",
                 "#!/bin/sh\necho '{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",'"
                 "'\"kind\":\"ExecCredential\",\"status\":{\"token\":\"exec-token\"}}'\n");
  ::chmod(plugin.c_str(), 0755);
  const std::string failing =
      dir_.Write("bin/fail.sh", "#!/bin/sh\necho 'login required' >&2\nexit 1\n");
  ::chmod(failing.c_str(), 0755);
  const std::string kubeconfig = dir_.Write("kube/config", R"(apiVersion: v1
kind: Config
current-context: inline
clusters:
- name: stub
  cluster:
    server: https://localhost:)" + port + R"(
    certificate-authority-data: )" + Base64File(pki_->ca) + R"(
- name: by-ip
  cluster:
    server: https://127.0.0.1:)" + port + R"(
    certificate-authority-data: )" + Base64File(pki_->ca) + R"(
    tls-server-name: localhost
contexts:
- name: inline
  context: {cluster: stub, user: inline}
- name: exec
  context: {cluster: stub, user: exec}
- name: exec-fails
  context: {cluster: stub, user: exec-fails}
- name: by-ip
  context: {cluster: by-ip, user: inline}
users:
- name: inline
  user: {token: inline-token}
- name: exec
  user:
    exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: ../bin/token.sh}
- name: exec-fails
  user:
    exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: ../bin/fail.sh}
)");
  auto set = [&](std::vector<std::string> extra, const std::string& count) {
    std::vector<std::string> args = {"set", "--node", "kc", "--count", count};
    args.insert(args.end(), extra.begin(), extra.end());
    return Capacity(args);
  };
  RunResult inline_token = set({"--kubeconfig", kubeconfig}, "1");
  ASSERT_EQ(inline_token.code, 0) << inline_token.err;
  EXPECT_EQ(api.Capacity("kc", kGpu), "1");
  RunResult via_env = Capacity({"set", "--node", "kc", "--count", "2", "--context", "exec"},
                               {{"KUBECONFIG", "/nonexistent/config:" + kubeconfig}});
  ASSERT_EQ(via_env.code, 0) << via_env.err;
  EXPECT_EQ(api.Capacity("kc", kGpu), "2");
  RunResult tls_name = set({"--kubeconfig", kubeconfig, "--context", "by-ip"}, "3");
  ASSERT_EQ(tls_name.code, 0) << tls_name.err;
  EXPECT_EQ(api.Capacity("kc", kGpu), "3");
  RunResult exec_fails = set({"--kubeconfig", kubeconfig, "--context", "exec-fails"}, "4");
  EXPECT_EQ(exec_fails.code, 1);
  EXPECT_NE(exec_fails.err.find("failed (exit code 1): login required"), std::string::npos)
      << exec_fails.err;
  RunResult no_ctx = set({"--kubeconfig", kubeconfig, "--context", "missing"}, "4");
  EXPECT_NE(no_ctx.err.find("context \"missing\" not found"), std::string::npos) << no_ctx.err;
  const std::string broken = dir_.Write("kube/broken", "clusters:\n- name: [\n");
  RunResult malformed = set({"--kubeconfig", broken}, "4");
  EXPECT_NE(malformed.err.find(broken + ":"), std::string::npos) << malformed.err;
}

TEST_F(CapacityTest, KubeconfigWithClientCertificate) {
  ApiServerStub api(pki_->cert, pki_->key, pki_->ca);  // demands a client certificate
  api.AddNode("mtls");
  const std::string port = std::to_string(api.port());
  auto kubeconfig = [&](const std::string& user) {
    return dir_.Write("kube/" + std::to_string(user.size()), R"(current-context: c
clusters:
- name: s
  cluster: {server: "https://localhost:)" + port + R"(", certificate-authority: )" +
                                                                 pki_->ca + R"(}
contexts:
- name: c
  context: {cluster: s, user: u}
users:
- name: u
  user: )" + user + "\n");
  };
  RunResult files = Capacity({"set", "--node", "mtls", "--count", "5", "--kubeconfig",
                              kubeconfig("{client-certificate: " + pki_->client_cert +
                                         ", client-key: " + pki_->client_key + "}")});
  ASSERT_EQ(files.code, 0) << files.err;
  EXPECT_EQ(api.Capacity("mtls", kGpu), "5");
  RunResult data =
      Capacity({"set", "--node", "mtls", "--count", "6", "--kubeconfig",
                kubeconfig("{client-certificate-data: " + Base64File(pki_->client_cert) +
                           ", client-key-data: " + Base64File(pki_->client_key) + "}")});
  ASSERT_EQ(data.code, 0) << data.err;
  EXPECT_EQ(api.Capacity("mtls", kGpu), "6");
  RunResult none = Capacity({"get", "--node", "mtls", "--kubeconfig", kubeconfig("{}")});
  EXPECT_EQ(none.code, 1);
}

TEST_F(CapacityTest, DiscoverCountsWhatPluginModeWouldAdvertise) {
  ApiServerStub api;
  api.AddNode("n8");
  auto env = FakeNvmlEnv(FixturePath("2-gpu-mig.yaml"));
  RunResult r = Capacity({"set", "--proxy=" + api.url(), "--node", "n8", "--discover",
                          "--mig-strategy", "mixed", "--resource", "nvidia.com/mig-1g.10gb"},
                         env);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(api.Capacity("n8", "nvidia.com/mig-1g.10gb"), "2");
  // A resource this node does not advertise is named, with the ones it does.
  r = Capacity({"set", "--proxy=" + api.url(), "--node", "n8", "--discover", "--mig-strategy",
                "mixed", "--resource", "nvidia.com/mig-3g.40gb"},
               env);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("this node advertises no nvidia.com/mig-3g.40gb (its resources: "
                       "nvidia.com/mig-2g.20gb, nvidia.com/mig-1g.10gb, nvidia.com/gpu)"),
            std::string::npos)
      << r.err;
}

TEST_F(CapacityTest, DiscoverCountsHealthyGpusTimesReplicas) {
  ApiServerStub api;
  api.AddNode("n7");
  const std::string config = dir_.Write("ts.yaml", R"(version: v1
sharing:
  timeSlicing:
    resources:
    - name: nvidia.com/gpu
      replicas: 3
)");
  auto env = FakeNvmlEnv(FixturePath("8-gpu-pcie.yaml"));
  RunResult r = Capacity(
      {"set", "--proxy=" + api.url(), "--node", "n7", "--discover", "--config", config}, env);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(api.Capacity("n7", kGpu), "24");
}

}  // namespace
}  // namespace gpu_agent::testing
