// A stand-in for kube-apiserver's Node endpoints, answering as a real one
// does (DESIGN.md): GET, LIST and PATCH (RFC 6902 JSON patch, the generic 422
// on any patch failure), a watch stream, bearer tokens (401), RBAC (403),
// unknown nodes (404), injected 409/429/500, garbage, oversized and hung
// answers. Plain HTTP (kubectl proxy) or HTTPS with a certificate made at
// test time.
//
// Versions as a real server has them: one revision counter for every write
// (other kinds' writes advance it too); an object's resourceVersion is the
// revision of its last change; a LIST answers the current revision. The
// Node watch cache holds the last `cache_size` Node events: a watch from a
// version older than that window gets an ERROR event with code 410 inside a
// 200 answer ("too old resource version: X (Y)"). A restart starts the
// window at the current revision, so every older version is too old then.
#ifndef GPU_AGENT_TESTS_APISERVER_STUB_API_SERVER_STUB_H_
#define GPU_AGENT_TESTS_APISERVER_STUB_API_SERVER_STUB_H_

#include <atomic>
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
struct Request;
struct Response;
}  // namespace httplib

namespace gpu_agent::testing {

class ApiServerStub {
 public:
  // Plain HTTP when cert/key are empty.
  // With `client_ca`, TLS clients must present a certificate signed by it.
  // `threads`: requests served at once (a watch holds one the whole time);
  // 0 for httplib's default.
  ApiServerStub(std::string cert_file = "", std::string key_file = "", std::string client_ca = "",
                size_t threads = 0);
  ~ApiServerStub();

  int port() const { return port_; }
  std::string url() const;  // http(s)://<host>:<port>; host is "localhost" for TLS

  // A Node with the given capacity; `with_capacity` false leaves
  // status.capacity out (a fresh object).
  void AddNode(const std::string& name,
               std::map<std::string, std::string> capacity = {{"cpu", "8"}},
               bool with_capacity = true);
  // Deletes the Node (a DELETED event on watches; GETs and PATCHes 404).
  void DeleteNode(const std::string& name);
  // What a kubelet does: sets (or with nullopt removes) a capacity entry.
  void KubeletSetsCapacity(const std::string& node, const std::string& resource,
                           std::optional<std::string> value);
  std::optional<std::string> Capacity(const std::string& node, const std::string& resource);
  std::optional<std::string> Allocatable(const std::string& node, const std::string& resource);
  std::string NodeJson(const std::string& node);
  std::map<std::string, std::string> Labels(const std::string& node);
  std::map<std::string, std::string> Annotations(const std::string& node);
  // Another writer (a person, an operator) sets or (nullopt) removes a label.
  void SetLabel(const std::string& node, const std::string& key, std::optional<std::string> value);

  // Admission as the NodeRestriction plugin does it, for every request:
  // changes (add, change, remove) to labels whose key starts with one of
  // `prefixes` are refused with NodeRestriction's 403. Tokens whose user is
  // "system:node:<name>" always get NodeRestriction's own rules (no other
  // Node; no kubernetes.io/, k8s.io/ labels but the kubelet's; no
  // node-restriction.kubernetes.io/ label).
  void ForbidLabelPrefixes(std::set<std::string> prefixes);

  // Auth: when any token is registered, requests need one of them.
  void AllowToken(const std::string& token, bool may_patch = true,
                  const std::string& user = "system:serviceaccount:kube-system:gpu-agent");
  // From now on the token is refused (401), as after a rotation.
  void RevokeToken(const std::string& token);
  // Called when a request brings an unknown token (e.g. to rotate a file).
  void OnUnauthorized(std::function<void()> hook);

