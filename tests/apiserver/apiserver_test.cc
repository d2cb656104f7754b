// Unit tests of the API server client pieces: JSON pointer and patch,
// Node parsing, patch planning, URLs, kubeconfig, exec credentials.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "apiserver/connection.h"
#include "apiserver/exec_credential.h"
#include "apiserver/json_patch.h"
#include "apiserver/kubeconfig.h"
#include "apiserver/label_patch.h"
#include "apiserver/line_buffer.h"
#include "apiserver/node.h"
#include "apiserver/node_client.h"
#include "support/test_support.h"

namespace gpu_agent::apiserver {
namespace {

using gpu_agent::testing::TempDir;

TEST(JsonPointerTest, EscapesPerRfc6901) {
  EXPECT_EQ(JsonPointer({"status", "capacity", "nvidia.com/gpu"}),
            "/status/capacity/nvidia.com~1gpu");
  EXPECT_EQ(EscapePointerToken("a~b/c"), "a~0b~1c");
  EXPECT_EQ(EscapePointerToken("~1"), "~01");  // '~' first, so "~1" stays literal
}

TEST(JsonPatchTest, SerialisesWithEscaping) {
  JsonPatch p;
  p.Test("/metadata/resourceVersion", "7");
  p.Add("/status/capacity/x~1y", "quote\"d");
  p.AddObject("/status/allocatable", {{"a/b", "1"}});
  p.Remove("/status/capacity/z");
  EXPECT_EQ(p.ToJson(), R"([{"op":"test","path":"/metadata/resourceVersion","value":"7"},)"
                        R"({"op":"add","path":"/status/capacity/x~1y","value":"quote\"d"},)"
                        R"({"op":"add","path":"/status/allocatable","value":{"a/b":"1"}},)"
                        R"({"op":"remove","path":"/status/capacity/z"}])");
}

TEST(NodeTest, ParsesAndPlans) {
  auto node = ParseNode(R"({"kind":"Node","metadata":{"name":"n","resourceVersion":"42"},
      "status":{"capacity":{"cpu":"8","nvidia.com/gpu":"2"},"allocatable":{"cpu":"8"}}})");
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(node->resource_version, "42");
  EXPECT_EQ(node->Capacity("nvidia.com/gpu"), "2");
  EXPECT_EQ(PlanSetCapacity(*node, "nvidia.com/gpu", 2, false).size(), 0u);
  EXPECT_EQ(PlanSetCapacity(*node, "nvidia.com/gpu", 4, true).ToJson(),
            R"([{"op":"test","path":"/metadata/resourceVersion","value":"42"},)"
            R"({"op":"add","path":"/status/capacity/nvidia.com~1gpu","value":"4"},)"
            R"({"op":"add","path":"/status/allocatable/nvidia.com~1gpu","value":"4"}])");
  EXPECT_EQ(PlanRemoveCapacity(*node, "nvidia.com/gpu", true).ToJson(),
            R"([{"op":"test","path":"/metadata/resourceVersion","value":"42"},)"
            R"({"op":"remove","path":"/status/capacity/nvidia.com~1gpu"}])");
}

TEST(NodeTest, MissingParentsAreCreated) {
  auto node = ParseNode(R"({"metadata":{"name":"n","resourceVersion":"1"}})");
  ASSERT_TRUE(node.ok());
  EXPECT_EQ(PlanSetCapacity(*node, "nvidia.com/gpu", 1, true).ToJson(),
            R"([{"op":"test","path":"/metadata/resourceVersion","value":"1"},)"
            R"({"op":"add","path":"/status","value":{}},)"
            R"({"op":"add","path":"/status/capacity","value":{"nvidia.com/gpu":"1"}},)"
            R"({"op":"add","path":"/status/allocatable","value":{"nvidia.com/gpu":"1"}}])");
}

