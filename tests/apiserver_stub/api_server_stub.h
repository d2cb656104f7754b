// A stand-in for kube-apiserver's Node endpoints, answering as a real one
// does (DESIGN.md): GET and PATCH (RFC 6902 JSON patch, the generic 422 on any
// patch failure), a watch stream, bearer tokens (401), RBAC (403), unknown
// nodes (404), injected 409/429/500, garbage, oversized and hung answers.
// Plain HTTP (kubectl proxy) or HTTPS with a certificate made at test time.
#ifndef GPU_AGENT_TESTS_APISERVER_STUB_API_SERVER_STUB_H_
#define GPU_AGENT_TESTS_APISERVER_STUB_API_SERVER_STUB_H_

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace httplib {
class Server;
}

namespace gpu_agent::testing {

class ApiServerStub {
 public:
  // Plain HTTP when cert/key are empty.
  // With `client_ca`, TLS clients must present a certificate signed by it.
  ApiServerStub(std::string cert_file = "", std::string key_file = "", std::string client_ca = "");
  ~ApiServerStub();

  int port() const { return port_; }
  std::string url() const;  // http(s)://<host>:<port>; host is "localhost" for TLS

  // A Node with the given capacity; `with_capacity` false leaves
  // status.capacity out (a fresh object).
  void AddNode(const std::string& name,
               std::map<std::string, std::string> capacity = {{"cpu", "8"}},
               bool with_capacity = true);
  // What a kubelet does: sets (or with nullopt removes) a capacity entry.
  void KubeletSetsCapacity(const std::string& node, const std::string& resource,
                           std::optional<std::string> value);
  std::optional<std::string> Capacity(const std::string& node, const std::string& resource);
  std::optional<std::string> Allocatable(const std::string& node, const std::string& resource);
  std::string NodeJson(const std::string& node);

  // Auth: when any token is registered, requests need one of them.
  void AllowToken(const std::string& token, bool may_patch = true,
                  const std::string& user = "system:serviceaccount:kube-system:gpu-agent");
  // Called when a request brings an unknown token (e.g. to rotate a file).
  void OnUnauthorized(std::function<void()> hook);

  // The next `times` PATCH requests answer `code` with a Status body.
  void FailNextPatches(int code, int times = 1);
  enum class GetMode { kNormal, kGarbage, kHuge, kHang };
  void SetGetMode(GetMode mode);
  // The next `times` GETs of a Node break off mid-answer (connection dropped).
  void DropNextGets(int times);
  // Ends every open watch; with `gone`, the next watch that names a
  // resourceVersion gets 410 Gone (history compacted), as a real server may.
  void EndWatches(bool gone);

  // RBAC-style "verb resource" of every request seen: "get nodes",
  // "watch nodes", "patch nodes/status", ...
  std::set<std::string> calls() const;
  int patch_count() const;
  int get_count() const;
  int watch_count() const;
  std::vector<std::string> patch_bodies() const;
  std::vector<std::string> patch_content_types() const;

 private:
  struct Event {
    uint64_t rv;
    std::string type;
    std::string object;
  };
  std::string Handle(const std::string& method, const std::string& path, const std::string& auth,
                     const std::string& content_type, const std::string& body, int* status);
  std::string ApplyPatch(const std::string& node, const std::string& body, int* status);
  void Publish(const std::string& node);

  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
  bool tls_ = false;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  uint64_t rv_ = 100;
  std::map<std::string, std::string> nodes_;  // name -> JSON
  std::deque<Event> events_;
  std::map<std::string, std::pair<bool, std::string>> tokens_;
  std::function<void()> on_unauthorized_;
  std::deque<int> patch_failures_;
  GetMode get_mode_ = GetMode::kNormal;
  int drop_gets_ = 0;
  uint64_t watch_epoch_ = 0;
  bool gone_next_watch_ = false;
  int patches_ = 0, gets_ = 0, watches_ = 0;
  std::vector<std::string> patch_bodies_, patch_types_;
  std::set<std::string> calls_;
};

// Makes a CA and a server certificate for "localhost" (and a second,
// unrelated CA) with the openssl command. Files under `dir`.
struct TestPki {
  std::string ca, other_ca, cert, key;
  std::string client_cert, client_key;  // signed by ca, CN=gpu-agent
};
TestPki MakeTestPki(const std::string& dir);

}  // namespace gpu_agent::testing

#endif  // GPU_AGENT_TESTS_APISERVER_STUB_API_SERVER_STUB_H_