  // The next `times` PATCH requests answer `code` with a Status body.
  void FailNextPatches(int code, int times = 1);
  enum class GetMode { kNormal, kGarbage, kHuge, kHang };
  void SetGetMode(GetMode mode);
  // The next `times` GETs of a Node break off mid-answer (connection dropped).
  void DropNextGets(int times);
  // Ends every open watch, as a watch's timeout does; with `gone`, the next
  // watch that names a resourceVersion gets 410 Gone whatever it names.
  void EndWatches(bool gone);
  // While on, every watch that names a version is answered 410 (a server
  // or proxy gone wrong).
  void ExpireEveryWatch(bool on);
  // While on, every watch is answered 200 with no event and ended at once.
  void EndEveryWatchAtOnce(bool on);
  // The next watch gets an ERROR event with this code (not 410) and ends.
  void FailNextWatch(int code);
  // While on, LISTs get no answer (until turned off or the stub stops).
  void HangLists(bool on);
  // While on, PATCHes are held unanswered; turned off, the held ones are
  // applied and answered (a server applies what it received, whether or
  // not the client is still there).
  void HangPatches(bool on);
  int held_patches();
  // What a kube-apiserver restart looks like to a client: every open
  // watch breaks off, the first request on each connection opened before
  // the restart is cut off unanswered (the old process is gone), and the
  // watch cache starts again at the current revision.
  void Restart();
  // etcd backed up: the Nodes as they are now.
  void TakeBackup();
  // etcd restored from the last backup as the Kubernetes docs direct
  // (`etcdutl snapshot restore --bump-revision N --mark-compacted`, then
  // every kube-apiserver restarted): the Nodes go back to the backup's
  // content and versions, the revision jumps `bump` past the current one,
  // every earlier version is compacted (a watch naming one is answered
  // 410), and connections break off as in Restart().
  void RestoreBackup(uint64_t bump);
  // Writes to objects of other kinds: the revision moves on, no Node event.
  void TouchOtherObjects(int writes);
  // Node events the watch cache keeps (default 100, as kube-apiserver's).
  void SetWatchCacheSize(size_t events);
  // Forgets the failures still queued by FailNextPatches, DropNextGets,
  // FailNextWatch and FailNextSliceRequests (ones no request has taken yet).
  void ClearQueuedFailures();
  // Answers `call` ("list nodes", "watch nodes", ...) with 403 from now on.
  void Forbid(const std::string& call);

  // resource.k8s.io, for DRA: the versions the group's discovery lists
  // (none, the default: the group is not served, 404), and namespaced
  // ResourceClaims, GET only, by any served version. `json` is the claim as
  // the server holds it (metadata.uid, status.allocation...).
  void ServeResourceVersions(std::vector<std::string> versions);
  void PutResourceClaim(const std::string& ns, const std::string& name, std::string json);
  void DeleteResourceClaim(const std::string& ns, const std::string& name);
  // The next `times` GETs of a claim answer `code` (403, 409, 429, 500...).
  void FailNextClaimGets(int code, int times = 1);
  int claim_get_count() const;
  // While on, claim GETs are held unanswered (until turned off or the stub
  // stops); held_claim_gets() counts those waiting.
  void HangClaimGets(bool on);
  int held_claim_gets() const;
  // Each claim GET is answered `delay` late, as by an API server across a
  // network; GETs that arrive together wait together.
  void DelayClaimGets(std::chrono::microseconds delay);

  // Cluster-scoped ResourceSlices (any served resource.k8s.io version):
  // LIST and WATCH with the fieldSelector spec.nodeName / spec.driver, POST
  // (409 when the name is taken), PUT (409 on a stale resourceVersion),
  // DELETE. As kube-apiserver, a create without metadata.name takes
  // metadata.generateName cut to 58 characters plus 5 random ones, and a
  // name that is not a DNS subdomain of at most 253 characters (or no name
  // at all) is refused 422 Invalid. The slices of `node`, as JSON objects:
  std::vector<std::string> Slices(const std::string& node) const;
  // A slice someone else made (a run before this one, with more devices).
  void AddSlice(const std::string& json);
  // What a kubelet does at its start: deletes every slice of the node.
  void DeleteNodeSlices(const std::string& node);
  // Someone else replaces a slice's spec.devices with an empty list.
  void EmptySliceDevices(const std::string& name);
  // Ends every slice watch and moves the revision on; a watch that names a
  // version from before is answered 410 (a LIST's version is watchable).
  void ExpireSliceWatches();
  // POST, PUT and DELETE requests for slices (a dry run is none).
  int slice_writes() const;
  // The name of every slice ever stored, in order.
  std::vector<std::string> stored_slice_names() const;
  // The next `times` slice requests of `verb` ("list", "watch", "create",
  // "update" or "delete"; "dryRun create" for a create with dryRun=All, which
  // the others leave alone) are answered `code` with the Status a real
  // server sends for it (403 RBAC's refusal, 409 AlreadyExists to a create
  // and a Conflict otherwise, 410 Expired, 422 Invalid, 429 the
  // priority-and-fairness throttle, 503 ServiceUnavailable, else an etcd
  // timeout) and, when `retry_after_s` >= 0, a Retry-After header of that
  // many seconds. A refused write changes nothing.
  void FailNextSliceRequests(const std::string& verb, int code, int times = 1,
                             int retry_after_s = -1);
  // Slice requests answered by FailNextSliceRequests so far.
  int failed_slice_requests() const;
  // Whether devices' taints (spec.devices[].taints; basic.taints in
  // v1beta1) are kept, as with the DRADeviceTaints gate on (timeAdded set
  // where missing), or dropped on create and update, as with it off (the
  // default). A create with dryRun=All is answered as it would be stored and
  // stores nothing; it counts as no write.
  void ServeDeviceTaints(bool on);
  // Whether a kept taint may have the None effect (1.36 and later); off
  // (1.33 to 1.35), a slice with one is refused 422 as validation does.
  // Effects other than NoSchedule, NoExecute and None are refused always.
  void ServeNoneTaintEffect(bool on);
  // Whether a shared device's consumable capacity (allowMultipleAllocations,
  // capacity[].requestPolicy; under basic in v1beta1) is kept, as with the
  // DRAConsumableCapacity gate on, or dropped on create and update, as with
  // it off (the default here).
  void ServeConsumableCapacity(bool on);