TEST(NodeTest, BadBodies) {
  EXPECT_NE(std::string(ParseNode("{\"a\":\n[1,,2]}").status().message()).find("line 2, column 4"),
            std::string::npos);
  EXPECT_FALSE(ParseNode("[]").ok());
  EXPECT_NE(
      std::string(ParseNode(R"({"kind":"Pod","metadata":{}})").status().message()).find("Pod"),
      std::string::npos);
  // 100,000 levels of nesting: refused before the parse (base/json), so
  // nothing that walks the document afterwards recurses that deep either.
  std::string deep(100000, '[');
  deep += std::string(100000, ']');
  EXPECT_FALSE(ParseNode(deep).ok());
  const std::string nested = "{\"metadata\":{\"name\":\"n\"},\"x\":" + deep + "}";
  EXPECT_EQ(ParseNode(nested).status().message(),
            "the API server's Node nests arrays and objects deeper than 128 levels");
  EXPECT_NE(std::string(ParseNode(std::string(kMaxObjectBytes + 1, ' ')).status().message())
                .find("limit"),
            std::string::npos);
}

TEST(LabelPatchTest, OwnershipDecidesWhatIsTouched) {
  // gpu.count is ours (annotation), gpu.family another writer's, the mig
  // key ours but no longer wanted, team nobody's business.
  auto node = ParseNode(R"({"metadata":{"name":"n","resourceVersion":"7",
      "labels":{"nvidia.com/gpu.count":"2","nvidia.com/gpu.family":"custom",
                "nvidia.com/mig-1g.10gb.count":"2","team":"ml"},
      "annotations":{"gpu-agent.github.io/owned-labels":
                     "nvidia.com/gpu.count,nvidia.com/mig-1g.10gb.count"}}})");
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(OwnedLabels(*node),
            (std::set<std::string>{"nvidia.com/gpu.count", "nvidia.com/mig-1g.10gb.count"}));
  const Labels want = {{"nvidia.com/gpu.count", "1"},
                       {"nvidia.com/gpu.family", "ampere"},
                       {"nvidia.com/gpu.product", "A100"}};
  std::vector<std::string> foreign;
  const JsonPatch p = PlanNode(*node, {}, true, &want, &foreign);
  EXPECT_EQ(p.ToJson(),
            R"([{"op":"test","path":"/metadata/resourceVersion","value":"7"},)"
            R"({"op":"add","path":"/metadata/labels/nvidia.com~1gpu.count","value":"1"},)"
            R"({"op":"add","path":"/metadata/labels/nvidia.com~1gpu.product","value":"A100"},)"
            R"({"op":"remove","path":"/metadata/labels/nvidia.com~1mig-1g.10gb.count"},)"
            R"({"op":"add","path":"/metadata/annotations/gpu-agent.github.io~1owned-labels",)"
            R"("value":"nvidia.com/gpu.count,nvidia.com/gpu.product"}])");
  EXPECT_EQ(foreign, std::vector<std::string>{"nvidia.com/gpu.family"});
}

TEST(LabelPatchTest, RightNodeNeedsNothingAndMissingParentsAreCreated) {
  auto right = ParseNode(R"({"metadata":{"name":"n","resourceVersion":"7",
      "labels":{"nvidia.com/gpu.count":"1"},
      "annotations":{"gpu-agent.github.io/owned-labels":"nvidia.com/gpu.count"}}})");
  ASSERT_TRUE(right.ok());
  EXPECT_FALSE(LabelsDiffer(*right, {{"nvidia.com/gpu.count", "1"}}));
  EXPECT_TRUE(LabelsDiffer(*right, {}));  // turned off: ours go
  auto bare = ParseNode(R"({"metadata":{"name":"n","resourceVersion":"3"}})");
  ASSERT_TRUE(bare.ok());
  EXPECT_FALSE(LabelsDiffer(*bare, {}));  // nothing of ours there: nothing to do
  JsonPatch p;
  PlanLabels(*bare, {{"nvidia.com/gpu.count", "1"}}, &p, nullptr);
  EXPECT_EQ(p.ToJson(),
            R"([{"op":"add","path":"/metadata/labels","value":{"nvidia.com/gpu.count":"1"}},)"
            R"({"op":"add","path":"/metadata/annotations","value":)"
            R"({"gpu-agent.github.io/owned-labels":"nvidia.com/gpu.count"}}])");
}

