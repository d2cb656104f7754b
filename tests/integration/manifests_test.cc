// Invariants of manifests/: every file parses; the static-mode ClusterRole
// allows exactly the calls the agent makes; every config in the ConfigMap
// equals its file in config/ and passes `gpu-agent config`; and the
// deployment contract of every kustomize render, the committed overlays
// (manifests/plugin, manifests/static and the variants beside them) and
// every combination of the components: one DaemonSet of the overlay's mode,
// the driver reached one way and consistently (the NVIDIA runtime, or a
// read-only host driver root at the path the agent loads NVML from, as the
// agent itself resolves its config), GPU-node affinity, resources, seccomp,
// no API access in plugin mode, the RBAC unchanged in static and DRA mode,
// DRA mode's kubelet and CDI folders and DeviceClasses, SYS_ADMIN only with
// MIG, the metrics endpoint bound to the pod's address (IPv4 and IPv6), and
// with the mode-handover component everything DRA mode and the move need in
// the plugin-mode pod.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

#include "api_server_stub.h"
#include "dra_kubelet.h"
#include "support/agent_env.h"

namespace gpu_agent::testing {
namespace {

namespace fs = std::filesystem;

std::string Manifests() { return SourceDir() + "/manifests"; }

std::vector<YAML::Node> Docs(const std::string& file) {
  return YAML::LoadAll(ReadFile(Manifests() + "/" + file));
}

// kubectl renders the overlays. Outside CI a machine without it skips those
// tests; in CI (CI set, as every CI service does) a missing kubectl fails:
// the contract must not pass by not being checked.
bool HaveKubectl() { return std::system("command -v kubectl >/dev/null 2>&1") == 0; }
bool InCi() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && *ci != '\0';
}
#define REQUIRE_KUBECTL()                                                                     \
  do {                                                                                        \
    if (!HaveKubectl()) {                                                                     \
      if (InCi()) {                                                                           \
        FAIL() << "kubectl not found on PATH, and CI is set: the manifests' contract tests "  \
                  "need `kubectl kustomize`; install kubectl on the CI runner";               \
      }                                                                                       \
      GTEST_SKIP() << "no kubectl on this machine (CI unset); the manifests' contract tests " \
                      "are not run";                                                          \
    }                                                                                         \
  } while (0)

TEST(ManifestsTest, EveryManifestParses) {
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(Manifests())) {
    if (entry.path().extension() != ".yaml") continue;
    ++files;
    std::vector<YAML::Node> docs;
    ASSERT_NO_THROW(docs = YAML::LoadAll(ReadFile(entry.path().string()))) << entry.path();
    for (const YAML::Node& d : docs) {
      EXPECT_TRUE(d["apiVersion"] && d["kind"]) << entry.path();
    }
  }
  EXPECT_GE(files, 20);
}

TEST(ManifestsTest, ClusterRoleAllowsExactlyTheCallsTheAgentMakes) {
  std::set<std::string> granted;
  for (const YAML::Node& d : Docs("static/agent/rbac.yaml")) {
    if (d["kind"].as<std::string>() != "ClusterRole") continue;
    for (const YAML::Node& rule : d["rules"]) {
      for (const YAML::Node& group : rule["apiGroups"]) EXPECT_EQ(group.as<std::string>(), "");
      for (const YAML::Node& res : rule["resources"]) {
        for (const YAML::Node& verb : rule["verbs"]) {
          granted.insert(verb.as<std::string>() + " " + res.as<std::string>());
        }
      }
    }
  }
  // What the agent really asks: static mode through a reconcile, a drift
  // repair, a GPU health transition (an Event on the Node, and its
  // GpuHealthy condition in a PATCH of nodes/status), a removal on exit,
  // with node labels on (the default: they ride in the capacity PATCH of
  // nodes/status, so they need no rule of their own); and the capacity and
  // labels subcommands.
  ApiServerStub api;
  api.AddNode("n1");
  TempDir dir;
  auto env = FakeNvmlEnv(FixturePath("1-gpu.yaml"));
  env["FAKE_NVML_CONTROL"] = dir.Join("nvml.ctl");
  Subprocess agent({BinaryPath(), "run", "--mode", "static", "--node-name", "n1",
                    "--proxy=" + api.url(), "--remove-on-exit"},
                   env);
  ASSERT_TRUE(WaitFor([&] { return api.Capacity("n1", "nvidia.com/gpu") == "1"; }))
      << agent.Stderr();
  ASSERT_TRUE(WaitFor([&] { return api.watch_count() > 0; }));
  ASSERT_TRUE(WaitFor([&] { return api.Labels("n1").count("nvidia.com/gpu.product") > 0; }))
      << agent.Stderr();
  api.KubeletSetsCapacity("n1", "nvidia.com/gpu", "0");
  ASSERT_TRUE(WaitFor([&] { return api.Capacity("n1", "nvidia.com/gpu") == "1"; }));
  ASSERT_TRUE(WriteFifo(dir.Join("nvml.ctl"), "xid 0 79"));
  ASSERT_TRUE(WaitFor([&] { return api.events().size() == 1; })) << agent.Stderr();
  ASSERT_TRUE(WaitFor([&] { return api.Condition("n1", "GpuHealthy") != ""; }));
  agent.Signal(SIGTERM);
  ASSERT_EQ(agent.Wait(), 0);
  EXPECT_EQ(api.Labels("n1").count("nvidia.com/gpu.product"), 0u) << "removed on exit";
  RunResult cli = RunAgent({"capacity", "get", "--proxy=" + api.url(), "--node", "n1"}, env);
  ASSERT_EQ(cli.code, 0) << cli.err;
  for (const char* verb : {"apply", "remove"}) {
    RunResult labels = RunAgent({"labels", verb, "--proxy=" + api.url(), "--node", "n1"}, env);
    ASSERT_EQ(labels.code, 0) << labels.err;
  }
  const std::set<std::string> used = api.calls();
  EXPECT_EQ(used, granted) << "the ClusterRole must allow what the agent does, and nothing more";
}