  // A hostile or broken server. From now on every request of `call` (as
  // calls() names them: "watch resourceslices", "get resource.k8s.io",
  // "get resourceclaims", "update resourceslices", "patch nodes/status",
  // "watch nodes", ...) is answered 200 with `body`, and nothing else
  // happens. With `forever`, the body never ends: `body` is sent again and
  // again, `every` apart (0: as fast as the client reads), until the client
  // goes or the stub stops. Each such answer is logged in requests().
  void AnswerWith(const std::string& call, std::string body, bool forever = false,
                  std::chrono::milliseconds every = std::chrono::milliseconds(0));
  // Back to answering `call` as a server does.
  void AnswerNormally(const std::string& call);
  // Hostile answers that have run: the bytes sent so far in them.
  uint64_t hostile_bytes_sent() const;

  // RBAC-style "verb resource" of every request seen: "get nodes",
  // "watch nodes", "patch nodes/status", ...
  std::set<std::string> calls() const;
  int patch_count() const;
  int get_count() const;
  int watch_count() const;
  // Watches answered 200 whose stream is still open.
  int open_watches() const;
  int list_count() const;
  // Watches answered with 410 (too old).
  int expired_count() const;
  // Requests cut off unanswered because their connection predates Restart().
  int cut_count() const;
  // The timeoutSeconds of every watch, in order (0: none given).
  std::vector<long> watch_timeouts() const;
  uint64_t revision() const;
  // Every request, in arrival order, as (when, "verb resource").
  struct Request {
    std::chrono::steady_clock::time_point at;
    std::string call;
    std::string node;  // the Node named in the path or field selector
    // Slice creates and updates: with dryRun=All, and the object's name (as
    // generated from metadata.generateName where it had none).
    bool dry_run = false;
    std::string name;
  };
  std::vector<Request> requests() const;
  // Requests that arrived at or after `t`.
  int RequestsSince(std::chrono::steady_clock::time_point t) const;
  std::vector<std::string> patch_bodies() const;

  // Events created (POST /api/v1/namespaces/<ns>/events, RBAC "create
  // events"; refused with Forbid("create events")), as the JSON objects
  // stored, in order; each must name an involvedObject, a reason and a
  // message (else 422).
  std::vector<std::string> events() const;
  // A Node's status.conditions entry of `type` ("" when none), as JSON.
  // PATCH nodes/<n>/status with application/strategic-merge-patch+json
  // merges status.conditions by type, as kube-apiserver does.
  std::string Condition(const std::string& node, const std::string& type);
  // Sets (adds or replaces) a condition of the Node's status, as its
  // writer would: the kubelet's Ready (which the agent must leave alone),
  // or a GpuHealthy an earlier agent left.
  void SetCondition(const std::string& node, const std::string& type, const std::string& status);
  std::vector<std::string> patch_content_types() const;