TEST(LabelPatchTest, LabelRefusalIsToldFromMissingRbac) {
  HttpResponse labels{403, R"({"kind":"Status","message":"nodes \"n\" is forbidden: is not )"
                           R"(allowed to modify labels: nvidia.com/gpu.product","code":403})"};
  const absl::Status refused = ExplainAnswer(labels, "n", "PATCH", "[]");
  EXPECT_TRUE(IsLabelRefusal(refused));
  EXPECT_NE(std::string(refused.message()).find("NodeRestriction"), std::string::npos);
  HttpResponse rbac{403, R"({"kind":"Status","message":"nodes \"n\" is forbidden: User \"u\" )"
                         R"(cannot patch resource \"nodes/status\"","code":403})"};
  const absl::Status missing = ExplainAnswer(rbac, "n", "PATCH", "[]");
  EXPECT_FALSE(IsLabelRefusal(missing));
  EXPECT_NE(std::string(missing.message()).find("RBAC"), std::string::npos);
}

TEST(NodeListTest, TheListsVersionNotTheItems) {
  absl::StatusOr<NodeList> l = ParseNodeList(
      R"({"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"53034"},)"
      R"("items":[{"metadata":{"name":"n","resourceVersion":"52787"},)"
      R"("status":{"capacity":{"nvidia.com/gpu":"8"}}}]})");
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->resource_version, "53034");
  ASSERT_EQ(l->items.size(), 1u);
  EXPECT_EQ(l->items[0].resource_version, "52787");
  EXPECT_EQ(l->items[0].Capacity("nvidia.com/gpu"), "8");
  absl::StatusOr<NodeList> empty =
      ParseNodeList(R"({"kind":"NodeList","metadata":{"resourceVersion":"7"},"items":[]})");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->items.empty());
}

TEST(NodeListTest, BadLists) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"kind":"NodeList","items":[]})", "no metadata.resourceVersion"},
      {R"({"kind":"PodList","metadata":{"resourceVersion":"1"}})", "PodList"},
      {R"({"metadata":{"resourceVersion":"1"},"items":{}})", "items is not a list"},
      {R"({"metadata":{"resourceVersion":"1"},"items":[{"kind":"Pod"}]})", "Pod"},
      {R"({"metadata":{"resourceVersion":"1"},"items":[1]})", "not a JSON object"},
      {"[]", "not an object"},
      {"{\"metadata\":\n{,}}", "line 2, column 2"},
  };
  for (const auto& [body, want] : cases) {
    absl::StatusOr<NodeList> l = ParseNodeList(body);
    ASSERT_FALSE(l.ok()) << body;
    EXPECT_NE(std::string(l.status().message()).find(want), std::string::npos)
        << body << " -> " << l.status();
  }
}

TEST(WatchEventTest, EveryType) {
  absl::StatusOr<WatchEvent> e = ParseWatchEvent(
      R"({"type":"MODIFIED","object":{"kind":"Node","metadata":{"name":"n","resourceVersion":"9"},)"
      R"("status":{"capacity":{"nvidia.com/gpu":"0"}}}})");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->type, WatchEvent::Type::kModified);
  EXPECT_EQ(e->resource_version, "9");
  EXPECT_EQ(e->node.Capacity("nvidia.com/gpu"), "0");
  e = ParseWatchEvent(
      R"({"type":"BOOKMARK","object":{"kind":"Node","metadata":{"resourceVersion":"12"}}})");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->type, WatchEvent::Type::kBookmark);
  EXPECT_EQ(e->resource_version, "12");
  e = ParseWatchEvent(R"({"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired",)"
                      R"j("message":"too old resource version: 52787 (53034)"}})j");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->type, WatchEvent::Type::kError);
  EXPECT_EQ(e->code, 410);
  EXPECT_EQ(e->message, "too old resource version: 52787 (53034)");
  e = ParseWatchEvent(R"({"type":"DELETED","object":{"metadata":{"resourceVersion":"13"}}})");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->type, WatchEvent::Type::kDeleted);
  e = ParseWatchEvent(R"({"type":"ADDED","object":{"metadata":{"resourceVersion":"14"}}})");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->type, WatchEvent::Type::kAdded);
}

TEST(WatchEventTest, BadEvents) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"type":"MODIFIED"})", "has no object"},
      {R"({"type":"MODIFIED","object":[]})", "has no object"},
      {R"({"type":"MODIFIED","object":{"metadata":{}}})", "no metadata.resourceVersion"},
      {R"({"type":"BOOKMARK","object":{}})", "no metadata.resourceVersion"},
      {R"({"type":"SOMETHING","object":{"metadata":{"resourceVersion":"1"}}})",
       "unknown watch event type \"SOMETHING\""},
      {R"({"type":"ADDED","object":{"kind":"Pod","metadata":{"resourceVersion":"1"}}})", "Pod"},
      {"{\"type\":", "is not valid JSON"},
      {std::string(kMaxObjectBytes + 1, ' '), "limit"},
  };
  for (const auto& [line, want] : cases) {
    absl::StatusOr<WatchEvent> e = ParseWatchEvent(line);
    ASSERT_FALSE(e.ok()) << line.substr(0, 80);
    EXPECT_NE(std::string(e.status().message()).find(want), std::string::npos)
        << line.substr(0, 80) << " -> " << e.status();
  }
}