TEST(ManifestsTest, DraClusterRoleAllowsExactlyTheCallsTheAgentMakes) {
  std::set<std::string> granted;
  for (const YAML::Node& d : Docs("dra/agent/rbac.yaml")) {
    if (d["kind"].as<std::string>() != "ClusterRole") continue;
    for (const YAML::Node& rule : d["rules"]) {
      for (const YAML::Node& res : rule["resources"]) {
        for (const YAML::Node& verb : rule["verbs"]) {
          granted.insert(verb.as<std::string>() + " " + res.as<std::string>());
        }
      }
    }
  }
  // What DRA mode really asks: registration, a claim prepared and
  // unprepared, its slices published over a stale one, edited and put back,
  // deleted by the kubelet and published again.
  TempDir dir;
  ASSERT_TRUE(WriteFakeDriverRoot(dir.Join("driver"), "550.54.15"));
  WriteFakeDevRoot(dir.Join("devroot"), {0}, {}, false);
  for (const char* sub : {"registry", "plugins"}) ::mkdir(dir.Join(sub).c_str(), 0755);
  ApiServerStub api;
  api.AddNode("n1");
  api.ServeResourceVersions({"v1"});
  const std::string driver = "gpu.gpu-agent.github.io";
  api.PutResourceClaim(
      "ns", "c",
      R"({"metadata":{"name":"c","namespace":"ns","uid":"u1"},"spec":{"devices":{"requests":[{"name":"gpu"}]}},"status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":")" +
          driver + R"(","pool":"n1","device":"gpu-0000-3b-00-0"}]}}}})");
  api.AddSlice(
      R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"n1-)" +
      driver + R"(-1"},"spec":{"driver":")" + driver +
      R"(","nodeName":"n1","pool":{"name":"n1","generation":1,"resourceSliceCount":2},"devices":[]}})");
  DraKubelet::Options ko;
  ko.registry_dir = dir.Join("registry");
  DraKubelet kubelet(ko);
  ASSERT_TRUE(kubelet.Start());
  auto env = FakeNvmlEnv(FixturePath("1-gpu.yaml"));
  Subprocess agent(
      {BinaryPath(), "run", "--mode", "dra", "--node-name", "n1", "--proxy=" + api.url(),
       "--dra-registry-dir", dir.Join("registry"), "--dra-plugin-dir", dir.Join("plugins"),
       "--cdi-spec-dir", dir.Join("cdi"), "--nvidia-cdi-hook-path", "", "--nvidia-driver-root",
       dir.Join("driver"), "--dev-root", dir.Join("devroot")},
      env);
  ASSERT_TRUE(kubelet.WaitForPlugin(driver, std::chrono::seconds(20))) << agent.Stderr();
  std::map<std::string, dra::PrepareOutcome> prepared;
  ASSERT_TRUE(kubelet.Prepare(driver, {{"ns", "u1", "c"}}, &prepared).ok());
  ASSERT_EQ(prepared["u1"].error, "") << agent.Stderr();
  std::map<std::string, std::string> unprepared;
  ASSERT_TRUE(kubelet.Unprepare(driver, {{"ns", "u1", "c"}}, &unprepared).ok());
  auto published = [&] {
    std::vector<std::string> s = api.Slices("n1");
    return s.size() == 1 && s[0].find("\"gpu-0000-3b-00-0\"") != std::string::npos;
  };
  ASSERT_TRUE(WaitFor(published)) << agent.Stderr();
  api.EmptySliceDevices("n1-" + driver + "-0");
  ASSERT_TRUE(WaitFor([&] { return api.calls().count("update resourceslices") > 0; }));
  ASSERT_TRUE(WaitFor(published)) << agent.Stderr();
  api.DeleteNodeSlices("n1");
  ASSERT_TRUE(WaitFor(published)) << agent.Stderr();
  agent.Signal(SIGTERM);
  ASSERT_EQ(agent.Wait(), 0) << agent.Stderr();
  std::set<std::string> used = api.calls();
  used.erase("get resource.k8s.io");  // discovery: every user may (system:discovery)
  EXPECT_EQ(used, granted) << "the ClusterRole must allow what DRA mode does, and nothing more";
}

TEST(ManifestsTest, ConfigMapHoldsTheExampleConfigsAndTheyLoad) {
  const std::vector<YAML::Node> docs = Docs("base/configmap.yaml");
  ASSERT_EQ(docs.size(), 1u);
  int checked = 0;
  for (const auto& kv : docs[0]["data"]) {
    const std::string name = kv.first.as<std::string>();
    const std::string text = kv.second.as<std::string>();
    EXPECT_EQ(text, ReadFile(SourceDir() + "/config/" + name))
        << name << " in the ConfigMap differs from config/" << name;
    TempDir dir;
    RunResult r = RunAgent({"config", "--config", dir.Write(name, text)});
    EXPECT_EQ(r.code, 0) << name << ": " << r.err;
    ++checked;
  }
  EXPECT_EQ(checked, 5);
}

// ---- the deployment contract of a render ----

// The components one render is made of, and so what it must hold.
const std::vector<std::string> kDriverComponents = {"nvidia-runtime", "host-driver",
                                                    "gpu-operator-driver"};
const std::map<std::string, std::string> kDriverHostRoot = {
    {"host-driver", "/"}, {"gpu-operator-driver", "/run/nvidia/driver"}};
const std::map<std::string, std::string> kKubeletDevicePlugins = {
    {"", "/var/lib/kubelet/device-plugins"},
    {"kubelet-microk8s", "/var/snap/microk8s/common/var/lib/kubelet/device-plugins"},
    {"kubelet-k0s", "/var/lib/k0s/kubelet/device-plugins"}};

struct Variant {
  std::string name;                     // for messages: the overlay folder, or the components
  std::string mode;                     // plugin | static | dra
  std::vector<std::string> components;  // folder names under components/
  bool Has(const std::string& c) const {
    return std::find(components.begin(), components.end(), c) != components.end();
  }
  std::string Driver() const {
    std::string found;
    for (const std::string& d : kDriverComponents) {
      if (Has(d)) found = found.empty() ? d : found + "+" + d;
    }
    return found;
  }
  std::string Kubelet() const {
    for (const auto& [c, path] : kKubeletDevicePlugins) {
      if (!c.empty() && Has(c)) return c;
    }
    return "";
  }
};

// A default YAML::Node is a defined null; "not found" must be undefined.
YAML::Node Undefined() { return YAML::Node(YAML::NodeType::Undefined); }

// n[k1][k2]...; undefined (never a throw) when a key is missing on the way.
// (reset(), not =: assigning a yaml-cpp Node writes through to the node it
// refers to, here the document.)
YAML::Node At(const YAML::Node& n, std::initializer_list<std::string> keys) {
  YAML::Node cur(n);
  for (const std::string& k : keys) {
    if (!cur.IsDefined() || !cur.IsMap()) return Undefined();
    const YAML::Node& view = cur;
    const YAML::Node next = view[k];
    if (!next.IsDefined()) return Undefined();
    cur.reset(next);
  }
  return cur;
}

std::string Str(const YAML::Node& n) { return n && n.IsScalar() ? n.as<std::string>() : ""; }

YAML::Node Named(const YAML::Node& list, const std::string& name) {
  if (list && list.IsSequence()) {
    for (const YAML::Node& item : list) {
      if (Str(item["name"]) == name) return item;
    }
  }
  return Undefined();
}

std::string Env(const YAML::Node& container, const std::string& name) {
  return Str(Named(container["env"], name)["value"]);
}

bool HasEnv(const YAML::Node& container, const std::string& name) {
  return Named(container["env"], name).IsDefined();
}

std::string JoinRoot(std::string root, const std::string& path) {
  while (!root.empty() && root.back() == '/') root.pop_back();
  return root + path;
}