 private:
  struct Event {
    uint64_t rv;
    std::string type;
    std::string object;
  };
  std::string Handle(const std::string& method, const std::string& path, const std::string& auth,
                     const std::string& content_type, const std::string& body, int* status);
  // Requests for ResourceSlices.
  void HandleSlices(const httplib::Request& req, httplib::Response& res);
  // GETs under /apis/resource.k8s.io: discovery and ResourceClaims.
  std::string HandleResource(const std::string& path, const std::string& auth, int* status);
  // `status_sub`: the status subresource, which keeps metadata changes and
  // resets spec (v1 Node's legacy rule); else the Node, whose PATCH drops
  // status changes.
  std::string ApplyPatch(const std::string& node, const std::string& body, bool status_sub,
                         const std::string& user, int* status, bool strategic = false);
  std::string CreateEvent(const std::string& path, const std::string& auth, const std::string& body,
                          int* status);
  // REQUIRES: mu_ held. `from_cache`: resourceVersion=0, answered from
  // the watch cache at its version; else a consistent read at the revision.
  std::string List(const std::string& name, bool from_cache) const;
  // REQUIRES: `lock` holds mu_. The 401 body when `auth` brings no known
  // token (the hook runs with `lock` released), else empty with the
  // token's user and whether it may patch.
  std::string Authenticate(std::unique_lock<std::mutex>& lock, const std::string& auth,
                           std::string* user, bool* may_patch, int* status);
  // The Status body and code when `auth` may not make `call`, else empty.
  std::string Authorize(const std::string& auth, const std::string& call, int* status);
  void Publish(const std::string& node, const char* type = "MODIFIED");
  std::map<std::string, std::string> Members(const std::string& node, const char* field);
  // Notes a request; true when it arrived on a connection opened before the
  // last Restart(), which must then be cut off.
  bool Arrive(const std::string& call, const std::string& node, int remote_port);
  void Watch(const httplib::Request& req, httplib::Response& res);
  // The oldest version a watch may start from.  REQUIRES: mu_ held.
  uint64_t OldestWatchable() const;

  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
  bool tls_ = false;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  struct Hostile {
    std::string body;
    bool forever = false;
    std::chrono::milliseconds every{0};
  };
  std::map<std::string, Hostile> hostile_;  // by call; protected by mu_
  std::atomic<uint64_t> hostile_bytes_{0};
  // Answers `req` as AnswerWith asked, if it did; true when it answered.
  bool AnswerHostile(const httplib::Request& req, httplib::Response& res);
  uint64_t rv_ = 100;
  std::map<std::string, std::string> nodes_;   // name -> JSON
  std::map<std::string, std::string> backup_;  // TakeBackup's copy of nodes_
  std::deque<Event> events_;
  std::map<std::string, std::pair<bool, std::string>> tokens_;
  std::function<void()> on_unauthorized_;
  std::deque<int> patch_failures_;
  GetMode get_mode_ = GetMode::kNormal;
  int drop_gets_ = 0;
  uint64_t watch_epoch_ = 0;    // EndWatches: watches end cleanly
  uint64_t restart_epoch_ = 0;  // Restart: watches break off
  bool gone_next_watch_ = false;
  bool expire_every_watch_ = false;
  bool end_every_watch_ = false;
  int fail_next_watch_ = 0;
  bool hang_lists_ = false;
  bool hang_patches_ = false;
  int held_patches_ = 0;
  size_t cache_size_ = 100;
  uint64_t cache_start_ = 100;  // revision the watch cache was started at
  uint64_t cache_rv_ = 100;     // the watch cache's version: its last event or start
  bool evicted_ = false;        // events fell out of the window since then
  // Client port -> its last request. Only a connection used within the
  // keep-alive timeout (httplib's 5 s) can still be open at a restart; the
  // rest were closed, and their ports may be reused by new connections.
  std::map<int, std::chrono::steady_clock::time_point> ports_seen_;
  std::set<int> doomed_ports_;
  std::set<std::string> forbidden_;
  std::set<std::string> forbidden_label_prefixes_;
  std::vector<Request> requests_;
  std::vector<std::string> events_created_;
  int patches_ = 0, gets_ = 0, watches_ = 0, lists_ = 0, expired_ = 0, cut_ = 0;
  int open_watches_ = 0;
  std::vector<long> watch_timeouts_;
  std::vector<std::string> patch_bodies_, patch_types_;
  std::set<std::string> calls_;
  std::vector<std::string> resource_versions_;
  std::map<std::string, std::string> claims_;  // "<ns>/<name>" -> JSON
  std::deque<int> claim_failures_;
  int claim_gets_ = 0;
  bool hang_claims_ = false;
  int held_claim_gets_ = 0;
  std::chrono::microseconds claim_delay_{0};
  std::map<std::string, std::string> slices_;  // name -> JSON
  std::deque<Event> slice_events_;
  uint64_t slice_oldest_ = 0;       // a watch from before this version is answered 410
  uint64_t slice_watch_epoch_ = 0;  // ExpireSliceWatches ends the open ones
  int slice_writes_ = 0;
  std::vector<std::string> stored_slice_names_;
  uint64_t generated_names_ = 0;  // names made from a generateName so far
  struct InjectedFailure {
    int code;
    int retry_after_s;
  };
  std::map<std::string, std::deque<InjectedFailure>> slice_failures_;  // by verb
  int failed_slice_requests_ = 0;
  bool serve_taints_ = false;
  bool serve_none_effect_ = false;
  bool serve_consumable_ = false;
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