TEST(NodeClientTest, WatchAndListPaths) {
  NodeClient c(nullptr, "gpu-node-1");
  EXPECT_EQ(c.ListPath(),
            "/api/v1/nodes?fieldSelector=metadata.name%3Dgpu-node-1&resourceVersion=0");
  EXPECT_EQ(c.WatchPath("", std::chrono::seconds(600)),
            "/api/v1/nodes?watch=1&allowWatchBookmarks=true&timeoutSeconds=600"
            "&fieldSelector=metadata.name%3Dgpu-node-1");
  EXPECT_EQ(c.WatchPath("53034", std::chrono::seconds(7)),
            "/api/v1/nodes?watch=1&allowWatchBookmarks=true&timeoutSeconds=7"
            "&fieldSelector=metadata.name%3Dgpu-node-1&resourceVersion=53034");
}

TEST(JsonPatchTest, GuardedOnlyWhenATestComesFirst) {
  NodeView n;
  n.resource_version = "5";
  n.has_status = n.has_capacity = n.has_allocatable = true;
  EXPECT_TRUE(PlanSetCapacities(n, {{"nvidia.com/gpu", 8}}, true).guarded());
  JsonPatch unguarded;
  unguarded.Add("/status/capacity/x", "1");
  unguarded.Test("/metadata/resourceVersion", "5");
  EXPECT_FALSE(unguarded.guarded());
  EXPECT_FALSE(JsonPatch().guarded());
}

TEST(UrlTest, ParsesAndRejects) {
  auto v6 = ParseServerUrl("https://[fd00::1]:6443/k8s/");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "fd00::1");
  EXPECT_EQ(v6->port, 6443);
  EXPECT_EQ(v6->path_prefix, "/k8s");
  EXPECT_EQ(v6->Url(), "https://[fd00::1]:6443/k8s");
  EXPECT_EQ(ParseServerUrl("https://api.example.com")->port, 443);
  for (const char* bad : {"api.example.com", "ftp://x", "https://", "https://h:0", "https://h:x",
                          "https://u:p@h", "https://[::1"}) {
    EXPECT_FALSE(ParseServerUrl(bad).ok()) << bad;
  }
}

TEST(InClusterTest, Ipv6HostIsBracketed) {
  ConnectionOptions o;
  auto c = ResolveConnection(o, [](const std::string& k) -> std::optional<std::string> {
    if (k == "KUBERNETES_SERVICE_HOST") return "fd00::10";
    if (k == "KUBERNETES_SERVICE_PORT") return "443";
    return std::nullopt;
  });
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->endpoint.Url(), "https://[fd00::10]:443");
  EXPECT_EQ(c->ca_file, "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt");
  ASSERT_TRUE(c->token);
  EXPECT_EQ(c->token->path(), "/var/run/secrets/kubernetes.io/serviceaccount/token");
  auto none = ResolveConnection(o, [](const std::string&) { return std::optional<std::string>(); });
  EXPECT_NE(std::string(none.status().message()).find("KUBERNETES_SERVICE_HOST is unset"),
            std::string::npos);
}

constexpr const char* kKubeconfig = R"(apiVersion: v1
kind: Config
current-context: prod
clusters:
- name: prod
  cluster:
    server: https://10.0.0.1:6443
    certificate-authority: certs/ca.pem
    tls-server-name: kubernetes
- name: lab
  cluster:
    server: http://127.0.0.1:8001
contexts:
- name: prod
  context: {cluster: prod, user: admin}
- name: lab
  context: {cluster: lab, user: robot}
- name: broken
  context: {cluster: nowhere, user: admin}
users:
- name: admin
  user:
    client-certificate-data: aGVsbG8=
    client-key-data: d29ybGQ=
- name: robot
  user:
    tokenFile: robot.token
)";