std::string Clean(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

// The volume mount at exactly `path`, with its volume; undefined if none.
struct Mount {
  YAML::Node mount = Undefined(), volume = Undefined();
};
Mount MountAt(const YAML::Node& pod, const YAML::Node& container, const std::string& path) {
  for (const YAML::Node& m : container["volumeMounts"]) {
    if (Clean(Str(m["mountPath"])) == Clean(path)) {
      return {m, Named(pod["volumes"], Str(m["name"]))};
    }
  }
  return {};
}

// Kubernetes quantities: "10m", "1", "32Mi", "1G".
double Quantity(const std::string& q) {
  static const std::vector<std::pair<std::string, double>> kSuffixes = {
      {"Ki", 1024.0}, {"Mi", 1048576.0}, {"Gi", 1073741824.0}, {"m", 1e-3}, {"k", 1e3},
      {"M", 1e6},     {"G", 1e9}};
  for (const auto& [suffix, factor] : kSuffixes) {
    if (q.size() > suffix.size() &&
        q.compare(q.size() - suffix.size(), suffix.size(), suffix) == 0) {
      return std::stod(q.substr(0, q.size() - suffix.size())) * factor;
    }
  }
  return q.empty() ? -1 : std::stod(q);
}

bool IsRbac(const std::string& kind) {
  return kind == "ServiceAccount" || kind == "Role" || kind == "RoleBinding" ||
         kind == "ClusterRole" || kind == "ClusterRoleBinding";
}

// One rule as a canonical line, so rules compare whatever YAML style wrote them.
std::string RuleLine(const YAML::Node& rule) {
  std::string line;
  std::map<std::string, YAML::Node> fields;
  for (const auto& kv : rule) fields.emplace(kv.first.as<std::string>(), kv.second);
  for (const auto& [key, value] : fields) {
    std::vector<std::string> items;
    for (const YAML::Node& v : value) items.push_back(v.as<std::string>());
    std::sort(items.begin(), items.end());
    line += key + "=";
    for (const std::string& i : items) line += i + ",";
    line += ";";
  }
  return line;
}

std::multiset<std::string> Rules(const std::vector<YAML::Node>& docs) {
  std::multiset<std::string> rules;
  for (const YAML::Node& d : docs) {
    if (Str(d["kind"]) != "ClusterRole") continue;
    for (const YAML::Node& rule : d["rules"]) rules.insert(RuleLine(rule));
  }
  return rules;
}

// What the kubelet gives a container's env var from the downward API, for a
// pod on node-1 with address `pod_ip`.
std::string FieldValue(const YAML::Node& env_var, const std::string& pod_ip) {
  const std::string field = Str(At(env_var, {"valueFrom", "fieldRef", "fieldPath"}));
  if (field == "status.podIP") return pod_ip;
  return "node-1";
}

// The kubelet's expansion of "$(NAME)" in args with the container's env: a
// name it does not hold stays as written, and "$$" is a "$".
std::string ExpandLikeTheKubelet(const std::string& arg, const EnvOverrides& env) {
  std::string out;
  for (size_t i = 0; i < arg.size(); ++i) {
    if (arg.compare(i, 2, "$$") == 0) {
      out += '$';
      ++i;
      continue;
    }
    const size_t close = arg.find(')', i);
    if (arg.compare(i, 2, "$(") == 0 && close != std::string::npos) {
      const auto it = env.find(arg.substr(i + 2, close - i - 2));
      if (it != env.end()) {
        out += it->second;
        i = close;
        continue;
      }
    }
    out += arg[i];
  }
  return out;
}

// What the agent itself makes of the DaemonSet: `gpu-agent config` run with
// the container's args (config instead of run, each expanded as the kubelet
// does), its env (the downward API's fields for a pod on node-1 at
// `pod_ip`) and nothing else of this process's environment, and the config
// file it names taken from the render's ConfigMap. Returns the effective
// config (YAML), or undefined with a failure recorded.
YAML::Node EffectiveConfig(const YAML::Node& pod, const YAML::Node& container,
                           const YAML::Node& configmap, const std::string& pod_ip = "10.244.1.7") {
  EnvOverrides env = UnsetAllBut({"PATH"});
  EnvOverrides container_env;
  for (const YAML::Node& e : container["env"]) {
    container_env[Str(e["name"])] = e["valueFrom"] ? FieldValue(e, pod_ip) : Str(e["value"]);
  }
  for (const auto& [name, value] : container_env) env[name] = value;
  // The ConfigMap's mount folder, and the file CONFIG_FILE names in it.
  std::string folder;
  for (const YAML::Node& m : container["volumeMounts"]) {
    if (Str(At(Named(pod["volumes"], Str(m["name"])), {"configMap", "name"})) ==
        Str(At(configmap, {"metadata", "name"}))) {
      folder = Clean(Str(m["mountPath"]));
    }
  }
  const std::string config_file = env["CONFIG_FILE"];
  if (folder.empty() || config_file.rfind(folder + "/", 0) != 0) {
    ADD_FAILURE() << "CONFIG_FILE \"" << config_file
                  << "\" is not in the folder the ConfigMap is mounted at (\"" << folder << "\")";
    return Undefined();
  }
  const std::string key = config_file.substr(folder.size() + 1);
  if (!At(configmap, {"data", key})) {
    ADD_FAILURE() << "CONFIG_FILE names " << key << ", which the ConfigMap does not hold";
    return Undefined();
  }
  TempDir dir;
  env["CONFIG_FILE"] = dir.Write(key, At(configmap, {"data", key}).as<std::string>());
  std::vector<std::string> args;
  for (const YAML::Node& a : container["args"]) {
    args.push_back(ExpandLikeTheKubelet(a.as<std::string>(), container_env));
  }
  if (args.empty() || args[0] != "run") {
    ADD_FAILURE() << "the container's args do not start with `run`";
    return Undefined();
  }
  args[0] = "config";
  const RunResult r = RunAgent(args, env);
  if (r.code != 0) {
    ADD_FAILURE() << "gpu-agent config with the DaemonSet's args and env failed: " << r.err;
    return Undefined();
  }
  return YAML::Load(r.out);
}

// DRA mode's folders, as `config` names them, mounted from the host where
// the container sees them: the kubelet's plugin registry and plugins
// folders (there wherever the kubelet runs) and the CDI spec folder (made
// if missing).
void CheckDraFolders(const YAML::Node& pod, const YAML::Node& c, const YAML::Node& config) {
  for (const std::string key : {"registryDir", "pluginDir"}) {
    const std::string folder = Str(At(config, {"dra", key}));
    const Mount m = MountAt(pod, c, folder);
    ASSERT_TRUE(m.mount.IsDefined()) << "dra." << key << " " << folder << " is not mounted";
    EXPECT_EQ(Str(At(m.volume, {"hostPath", "path"})), folder);
    EXPECT_EQ(Str(At(m.volume, {"hostPath", "type"})), "Directory");
  }
  const std::string cdi_dir = Str(At(config, {"cdi", "specDir"}));
  const Mount cdi = MountAt(pod, c, cdi_dir);
  ASSERT_TRUE(cdi.mount.IsDefined()) << "cdi.specDir " << cdi_dir << " is not mounted";
  EXPECT_EQ(Str(At(cdi.volume, {"hostPath", "path"})), cdi_dir);
  EXPECT_EQ(Str(At(cdi.volume, {"hostPath", "type"})), "DirectoryOrCreate");
}

// components/mode-handover: the plugin-mode pod runs DRA mode when its
// node's label names dra.yaml. What the agent makes of the DaemonSet with
// that config is DRA mode (nothing in the args holds it to plugin mode),
// with DRA mode's folders and the folder of kubelet.podResourcesSocket
// mounted from the host, the latter read-only (connect(2) needs write
// permission on the socket, not a writable mount); DRA mode's own-node
// admission policy names this pod's service account.
void CheckModeHandover(const YAML::Node& ds, const YAML::Node& pod, const YAML::Node& c,
                       const YAML::Node& configmap, const std::vector<YAML::Node>& docs) {
  YAML::Node as_dra = YAML::Clone(c);
  for (YAML::Node e : as_dra["env"]) {
    if (Str(e["name"]) == "CONFIG_FILE") {
      e["value"] = Clean(Env(c, "GPU_AGENT_NODE_CONFIG_DIR")) + "/dra.yaml";
    }
  }
  const YAML::Node config = EffectiveConfig(pod, as_dra, configmap);
  ASSERT_TRUE(config.IsDefined());
  EXPECT_EQ(Str(config["mode"]), "dra") << "the label naming dra would not move the node to DRA";
  CheckDraFolders(pod, c, config);
  const std::string socket = Str(At(config, {"kubelet", "podResourcesSocket"}));
  const std::string folder = socket.substr(0, socket.rfind('/'));
  const Mount pr = MountAt(pod, c, folder);
  ASSERT_TRUE(pr.mount.IsDefined())
      << "the folder of kubelet.podResourcesSocket " << socket << " is not mounted";
  EXPECT_EQ(Str(At(pr.volume, {"hostPath", "path"})), folder);
  EXPECT_EQ(Str(At(pr.volume, {"hostPath", "type"})), "Directory");
  EXPECT_TRUE(pr.mount["readOnly"].IsDefined() && pr.mount["readOnly"].as<bool>())
      << "the kubelet's pod-resources folder is mounted writable";
  const std::string user = "system:serviceaccount:" + Str(At(ds, {"metadata", "namespace"})) + ":" +
                           Str(pod["serviceAccountName"]);
  std::set<std::string> policies, bound;
  for (const YAML::Node& d : docs) {
    if (Str(d["kind"]) == "ValidatingAdmissionPolicy") {
      policies.insert(Str(At(d, {"metadata", "name"})));
      EXPECT_EQ(Str(At(d, {"spec", "matchConditions"})[0]["expression"]),
                "request.userInfo.username == \"" + user + "\"");
    }
    if (Str(d["kind"]) == "ValidatingAdmissionPolicyBinding") {
      bound.insert(Str(At(d, {"spec", "policyName"})));
    }
  }
  EXPECT_EQ(policies.size(), 1u) << "the own-node policy for ResourceSlices";
  EXPECT_EQ(bound, policies);
}

void CheckRender(const Variant& v, const std::vector<YAML::Node>& docs) {
  SCOPED_TRACE("render of " + v.name);
  const bool plugin = v.mode == "plugin";
  const bool dra = v.mode == "dra";
  const bool mig = v.Has("mig");
  const std::string driver = v.Driver();
  ASSERT_TRUE(driver == "nvidia-runtime" || kDriverHostRoot.count(driver))
      << "a variant reaches the driver exactly one way, not \"" << driver << "\"";

  // Exactly one DaemonSet, of the overlay's mode; the ConfigMap beside it.
  std::vector<YAML::Node> daemonsets;
  YAML::Node configmap = Undefined();
  std::vector<std::string> rbac_kinds;
  for (const YAML::Node& d : docs) {
    const std::string kind = Str(d["kind"]);
    if (kind == "DaemonSet") daemonsets.push_back(d);
    if (kind == "ConfigMap") configmap.reset(d);
    if (IsRbac(kind)) rbac_kinds.push_back(kind);
    EXPECT_EQ(Str(At(d, {"metadata", "labels", "app.kubernetes.io/part-of"})), "gpu-agent")
        << kind << " " << Str(At(d, {"metadata", "name"})) << " lacks the common label";
    // kustomize does not know DeviceClass and the admission policies are
    // cluster-scoped and names a namespace on them where it runs before
    // them, which the API server drops for a cluster-scoped kind.
    if (kind != "ClusterRole" && kind != "ClusterRoleBinding" && kind != "DeviceClass" &&
        kind != "ValidatingAdmissionPolicy" && kind != "ValidatingAdmissionPolicyBinding") {
      EXPECT_EQ(Str(At(d, {"metadata", "namespace"})), "kube-system")
          << kind << " " << Str(At(d, {"metadata", "name"}));
    }
  }
  ASSERT_EQ(daemonsets.size(), 1u) << "a render holds exactly one DaemonSet (one mode per node)";
  ASSERT_TRUE(configmap.IsDefined()) << "the render lacks the ConfigMap";
  for (const auto& kv : configmap["data"]) {
    const std::string name = kv.first.as<std::string>();
    EXPECT_EQ(kv.second.as<std::string>(), ReadFile(SourceDir() + "/config/" + name))
        << name << " in the rendered ConfigMap differs from config/" << name;
  }
  const YAML::Node ds = daemonsets[0];
  EXPECT_EQ(Str(At(ds, {"metadata", "name"})), plugin ? "gpu-agent"
                                               : dra  ? "gpu-agent-dra"
                                                      : "gpu-agent-static");
  const YAML::Node pod = At(ds, {"spec", "template", "spec"});
  ASSERT_TRUE(pod.IsMap()) << "the DaemonSet has no pod template";
  ASSERT_TRUE(pod["containers"].IsSequence());
  ASSERT_EQ(pod["containers"].size(), 1u);
  const YAML::Node c = pod["containers"][0];
  const YAML::Node config = EffectiveConfig(pod, c, configmap);
  ASSERT_TRUE(config.IsDefined());
  EXPECT_EQ(Str(config["mode"]), v.mode) << "the DaemonSet runs the agent in another mode";

  // The metrics endpoint listens on the pod's address only (the downward
  // API's status.podIP), on the port the probes name, and an IPv6 pod
  // address makes an address the agent takes.
  EXPECT_EQ(Str(At(Named(c["env"], "POD_IP"), {"valueFrom", "fieldRef", "fieldPath"})),
            "status.podIP");
  EXPECT_EQ(Str(At(config, {"metrics", "address"})), "10.244.1.7:9400")
      << "the metrics endpoint must bind the pod's address, not every address";
  EXPECT_EQ(Str(Named(c["ports"], "metrics")["containerPort"]), "9400");
  EXPECT_FALSE(pod["hostNetwork"].IsDefined() && pod["hostNetwork"].as<bool>())
      << "on the host's network the pod's address is every pod's node address";
  for (const char* probe : {"livenessProbe", "readinessProbe"}) {
    EXPECT_EQ(Str(At(c, {probe, "httpGet", "port"})), "metrics") << probe;
    EXPECT_FALSE(At(c, {probe, "httpGet", "host"}).IsDefined())
        << probe << " must go to the pod's address, where the endpoint listens";
  }
  const YAML::Node config6 = EffectiveConfig(pod, c, configmap, "fd00:10:244:1::7");
  ASSERT_TRUE(config6.IsDefined());
  EXPECT_EQ(Str(At(config6, {"metrics", "address"})), "fd00:10:244:1::7:9400");

  // The driver: the NVIDIA runtime, or the host's driver root, one way only.
  // As NVIDIA's plugin means them: the driver and dev roots as the host sees
  // them, and where the host's driver root is mounted in this container
  // (empty: the same path). See Config::Flags::DriverRootHere/DevRootHere.
  const std::string driver_root = Clean(Str(At(config, {"flags", "nvidiaDriverRoot"})));
  const std::string dev_root = Clean(Str(At(config, {"flags", "nvidiaDevRoot"})));
  const std::string container_root_set =
      Str(At(config, {"flags", "plugin", "containerDriverRoot"}));
  const std::string driver_here =
      container_root_set.empty() ? driver_root : Clean(container_root_set);
  const std::string dev_here = dev_root == driver_root ? driver_here : dev_root;
  const bool privileged = At(c, {"securityContext", "privileged"}).IsDefined() &&
                          At(c, {"securityContext", "privileged"}).as<bool>();
  const Mount driver_mount = MountAt(pod, c, driver_here);
  EXPECT_FALSE((dra || v.Has("mode-handover")) && driver == "nvidia-runtime")
      << "DRA mode's CDI specs name libcuda, which the runtime's utility set does not give the "
         "agent: it needs the host's driver root";
  if (driver == "nvidia-runtime") {
    EXPECT_EQ(Str(pod["runtimeClassName"]), "nvidia");
    EXPECT_EQ(Env(c, "NVIDIA_VISIBLE_DEVICES"), "all");
    std::string caps = "," + Env(c, "NVIDIA_DRIVER_CAPABILITIES") + ",";
    EXPECT_TRUE(caps.find(",utility,") != std::string::npos || caps == ",all,")
        << "NVIDIA_DRIVER_CAPABILITIES \"" << Env(c, "NVIDIA_DRIVER_CAPABILITIES")
        << "\" lacks utility, the set that holds libnvidia-ml";
    EXPECT_EQ(driver_root, "/") << "the runtime injects the driver into the container's own root";
    EXPECT_EQ(driver_here, "/") << "the runtime injects the driver into the container's own root";
    EXPECT_EQ(dev_root, "/") << "the runtime creates the device nodes in the container's /dev";
    EXPECT_FALSE(privileged) << "the runtime needs no privileged container";
    EXPECT_FALSE(Str(At(c, {"securityContext", "allowPrivilegeEscalation"})) == "true");
    for (const YAML::Node& vol : pod["volumes"]) {
      EXPECT_TRUE(!vol["hostPath"] || (plugin && Str(vol["name"]) == "device-plugins"))
          << "host folder " << Str(At(vol, {"hostPath", "path"})) << " mounted beside the runtime";
    }
  } else {
    EXPECT_FALSE(pod["runtimeClassName"].IsDefined())
        << "a host driver root and the NVIDIA runtime at once";
    EXPECT_FALSE(HasEnv(c, "NVIDIA_VISIBLE_DEVICES"))
        << "a host driver root and the NVIDIA runtime's NVIDIA_VISIBLE_DEVICES at once";
    EXPECT_NE(driver_here, "/") << "NVML would be looked for in the image, not on the host";
    EXPECT_EQ(driver_root, kDriverHostRoot.at(driver))
        << "NVIDIA_DRIVER_ROOT must name the driver root as the host sees it";
    ASSERT_TRUE(driver_mount.mount.IsDefined())
        << "nothing is mounted where the agent loads NVML from (" << driver_here << ")";
    EXPECT_TRUE(driver_mount.mount["readOnly"].IsDefined() &&
                driver_mount.mount["readOnly"].as<bool>())
        << "the host's driver root is mounted writable";
    EXPECT_EQ(Str(At(driver_mount.volume, {"hostPath", "path"})), driver_root)
        << "what is mounted at the container's driver root is not the host's driver root";
    if (driver_root == "/run/nvidia/driver") {
      // A driver container installs it, maybe after the agent starts: the
      // pod must start anyway, and the agent wait for NVML.
      EXPECT_EQ(Str(At(driver_mount.volume, {"hostPath", "type"})), "DirectoryOrCreate");
      EXPECT_TRUE(HasEnv(c, "GPU_AGENT_DRIVER_WAIT_TIMEOUT"))
          << "the agent would exit before the driver container is done";
    } else {
      EXPECT_EQ(Str(At(driver_mount.volume, {"hostPath", "type"})), "Directory");
    }
    // The agent checks <dev root here>/dev/nvidia* and hands the kubelet
    // <dev root>/dev/nvidia* as host paths: the two must be one folder,
    // either inside the driver-root mount or a mount of their own.
    const std::string dev_host = JoinRoot(dev_root, "/dev");
    const std::string dev_seen = JoinRoot(dev_here, "/dev");
    if (dev_here == driver_here) {
      EXPECT_EQ(dev_root, driver_root) << "the dev root is looked for inside the driver mount";
    } else {
      const Mount dev_mount = MountAt(pod, c, dev_seen);
      ASSERT_TRUE(dev_mount.mount.IsDefined()) << "nothing is mounted at " << dev_seen;
      EXPECT_EQ(Str(At(dev_mount.volume, {"hostPath", "path"})), dev_host)
          << dev_seen << " in the container is not the host's " << dev_host;
    }
    // NVML opens /dev/nvidia* by those very paths: the host's /dev, live.
    const Mount dev_mount = MountAt(pod, c, "/dev");
    ASSERT_TRUE(dev_mount.mount.IsDefined()) << "the host's /dev is not mounted at /dev";
    EXPECT_EQ(Str(At(dev_mount.volume, {"hostPath", "path"})), "/dev");
    EXPECT_TRUE(dev_mount.mount["readOnly"].IsDefined() && dev_mount.mount["readOnly"].as<bool>())
        << "the host's /dev is mounted writable";
    EXPECT_NE(Str(c["terminationMessagePath"]).rfind("/dev/", 0), 0u)
        << "the termination message cannot be written under a read-only /dev";
    EXPECT_TRUE(privileged) << "without the runtime only privileged opens the GPUs' device cgroup";
  }

  // Scheduled on GPU nodes: NVIDIA's label, or NFD's PCI vendor label.
  std::set<std::string> terms;
  for (const YAML::Node& term :
       At(pod, {"affinity", "nodeAffinity",
                "requiredDuringSchedulingIgnoredDuringExecution"})["nodeSelectorTerms"]) {
    std::string line;
    for (const YAML::Node& e : term["matchExpressions"]) {
      line += Str(e["key"]) + " " + Str(e["operator"]);
      for (const YAML::Node& val : e["values"]) line += " " + val.as<std::string>();
      line += ";";
    }
    terms.insert(line);
  }
  EXPECT_EQ(terms, (std::set<std::string>{"nvidia.com/gpu.present In true;",
                                          "feature.node.kubernetes.io/pci-10de.present In true;"}))
      << "node affinity: two ORed terms, one per GPU-node label";

  // Resources: requests above the measured idle (RSS 16.2-17.8 MiB), limits
  // at least the requests.
  for (const char* r : {"cpu", "memory"}) {
    const std::string req = Str(At(c, {"resources", "requests", r}));
    const std::string lim = Str(At(c, {"resources", "limits", r}));
    EXPECT_FALSE(req.empty()) << "no " << r << " request";
    EXPECT_FALSE(lim.empty()) << "no " << r << " limit";
    if (!req.empty() && !lim.empty()) {
      EXPECT_LE(Quantity(req), Quantity(lim)) << r;
    }
  }
  EXPECT_GE(Quantity(Str(At(c, {"resources", "requests", "memory"}))), 18.0 * 1048576)
      << "memory request below the agent's measured idle RSS";

  // seccomp, capabilities, user.
  EXPECT_EQ(Str(At(pod, {"securityContext", "seccompProfile", "type"})), "RuntimeDefault");
  if (At(c, {"securityContext", "seccompProfile"})) {
    EXPECT_EQ(Str(At(c, {"securityContext", "seccompProfile", "type"})), "RuntimeDefault");
  }
  EXPECT_EQ(Str(At(c, {"securityContext", "readOnlyRootFilesystem"})), "true");
  std::set<std::string> drop, add;
  for (const YAML::Node& x : At(c, {"securityContext", "capabilities", "drop"}))
    drop.insert(Str(x));
  for (const YAML::Node& x : At(c, {"securityContext", "capabilities", "add"})) add.insert(Str(x));
  EXPECT_TRUE(drop.count("ALL")) << "capabilities not dropped";
  EXPECT_EQ(add, mig ? std::set<std::string>{"SYS_ADMIN"} : std::set<std::string>{})
      << "capabilities added: SYS_ADMIN with MIG, and nothing else, ever";
  EXPECT_EQ(HasEnv(c, "NVIDIA_MIG_MONITOR_DEVICES"), mig);
  if (mig) {
    EXPECT_EQ(Env(c, "NVIDIA_MIG_MONITOR_DEVICES"), "all");
  }
  EXPECT_EQ(Str(At(config, {"flags", "migStrategy"})) != "none", mig)
      << "the MIG variant, and only it, runs a MIG config";

  // The image: registry-qualified, tagged, so `images:` can replace it.
  const std::string image = Str(c["image"]);
  const std::string host = image.substr(0, image.find('/'));
  EXPECT_TRUE(image.find('/') != std::string::npos &&
              (host.find('.') != std::string::npos || host.find(':') != std::string::npos))
      << "image \"" << image << "\" names no registry";
  const size_t tag = image.rfind(':');
  EXPECT_TRUE(image.find('@') != std::string::npos ||
              (tag != std::string::npos && tag > image.rfind('/')))
      << "image \"" << image << "\" has no tag or digest";

  EXPECT_TRUE(!v.Has("mode-handover") || (plugin && v.Has("node-config")))
      << "mode-handover moves a plugin-mode pod with a config per node";
  if (plugin && v.Has("node-health")) {
    // GPU health on the Node: plugin mode gets an API connection, with the
    // RBAC of components/node-health/rbac.yaml, unchanged, bound to the
    // pod's service account, and turns events and the condition on.
    EXPECT_EQ(Str(pod["automountServiceAccountToken"]), "true");
    std::multiset<std::string> kinds(rbac_kinds.begin(), rbac_kinds.end());
    EXPECT_EQ(kinds,
              (std::multiset<std::string>{"ServiceAccount", "ClusterRole", "ClusterRoleBinding"}));
    EXPECT_EQ(Rules(docs), Rules(Docs("components/node-health/rbac.yaml")));
    for (const YAML::Node& d : docs) {
      if (Str(d["kind"]) != "ClusterRoleBinding") continue;
      ASSERT_TRUE(d["subjects"].IsSequence() && d["subjects"].size() == 1u);
      EXPECT_EQ(Str(d["subjects"][0]["name"]), Str(pod["serviceAccountName"]));
      EXPECT_EQ(Str(At(d, {"roleRef", "name"})), "gpu-agent-node-health");
    }
    EXPECT_EQ(Env(c, "GPU_AGENT_HEALTH_NODE_EVENTS"), "on");
  } else if (plugin && v.Has("node-config")) {
    // A config per node: plugin mode reads and watches its own Node, with
    // the RBAC of components/node-config/rbac.yaml, unchanged, bound to the
    // pod's service account; the named configs are the ConfigMap's files.
    // With mode-handover, that of components/mode-handover/rbac.yaml too.
    const bool handover = v.Has("mode-handover");
    EXPECT_EQ(Str(pod["automountServiceAccountToken"]), "true");
    std::multiset<std::string> kinds(rbac_kinds.begin(), rbac_kinds.end());
    std::multiset<std::string> want_kinds = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding"};
    std::multiset<std::string> want_rules = Rules(Docs("components/node-config/rbac.yaml"));
    std::set<std::string> want_roles = {"gpu-agent-node-config"}, roles;
    if (handover) {
      want_kinds.insert({"ClusterRole", "ClusterRoleBinding"});
      for (const std::string& r : Rules(Docs("components/mode-handover/rbac.yaml"))) {
        want_rules.insert(r);
      }
      want_roles.insert("gpu-agent-mode-handover");
    }
    EXPECT_EQ(kinds, want_kinds);
    EXPECT_EQ(Rules(docs), want_rules);
    for (const YAML::Node& d : docs) {
      if (Str(d["kind"]) != "ClusterRoleBinding") continue;
      ASSERT_TRUE(d["subjects"].IsSequence() && d["subjects"].size() == 1u);
      EXPECT_EQ(Str(d["subjects"][0]["name"]), Str(pod["serviceAccountName"]));
      EXPECT_EQ(Str(d["subjects"][0]["namespace"]), Str(At(ds, {"metadata", "namespace"})));
      roles.insert(Str(At(d, {"roleRef", "name"})));
    }
    EXPECT_EQ(roles, want_roles);
    if (handover) CheckModeHandover(ds, pod, c, configmap, docs);
    const Mount named = MountAt(pod, c, Str(At(config, {"nodeConfig", "dir"})));
    ASSERT_TRUE(named.mount.IsDefined()) << "nothing is mounted at nodeConfig.dir";
    EXPECT_EQ(Str(At(named.volume, {"configMap", "name"})),
              Str(At(configmap, {"metadata", "name"})));
  } else if (dra) {
    // The RBAC of dra/agent/rbac.yaml, unchanged, bound to the pod's
    // service account; the folders the config names, from the host; a
    // DeviceClass for the driver the config names.
    EXPECT_EQ(Str(pod["automountServiceAccountToken"]), "true");
    std::multiset<std::string> kinds(rbac_kinds.begin(), rbac_kinds.end());
    EXPECT_EQ(kinds,
              (std::multiset<std::string>{"ServiceAccount", "ClusterRole", "ClusterRoleBinding"}));
    EXPECT_EQ(Rules(docs), Rules(Docs("dra/agent/rbac.yaml")))
        << "the rendered ClusterRole differs from dra/agent/rbac.yaml";
    for (const YAML::Node& d : docs) {
      if (Str(d["kind"]) != "ClusterRoleBinding") continue;
      ASSERT_TRUE(d["subjects"].IsSequence() && d["subjects"].size() == 1u);
      EXPECT_EQ(Str(d["subjects"][0]["name"]), Str(pod["serviceAccountName"]));
      EXPECT_EQ(Str(At(d, {"roleRef", "name"})), "gpu-agent-dra");
    }
    CheckDraFolders(pod, c, config);
    const std::string driver_name = Str(At(config, {"dra", "driverName"}));
    // Before 1.34 (components/dra-v1beta1): v1beta1, and no class for
    // nvidia.com/gpu or a MIG profile's name (extendedResourceName came with
    // 1.34).
    const bool v1beta1 = v.Has("dra-v1beta1");
    int classes = 0;
    std::set<std::string> extended;
    int mig_extended = 0;
    for (const YAML::Node& d : docs) {
      if (Str(d["kind"]) != "DeviceClass") continue;
      ++classes;
      EXPECT_EQ(Str(d["apiVersion"]), v1beta1 ? "resource.k8s.io/v1beta1" : "resource.k8s.io/v1");
      if (At(d, {"spec", "extendedResourceName"})) {
        const std::string name = Str(At(d, {"spec", "extendedResourceName"}));
        if (name.starts_with("nvidia.com/mig-")) {
          // nvidia.com/mig-<profile> selects MIG devices of that profile.
          ++mig_extended;
          const std::string cel = Str(At(d, {"spec", "selectors"})[0]["cel"]["expression"]);
          EXPECT_NE(cel.find("profile == \"" + name.substr(15) + "\""), std::string::npos)
              << Str(At(d, {"metadata", "name"})) << " does not select profile " << name.substr(15);
          EXPECT_NE(cel.find("type == \"mig\""), std::string::npos);
        } else {
          extended.insert(name);
        }
      }
      EXPECT_NE(Str(At(d, {"spec", "selectors"})[0]["cel"]["expression"])
                    .find("device.driver == \"" + driver_name + "\""),
                std::string::npos)
          << Str(At(d, {"metadata", "name"})) << " selects another driver than " << driver_name;
    }
    EXPECT_EQ(classes, v1beta1 ? 2 : 3 + mig_extended)
        << "DeviceClasses for whole GPUs, MIG devices, nvidia.com/gpu and MIG profiles' names";
    EXPECT_EQ(mig_extended, v1beta1 ? 0 : 26)
        << "one class a MIG profile name of deviceclass-mig.yaml";
    EXPECT_EQ(extended, v1beta1 ? std::set<std::string>{} : std::set<std::string>{"nvidia.com/gpu"})
        << "one class lets pods that ask for nvidia.com/gpu run on DRA";
    // The new pod beside the old one in a rolling update (kubelet 1.33+),
    // or, with dra-no-surge, the old one gone first.
    const YAML::Node rolling = At(ds, {"spec", "updateStrategy", "rollingUpdate"});
    EXPECT_EQ(Str(rolling["maxSurge"]), v.Has("dra-no-surge") ? "0" : "1");
    EXPECT_EQ(Str(rolling["maxUnavailable"]), v.Has("dra-no-surge") ? "1" : "0");
    EXPECT_TRUE(v.Kubelet().empty()) << "the kubelet-* components move the device-plugins folder";
    EXPECT_FALSE(mig) << "the MIG component is for plugin mode";
  } else if (plugin) {
    EXPECT_EQ(Str(pod["automountServiceAccountToken"]), "false")
        << "plugin mode never talks to the API server: no token";
    EXPECT_TRUE(rbac_kinds.empty()) << "plugin mode needs no RBAC objects";
    EXPECT_FALSE(pod["serviceAccountName"].IsDefined());
  }
  if (plugin) {
    // The kubelet's folder: the config's socket folder is mounted from the
    // host's (kubelet root)/device-plugins.
    const std::string socket = Str(At(config, {"kubelet", "socket"}));
    const Mount kubelet = MountAt(pod, c, socket.substr(0, socket.rfind('/')));
    ASSERT_TRUE(kubelet.mount.IsDefined())
        << "the folder of kubelet.socket " << socket << " is not mounted";
    EXPECT_EQ(Str(At(kubelet.volume, {"hostPath", "path"})), kKubeletDevicePlugins.at(v.Kubelet()));
    EXPECT_EQ(Str(At(kubelet.volume, {"hostPath", "type"})), "Directory");
  } else if (!dra) {
    EXPECT_TRUE(v.Kubelet().empty()) << "static mode never uses the kubelet's folder";
    EXPECT_FALSE(mig) << "the MIG component is for plugin mode";
    // The RBAC of static/agent/rbac.yaml, unchanged, bound to the pod's
    // service account.
    std::multiset<std::string> kinds(rbac_kinds.begin(), rbac_kinds.end());
    EXPECT_EQ(kinds,
              (std::multiset<std::string>{"ServiceAccount", "ClusterRole", "ClusterRoleBinding"}));
    EXPECT_EQ(Rules(docs), Rules(Docs("static/agent/rbac.yaml")))
        << "the rendered ClusterRole differs from static/agent/rbac.yaml";
    for (const YAML::Node& d : docs) {
      if (Str(d["kind"]) == "ClusterRoleBinding") {
        ASSERT_TRUE(d["subjects"].IsSequence() && d["subjects"].size() == 1u);
        EXPECT_EQ(Str(d["subjects"][0]["name"]), Str(pod["serviceAccountName"]))
            << "the ClusterRoleBinding binds another service account than the pod's";
        EXPECT_EQ(Str(d["subjects"][0]["namespace"]), Str(At(ds, {"metadata", "namespace"})));
        EXPECT_EQ(Str(At(d, {"roleRef", "name"})), "gpu-agent-static");
      }
    }
    // Not root: container settings win over the pod's.
    auto effective = [&](const char* key) {
      return At(c, {"securityContext", key}) ? Str(At(c, {"securityContext", key}))
                                             : Str(At(pod, {"securityContext", key}));
    };
    EXPECT_EQ(effective("runAsNonRoot"), "true");
    EXPECT_NE(effective("runAsUser"), "0");
    EXPECT_FALSE(effective("runAsUser").empty());
  }
}

// kubectl kustomize <dir>; false (and the message in *err) when it fails.
bool Kustomize(const std::string& dir, std::vector<YAML::Node>* docs, std::string* err) {
  TempDir out;
  const int rc = std::system(
      ("kubectl kustomize '" + dir + "' > '" + out.Join("out.yaml") + "' 2>&1").c_str());
  *err = ReadFile(out.Join("out.yaml"));
  if (rc != 0) return false;
  *docs = YAML::LoadAll(*err);
  return true;
}

std::vector<std::string> ComponentNames(const YAML::Node& kustomization) {
  std::vector<std::string> names;
  for (const YAML::Node& c : kustomization["components"]) {
    const fs::path p(Str(c));
    if (p.parent_path().filename() == "components") names.push_back(p.filename().string());
  }
  return names;
}

// The folders under manifests/ with a kustomization.yaml, by kind.
std::map<std::string, std::string> Kustomizations() {
  std::map<std::string, std::string> kinds;
  for (const auto& entry : fs::recursive_directory_iterator(Manifests())) {
    const std::string file = entry.path().filename().string();
    if (file == "kustomization.yml" || file == "Kustomization") {
      ADD_FAILURE() << entry.path() << ": name it kustomization.yaml";
    }
    if (file != "kustomization.yaml") continue;
    const YAML::Node k = YAML::LoadFile(entry.path().string());
    const std::string rel = fs::relative(entry.path().parent_path(), Manifests()).string();
    kinds[rel] = k["kind"] ? Str(k["kind"]) : "Kustomization";
  }
  return kinds;
}

TEST(ManifestsTest, EveryOverlayRendersOneConsistentDaemonSet) {
  REQUIRE_KUBECTL();
  std::set<std::string> overlays;
  for (const auto& [dir, kind] : Kustomizations()) {
    if (kind == "Kustomization") overlays.insert(dir);
  }
  // The overlays docs/install.md names; a new one is added here and there.
  EXPECT_EQ(overlays, (std::set<std::string>{"plugin", "plugin/host-driver", "plugin/gpu-operator",
                                             "plugin/mig", "static", "static/host-driver",
                                             "static/gpu-operator", "dra"}));
  // The image every overlay's `images:` replaces is the agent's image.
  const std::string agent_image = Str(At(Docs("plugin/agent/daemonset.yaml")[0],
                                         {"spec", "template", "spec", "containers"})[0]["image"]);
  EXPECT_EQ(agent_image, Str(At(Docs("static/agent/daemonset.yaml")[0],
                                {"spec", "template", "spec", "containers"})[0]["image"]));
  const std::string repository = agent_image.substr(0, agent_image.rfind(':'));
  for (const std::string& dir : overlays) {
    const YAML::Node k = YAML::LoadFile(Manifests() + "/" + dir + "/kustomization.yaml");
    Variant v{dir, dir.substr(0, dir.find('/')), ComponentNames(k)};
    ASSERT_TRUE(v.mode == "plugin" || v.mode == "static" || v.mode == "dra")
        << dir << ": overlays live under manifests/plugin, manifests/static or manifests/dra";
    std::vector<YAML::Node> docs;
    std::string err;
    ASSERT_TRUE(Kustomize(Manifests() + "/" + dir, &docs, &err)) << dir << ": " << err;
    CheckRender(v, docs);
    EXPECT_TRUE(Named(k["images"], repository).IsDefined())
        << dir << ": no `images:` entry for " << repository;
  }
}

// Every combination a user can make by switching the component lines of an
// overlay: each driver way, with and without MIG, on each kubelet folder.
TEST(ManifestsTest, EveryComponentCombinationRendersOneConsistentDaemonSet) {
  REQUIRE_KUBECTL();
  std::set<std::string> used = {"mig",         "node-config",  "node-health",
                                "dra-v1beta1", "dra-no-surge", "mode-handover"};
  for (const std::string& d : kDriverComponents) used.insert(d);
  for (const auto& [c, path] : kKubeletDevicePlugins) {
    if (!c.empty()) used.insert(c);
  }
  std::set<std::string> present;
  for (const auto& [dir, kind] : Kustomizations()) {
    if (dir.rfind("components/", 0) == 0) {
      EXPECT_EQ(kind, "Component") << dir;
      present.insert(dir.substr(std::string("components/").size()));
    }
  }
  EXPECT_EQ(present, used) << "a component this test does not combine";

  std::vector<Variant> variants;
  for (const std::string& driver : kDriverComponents) {
    variants.push_back({"static + " + driver, "static", {driver}});
    if (driver != "nvidia-runtime") {
      variants.push_back({"dra + " + driver, "dra", {driver}});
      // Kubernetes 1.32 (both) and 1.33 (the v1beta1 classes).
      variants.push_back({"dra + " + driver + " + dra-v1beta1 + dra-no-surge",
                          "dra",
                          {driver, "dra-v1beta1", "dra-no-surge"}});
      variants.push_back({"dra + " + driver + " + dra-v1beta1", "dra", {driver, "dra-v1beta1"}});
    }
    for (bool mig : {false, true}) {
      for (const auto& [kubelet, path] : kKubeletDevicePlugins) {
        Variant v{"plugin + " + driver, "plugin", {driver}};
        if (mig) v.components.push_back("mig");
        if (!kubelet.empty()) v.components.push_back(kubelet);
        for (size_t i = 1; i < v.components.size(); ++i) v.name += " + " + v.components[i];
        variants.push_back(v);
      }
      Variant nc{"plugin + " + driver + " + node-config", "plugin", {driver, "node-config"}};
      if (mig) nc.components.push_back("mig");
      variants.push_back(nc);
      Variant nh{"plugin + " + driver + " + node-health", "plugin", {driver, "node-health"}};
      if (mig) nh.components.push_back("mig");
      variants.push_back(nh);
      // Live moves to DRA mode need the host's driver root (DRA's CDI specs).
      if (driver != "nvidia-runtime") {
        Variant mh{"plugin + " + driver + " + node-config + mode-handover" + (mig ? " + mig" : ""),
                   "plugin",
                   {driver, "node-config", "mode-handover"}};
        if (mig) mh.components.push_back("mig");
        variants.push_back(mh);
      }
    }
  }
  for (const Variant& v : variants) {
    TempDir dir;
    auto rel = [&](const std::string& sub) {
      return fs::relative(fs::canonical(Manifests() + "/" + sub), fs::canonical(dir.path()))
          .string();
    };
    std::string text =
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\ncomponents:\n";
    text += "  - " + rel(v.mode + "/agent") + "\n  - " + rel("base") + "\n";
    for (const std::string& c : v.components) text += "  - " + rel("components/" + c) + "\n";
    dir.Write("kustomization.yaml", text);
    std::vector<YAML::Node> docs;
    std::string err;
    ASSERT_TRUE(Kustomize(dir.path(), &docs, &err)) << v.name << ":\n" << text << err;
    CheckRender(v, docs);
  }
}

}  // namespace
}  // namespace gpu_agent::testing