TEST(KubeconfigTest, MergesAndSelects) {
  TempDir dir;
  const std::string a = dir.Write("a/config", kKubeconfig);
  const std::string b = dir.Write("b/config", R"(current-context: other
clusters:
- name: prod
  cluster: {server: https://shadowed.example.com}
- name: extra
  cluster: {server: https://extra.example.com}
contexts:
- name: extra
  context: {cluster: extra, user: exec-user}
users:
- name: exec-user
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: ./get-token.sh
      args: [--cluster, extra]
      env: [{name: FOO, value: bar}]
)");
  auto prod = LoadKubeconfig(a + ":" + b, "");
  ASSERT_TRUE(prod.ok()) << prod.status();
  EXPECT_EQ(prod->context, "prod");                          // first file's current-context wins
  EXPECT_EQ(prod->server, "https://10.0.0.1:6443");          // first definition wins
  EXPECT_EQ(prod->ca_file, dir.path() + "/a/certs/ca.pem");  // relative to its file
  EXPECT_EQ(prod->tls_server_name, "kubernetes");
  EXPECT_EQ(prod->client_cert_pem, "hello");
  EXPECT_EQ(prod->client_key_pem, "world");
  auto lab = LoadKubeconfig(a + ":" + b, "lab");
  ASSERT_TRUE(lab.ok());
  EXPECT_EQ(lab->token_file, dir.path() + "/a/robot.token");
  auto extra = LoadKubeconfig(a + ":" + b, "extra");
  ASSERT_TRUE(extra.ok()) << extra.status();
  ASSERT_TRUE(extra->exec.has_value());
  EXPECT_EQ(extra->exec->command, dir.path() + "/b/./get-token.sh");
  EXPECT_EQ(extra->exec->args, (std::vector<std::string>{"--cluster", "extra"}));
  EXPECT_EQ(extra->exec->env.at(0).second, "bar");
}

TEST(KubeconfigTest, BadKubeconfigs) {
  TempDir dir;
  const std::string good = dir.Write("config", kKubeconfig);
  struct Case {
    std::string text;
    std::string context;
    std::string expect;
  } cases[] = {
      {kKubeconfig, "nope", "context \"nope\" not found in kubeconfig"},
      {kKubeconfig, "broken", "names cluster \"nowhere\", which is not defined"},
      {"clusters: [\n  {name: a, cluster: {server: x}\n", "", ":3:1: "},
      {"clusters: 5\n", "", "clusters must be a list"},
      {"contexts:\n- context: {cluster: a}\n", "", "needs a name"},
      {"clusters: []\n", "", "has no current-context; pass --context"},
      {"current-context: c\nclusters:\n- name: a\n  cluster: {server: https://a}\ncontexts:\n- "
       "name: c\n  context: {cluster: a, user: u}\nusers:\n- name: u\n  user:\n    "
       "client-certificate-data: '!!!'\n",
       "", "not valid base64"},
      {"current-context: c\nclusters:\n- name: a\n  cluster: {server: https://a}\ncontexts:\n- "
       "name: c\n  context: {cluster: a, user: u}\nusers:\n- name: u\n  user:\n    "
       "client-certificate: c.pem\n",
       "", "a client certificate without a key"},
      {"current-context: c\nclusters:\n- name: a\n  cluster: {}\ncontexts:\n- name: c\n  "
       "context: {cluster: a}\n",
       "", "has no server"},
  };
  for (const Case& c : cases) {
    const std::string path = dir.Write("k", c.text);
    auto r = LoadKubeconfig(path, c.context);
    ASSERT_FALSE(r.ok()) << c.expect;
    EXPECT_NE(std::string(r.status().message()).find(c.expect), std::string::npos)
        << r.status().message();
  }
  EXPECT_EQ(LoadKubeconfig(dir.Join("missing"), "").status().code(), absl::StatusCode::kNotFound);
}

TEST(ExecCredentialTest, ParsesAndRejects) {
  auto ok = ParseExecCredential(
      R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",)"
      R"("status":{"token":"abc","expirationTimestamp":"2030-01-02T03:04:05Z"}})");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->token, "abc");
  ASSERT_TRUE(ok->expires.has_value());
  EXPECT_EQ(std::chrono::system_clock::to_time_t(*ok->expires), 1893553445);
  EXPECT_FALSE(ParseExecCredential("token: abc").ok());
  EXPECT_FALSE(ParseExecCredential(R"({"kind":"Secret","status":{"token":"x"}})").ok());
  EXPECT_FALSE(ParseExecCredential(R"({"kind":"ExecCredential","status":{}})").ok());
  EXPECT_FALSE(
      ParseExecCredential(
          R"({"kind":"ExecCredential","status":{"token":"x","expirationTimestamp":"soon"}})")
          .ok());
}

// A token goes into the Authorization header as it is. The fuzzer found an
// ExecCredential whose token began with \u0000: it was taken as an empty
// token (cut at the NUL) and sent. A NUL, a line break (which would end the
// header and start another) or any byte outside printable ASCII is refused
// from every source, with the offset and never the token in the message.
TEST(BearerTokenTest, OnlyWhatAnHttpHeaderCarriesIsAccepted) {
  EXPECT_TRUE(CheckBearerToken("eyJhbGciOi.JSUzI1NiJ9-_~+/=").ok());
  for (const std::string& bad :
       {std::string("", 0), std::string("\0abc", 4), std::string("abc\r\nX-Evil: 1"),
        std::string("a b"), std::string("tok\xff")}) {
    absl::Status s = CheckBearerToken(bad);
    EXPECT_FALSE(s.ok()) << bad;
    if (!bad.empty() && bad != "a b") {
      EXPECT_EQ(std::string(s.message()).find("Evil"), std::string::npos) << s.message();
    }
  }
  EXPECT_NE(std::string(CheckBearerToken("abc\r\n").message()).find("byte 0x0d at offset 3"),
            std::string::npos);

  auto nul = ParseExecCredential(
      std::string(R"({"kind":"ExecCredential","status":{"token":"\u0000abc"}})"));
  ASSERT_FALSE(nul.ok());
  EXPECT_NE(std::string(nul.status().message()).find("status.token: the token has byte 0x00"),
            std::string::npos)
      << nul.status();
  EXPECT_FALSE(
      ParseExecCredential(R"({"kind":"ExecCredential","status":{"token":"a\r\nX-Evil: 1"}})").ok());

  TempDir dir;
  const std::string file = dir.Write("token", "abc\r\nX-Evil: 1\n");
  auto from_file = TokenSource::FromFile(file)->Token();
  ASSERT_FALSE(from_file.ok());
  EXPECT_NE(std::string(from_file.status().message()).find(file), std::string::npos);

  const std::string kc = dir.Write(
      "kubeconfig",
      "current-context: c\nclusters:\n- name: a\n  cluster: {server: https://a}\ncontexts:\n- "
      "name: c\n  context: {cluster: a, user: u}\nusers:\n- name: u\n  user:\n    token: "
      "\"abc\\r\\nX-Evil: 1\"\n");
  auto loaded = LoadKubeconfig(kc, "");
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(std::string(loaded.status().message()).find("user \"u\" token: the token has byte"),
            std::string::npos)
      << loaded.status();
}

// The hand-written strptime parse took trailing text after the zone
// ("...Zjunk"), and a year past 2262 overflowed system_clock (undefined
// behaviour); absl::ParseTime reads RFC 3339 exactly.
TEST(ExecCredentialTest, ExpirationIsRfc3339) {
  auto parse = [](const std::string& ts) {
    return ParseExecCredential(R"({"kind":"ExecCredential","status":{"token":"x",)"
                               R"("expirationTimestamp":")" +
                               ts + R"("}})");
  };
  struct Good {
    const char* ts;
    time_t want;
  } good[] = {{"2030-01-02T03:04:05Z", 1893553445},
              {"2030-01-02T03:04:05.999Z", 1893553445},
              {"2030-01-02T04:04:05+01:00", 1893553445},
              {"2030-01-02T02:34:05-00:30", 1893553445}};
  for (const Good& g : good) {
    auto c = parse(g.ts);
    ASSERT_TRUE(c.ok()) << g.ts << ": " << c.status();
    EXPECT_EQ(std::chrono::system_clock::to_time_t(
                  std::chrono::time_point_cast<std::chrono::seconds>(*c->expires)),
              g.want)
        << g.ts;
  }
  for (const char* bad : {"2030-01-02T03:04:05Zjunk", "2030-01-02T03:04:05", "2030-02-30T03:04:05Z",
                          "99999-01-02T03:04:05Z", "2030-01-02T03:04:05+5:3", "soon"}) {
    auto c = parse(bad);
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_NE(std::string(c.status().message()).find("is not RFC 3339"), std::string::npos)
        << c.status();
  }
}

// Kubeconfig -data fields: the hand-written decoder took '=' in the middle
// ("AB=C"); absl::Base64Unescape does not.
TEST(KubeconfigTest, Base64DataIsDecodedStrictly) {
  std::string out;
  EXPECT_TRUE(Base64Decode("aGVsbG8=", &out));
  EXPECT_EQ(out, "hello");
  EXPECT_TRUE(Base64Decode("aGVs\nbG8=\n", &out));  // wrapped, as some tools write it
  EXPECT_EQ(out, "hello");
  for (const char* bad : {"AB=C", "A===", "aGVsbG8=aGVs", "aGVs*G8=", "A"}) {
    EXPECT_FALSE(Base64Decode(bad, &out)) << bad;
  }
}

// A watch body split into lines however it is chunked; found while
// writing fuzz_watch_stream: the old loop scanned the whole unfinished line
// again for every chunk, quadratic in a long event.
TEST(LineBufferTest, SplitsChunkedStreams) {
  LineBuffer b;
  b.Append("{\"a\":1}\n{\"b\"");
  EXPECT_EQ(b.NextLine(), std::optional<std::string>("{\"a\":1}"));
  EXPECT_EQ(b.NextLine(), std::nullopt);
  EXPECT_EQ(b.pending(), 4u);
  b.Append(":2}\n\n");
  EXPECT_EQ(b.NextLine(), std::optional<std::string>("{\"b\":2}"));
  EXPECT_EQ(b.NextLine(), std::optional<std::string>(""));
  EXPECT_EQ(b.NextLine(), std::nullopt);
  EXPECT_EQ(b.pending(), 0u);
  // 1 MiB in 1-byte chunks: linear (the old loop made 5e11 comparisons).
  LineBuffer big;
  const std::string line(1u << 20, 'x');
  size_t lines = 0;
  for (char c : line) {
    big.Append(std::string_view(&c, 1));
    while (big.NextLine()) ++lines;
  }
  big.Append("\n");
  while (big.NextLine()) ++lines;
  EXPECT_EQ(lines, 1u);
}

TEST(ExecCredentialTest, RunsThePluginAndReportsFailures) {
  TempDir dir;
  const std::string good =
      dir.Write("good.sh",
                "#!/bin/sh\n"
                "echo '{\"kind\":\"ExecCredential\",\"status\":{\"token\":\"'$FOO'-'$1'\"}}'\n");
  const std::string bad =
      dir.Write("bad.sh", "#!/bin/sh\necho 'no credentials here' >&2\nexit 3\n");
  const std::string junk = dir.Write("junk.sh", "#!/bin/sh\necho 'hello'\n");
  for (const auto& f : {good, bad, junk}) ::chmod(f.c_str(), 0755);
  ExecConfig e{good, {"x"}, {{"FOO", "tok"}}, ""};
  auto r = RunExecPlugin(e);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->token, "tok-x");
  auto f = RunExecPlugin({bad, {}, {}, ""});
  EXPECT_NE(std::string(f.status().message()).find("failed (exit code 3): no credentials here"),
            std::string::npos)
      << f.status();
  // What a plugin printed is never quoted back: it may be (part of) a
  // token. The error says how much and why it is not JSON.
  auto g = RunExecPlugin({junk, {}, {}, ""});
  EXPECT_EQ(g.status().message(),
            "the exec plugin printed no ExecCredential JSON: what the exec plugin printed (6 "
            "bytes) is not valid JSON (Invalid value. at line 1, column 1)");
  const std::string leaky =
      dir.Write("leaky.sh", "#!/bin/sh\necho '{\"token\":\"s3cr3t-tok3n\",'\n");
  ::chmod(leaky.c_str(), 0755);
  auto l = RunExecPlugin({leaky, {}, {}, ""});
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(std::string(l.status().message()).find("s3cr3t"), std::string::npos) << l.status();
  auto m = RunExecPlugin({dir.Join("missing.sh"), {}, {}, ""});
  EXPECT_FALSE(m.ok());
}

}  // namespace
}  // namespace gpu_agent::apiserver
