#include "api_server_stub.h"

#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
#error "cpp-httplib needs CPPHTTPLIB_OPENSSL_SUPPORT"
#endif
#include <httplib.h>
#include <rapidjson/document.h>
#include <rapidjson/pointer.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <iterator>
#include <stdexcept>

namespace gpu_agent::testing {
namespace {

std::string Serialize(const rapidjson::Value& v) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  v.Accept(w);
  return std::string(buf.GetString(), buf.GetSize());
}

std::string StatusBody(int code, const std::string& reason, const std::string& message) {
  rapidjson::Document d(rapidjson::kObjectType);
  auto& a = d.GetAllocator();
  d.AddMember("kind", "Status", a);
  d.AddMember("apiVersion", "v1", a);
  d.AddMember("metadata", rapidjson::Value(rapidjson::kObjectType), a);
  d.AddMember("status", "Failure", a);
  d.AddMember("message", rapidjson::Value(message.c_str(), a), a);
  d.AddMember("reason", rapidjson::Value(reason.c_str(), a), a);
  d.AddMember("details", rapidjson::Value(rapidjson::kObjectType), a);
  d.AddMember("code", code, a);
  return Serialize(d);
}

// A watch's ERROR event line, as the API server ends a watch with one.
std::string ErrorEvent(int code, const std::string& reason, const std::string& message) {
  return "{\"type\":\"ERROR\",\"object\":" + StatusBody(code, reason, message) + "}\n";
}

// The Status a real server answers a refused ResourceSlice request with.
std::string SliceFailure(const std::string& verb, const std::string& name, int code) {
  const std::string what =
      "resourceslices.resource.k8s.io" + (name.empty() ? std::string() : " \"" + name + "\"");
  switch (code) {
    case 403:
      return StatusBody(403, "Forbidden",
                        what +
                            " is forbidden: User \"system:serviceaccount:kube-system:gpu-agent\" "
                            "cannot " +
                            verb +
                            " resource \"resourceslices\" in API group \"resource.k8s.io\" at "
                            "the cluster scope");
    case 409:
      if (verb == "create") return StatusBody(409, "AlreadyExists", what + " already exists");
      return StatusBody(409, "Conflict",
                        "Operation cannot be fulfilled on " + what +
                            ": the object has been modified; please apply your changes to the "
                            "latest version and try again");
    case 410:
      return StatusBody(410, "Expired", "too old resource version");
    case 422:
      return StatusBody(422, "Invalid",
                        "ResourceSlice.resource.k8s.io" +
                            (name.empty() ? std::string() : " \"" + name + "\"") +
                            " is invalid: spec.devices[0]: Invalid value");
    case 429:
      return StatusBody(429, "TooManyRequests", "Too many requests, please try again later.");
    case 503:
      return StatusBody(503, "ServiceUnavailable",
                        "the server is currently unable to handle the request");
    default:
      return StatusBody(code, "InternalError",
                        "Internal error occurred: etcdserver: request timed out");
  }
}

// Why `name` is no valid object name (a DNS subdomain of at most 253
// characters), in apimachinery's words; empty when it is one.
std::string NameProblem(const std::string& name) {
  std::vector<std::string> problems;
  if (name.size() > 253) problems.push_back("must be no more than 253 characters");
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  bool ok = !name.empty();
  for (size_t start = 0; ok && start <= name.size();) {
    const size_t dot = std::min(name.find('.', start), name.size());
    const std::string label = name.substr(start, dot - start);
    ok = !label.empty() && alnum(label.front()) && alnum(label.back()) &&
         std::all_of(label.begin(), label.end(), [&](char c) { return alnum(c) || c == '-'; });
    start = dot + 1;
  }
  if (!ok) {
    problems.push_back(
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
        "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
        "used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')");
  }
  if (problems.empty()) return "";
  if (problems.size() == 1) return problems[0];
  return "[" + problems[0] + ", " + problems[1] + "]";
}

// Promises a body, then fails: the client sees the connection drop
// mid-answer, as when the server went away.
void CutOff(httplib::Response& res) {
  res.set_content_provider(4096, "application/json",
                           [](size_t, size_t, httplib::DataSink&) { return false; });
}

// The one 422 a real API server gives for any failing JSON patch.
std::string Generic422() {
  return StatusBody(422, "Invalid",
                    "the server rejected our request due to an error in our request");
}

// RFC 6901: "/a/b~1c" -> {"a", "b/c"}. False when not a pointer.
bool SplitPointer(const std::string& p, std::vector<std::string>* out) {
  if (p.empty()) return true;
  if (p[0] != '/') return false;
  size_t start = 1;
  for (;;) {
    size_t slash = p.find('/', start);
    std::string tok =
        p.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    std::string unescaped;
    for (size_t i = 0; i < tok.size(); ++i) {
      if (tok[i] == '~') {
        if (i + 1 >= tok.size()) return false;
        if (tok[i + 1] == '0')
          unescaped.push_back('~');
        else if (tok[i + 1] == '1')
          unescaped.push_back('/');
        else
          return false;
        ++i;
      } else {
        unescaped.push_back(tok[i]);
      }
    }
    out->push_back(unescaped);
    if (slash == std::string::npos) return true;
    start = slash + 1;
  }
}

rapidjson::Value* Walk(rapidjson::Value* v, const std::vector<std::string>& toks, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (!v->IsObject()) return nullptr;
    auto it = v->FindMember(toks[i].c_str());
    if (it == v->MemberEnd()) return nullptr;
    v = &it->value;
  }
  return v;
}

// Applies one operation; false on any failure (the caller answers 422).
bool ApplyOp(rapidjson::Document& doc, const rapidjson::Value& op) {
  auto& a = doc.GetAllocator();
  if (!op.IsObject() || !op.HasMember("op") || !op["op"].IsString() || !op.HasMember("path") ||
      !op["path"].IsString()) {
    return false;
  }
  const std::string kind = op["op"].GetString();
  std::vector<std::string> toks;
  if (!SplitPointer(op["path"].GetString(), &toks) || toks.empty()) return false;
  rapidjson::Value* parent = Walk(&doc, toks, toks.size() - 1);
  if (parent == nullptr || !parent->IsObject()) return false;
  const std::string& last = toks.back();
  auto member = parent->FindMember(last.c_str());
  if (kind == "add" || kind == "replace") {
    if (!op.HasMember("value")) return false;
    if (kind == "replace" && member == parent->MemberEnd()) return false;
    rapidjson::Value value(op["value"], a);
    if (member != parent->MemberEnd()) {
      member->value = value;
    } else {
      parent->AddMember(rapidjson::Value(last.c_str(), a), value, a);
    }
    return true;
  }
  if (kind == "remove") {
    if (member == parent->MemberEnd()) return false;
    parent->RemoveMember(member);
    return true;
  }
  if (kind == "test") {
    return member != parent->MemberEnd() && op.HasMember("value") && member->value == op["value"];
  }
  return false;
}

// A strategic merge patch, as kube-apiserver applies one to a Node: objects
// merge key by key (null removes), lists are replaced, except
// status.conditions (and any "conditions" list), merged by "type".
void MergeStrategic(rapidjson::Document& doc, rapidjson::Value& target,
                    const rapidjson::Value& patch) {
  auto& a = doc.GetAllocator();
  if (!target.IsObject()) target.SetObject();
  for (const auto& m : patch.GetObject()) {
    const char* key = m.name.GetString();
    auto have = target.FindMember(key);
    if (m.value.IsNull()) {
      if (have != target.MemberEnd()) target.RemoveMember(have);
      continue;
    }
    if (m.value.IsObject()) {
      if (have == target.MemberEnd()) {
        target.AddMember(rapidjson::Value(key, a), rapidjson::Value(rapidjson::kObjectType), a);
        have = target.FindMember(key);
      }
      MergeStrategic(doc, have->value, m.value);
      continue;
    }
    if (m.value.IsArray() && std::string(key) == "conditions" && have != target.MemberEnd() &&
        have->value.IsArray()) {
      for (const auto& c : m.value.GetArray()) {
        bool merged = false;
        for (auto& old : have->value.GetArray()) {
          if (c.IsObject() && old.IsObject() && c.HasMember("type") && old.HasMember("type") &&
              old["type"] == c["type"]) {
            MergeStrategic(doc, old, c);
            merged = true;
          }
        }
        if (!merged) have->value.PushBack(rapidjson::Value(c, a), a);
      }
      continue;
    }
    if (have != target.MemberEnd()) {
      have->value.CopyFrom(m.value, a);
    } else {
      target.AddMember(rapidjson::Value(key, a), rapidjson::Value(m.value, a), a);
    }
  }
}

bool ValidLabelValue(const std::string& v) {
  if (v.size() > 63) return false;
  if (v.empty()) return true;
  auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  if (!alnum(v.front()) || !alnum(v.back())) return false;
  return std::all_of(v.begin(), v.end(),
                     [&](char c) { return alnum(c) || c == '-' || c == '_' || c == '.'; });
}

// NodeRestriction's rule for a node's own credentials: no
// node-restriction.kubernetes.io/ label, and no other kubernetes.io/ or
// k8s.io/ label than the ones the kubelet sets.
bool NodeRestrictionForbids(const std::string& key) {
  const size_t slash = key.find('/');
  if (slash == std::string::npos) return false;
  const std::string ns = key.substr(0, slash);
  auto under = [&](const std::string& d) {
    return ns == d || (ns.size() > d.size() &&
                       ns.compare(ns.size() - d.size() - 1, std::string::npos, "." + d) == 0);
  };
  if (under("node-restriction.kubernetes.io")) return true;
  if (!under("kubernetes.io") && !under("k8s.io")) return false;
  static const std::set<std::string> kubelet = {"kubernetes.io/hostname",
                                                "kubernetes.io/arch",
                                                "kubernetes.io/os",
                                                "beta.kubernetes.io/arch",
                                                "beta.kubernetes.io/os",
                                                "beta.kubernetes.io/instance-type",
                                                "node.kubernetes.io/instance-type",
                                                "topology.kubernetes.io/region",
                                                "topology.kubernetes.io/zone",
                                                "failure-domain.beta.kubernetes.io/region",
                                                "failure-domain.beta.kubernetes.io/zone"};
  if (kubelet.count(key) > 0) return false;
  // The kubelet may also set anything under these namespaces.
  return !under("kubelet.kubernetes.io") && !under("node.kubernetes.io");
}

// The Node a request is about: from the field selector of a list or watch,
// else from the path (/api/v1/nodes/<name>[/status]).
std::string NodeOf(const httplib::Request& req) {
  const std::string sel = req.get_param_value("fieldSelector");
  const std::string prefix = "metadata.name=";
  if (sel.rfind(prefix, 0) == 0) return sel.substr(prefix.size());
  const std::string path_prefix = "/api/v1/nodes/";
  if (req.path.rfind(path_prefix, 0) != 0) return "";
  std::string rest = req.path.substr(path_prefix.size());
  return rest.substr(0, rest.find('/'));
}

}  // namespace

ApiServerStub::ApiServerStub(std::string cert, std::string key, std::string client_ca,
                             size_t threads) {
  if (!cert.empty()) {
    server_ = std::make_unique<httplib::SSLServer>(cert.c_str(), key.c_str(),
                                                   client_ca.empty() ? nullptr : client_ca.c_str());
    tls_ = true;
  } else {
    server_ = std::make_unique<httplib::Server>();
  }
  if (threads > 0) server_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  auto handler = [this](const httplib::Request& req, httplib::Response& res) {
    if (AnswerHostile(req, res)) return;
    if (req.path.rfind("/apis/resource.k8s.io", 0) == 0 &&
        req.path.find("/resourceslices") != std::string::npos) {
      HandleSlices(req, res);
      return;
    }
    if (req.method == "GET" && req.has_param("watch")) {
      Watch(req, res);
      return;
    }
    if (req.method == "GET" && req.path.rfind("/apis/resource.k8s.io", 0) == 0) {
      int status = 200;
      std::string body = HandleResource(req.path, req.get_header_value("Authorization"), &status);
      res.status = status;
      res.set_content(body, "application/json");
      return;
    }
    const bool list = req.method == "GET" && req.path == "/api/v1/nodes";
    const bool status_sub = req.path.size() > 7 && req.path.rfind("/status") == req.path.size() - 7;
    const std::string call = list ? "list nodes"
                             : req.method == "GET"
                                 ? "get nodes"
                                 : (status_sub ? "patch nodes/status" : "patch nodes");
    {
      std::lock_guard<std::mutex> lock(mu_);
      bool cut = Arrive(call, NodeOf(req), req.remote_port);
      if (!cut && req.method == "GET" && drop_gets_ > 0) {
        --drop_gets_;
        ++gets_;
        cut = true;
      }
      if (cut) {
        CutOff(res);
        return;
      }
    }
    int status = 200;
    std::string auth = req.get_header_value("Authorization");
    std::string body;
    if (list) {
      body = Authorize(auth, call, &status);
      if (body.empty()) {
        std::unique_lock<std::mutex> lock(mu_);
        ++lists_;
        cv_.wait(lock, [&] { return stopping_ || !hang_lists_; });
        const std::string sel = req.get_param_value("fieldSelector");
        const std::string prefix = "metadata.name=";
        body = List(sel.rfind(prefix, 0) == 0 ? sel.substr(prefix.size()) : "",
                    req.get_param_value("resourceVersion") == "0");
      }
    } else {
      if (req.method == "PATCH") {
        std::unique_lock<std::mutex> lock(mu_);
        if (hang_patches_) {
          ++held_patches_;
          cv_.notify_all();
          cv_.wait(lock, [&] { return stopping_ || !hang_patches_; });
          --held_patches_;
        }
      }
      body = Handle(req.method, req.path, auth, req.get_header_value("Content-Type"), req.body,
                    &status);
    }
    res.status = status;
    res.set_content(body, "application/json");
  };
  server_->Get(".*", handler);
  server_->Patch(".*", handler);
  // POST: Events on their own; ResourceSlices (and what else comes) through
  // the common handler.
  server_->Post(".*", [this, handler](const httplib::Request& req, httplib::Response& res) {
    if (req.path.find("/events") == std::string::npos) {
      handler(req, res);
      return;
    }
    int status = 201;
    std::string body =
        CreateEvent(req.path, req.get_header_value("Authorization"), req.body, &status);
    res.status = status;
    res.set_content(body, "application/json");
  });
  server_->Put(".*", handler);
  server_->Delete(".*", handler);
  server_->set_read_timeout(5, 0);
  // kube-apiserver does not close a connection after a few requests.
  server_->set_keep_alive_max_count(1000);
  server_->set_tcp_nodelay(true);  // as the API server does
  port_ = server_->bind_to_any_port("127.0.0.1");
  if (port_ <= 0) throw std::runtime_error("stub cannot bind");
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  while (!server_->is_running()) std::this_thread::yield();
}

bool ApiServerStub::Arrive(const std::string& call, const std::string& node, int remote_port) {
  requests_.push_back({std::chrono::steady_clock::now(), call, node});
  ports_seen_[remote_port] = requests_.back().at;
  // The first request on a connection from before the restart is the one
  // that finds the old process gone; the client then opens a new one.
  const bool cut = doomed_ports_.erase(remote_port) > 0;
  cut_ += cut ? 1 : 0;
  return cut;
}

std::string ApiServerStub::Authenticate(std::unique_lock<std::mutex>& lock, const std::string& auth,
                                        std::string* user, bool* may_patch, int* status) {
  *user = "system:anonymous";
  *may_patch = true;
  if (tokens_.empty()) return "";
  const std::string prefix = "Bearer ";
  auto it = auth.rfind(prefix, 0) == 0 ? tokens_.find(auth.substr(prefix.size())) : tokens_.end();
  if (it == tokens_.end()) {
    auto hook = on_unauthorized_;
    lock.unlock();
    if (hook) hook();
    *status = 401;
    return StatusBody(401, "Unauthorized", "Unauthorized");
  }
  *may_patch = it->second.first;
  *user = it->second.second;
  return "";
}

std::string ApiServerStub::Authorize(const std::string& auth, const std::string& call,
                                     int* status) {
  std::unique_lock<std::mutex> lock(mu_);
  calls_.insert(call);
  std::string user;
  bool may_patch;
  if (std::string denied = Authenticate(lock, auth, &user, &may_patch, status); !denied.empty()) {
    return denied;
  }
  if (forbidden_.count(call) > 0) {
    const size_t space = call.find(' ');
    *status = 403;
    return StatusBody(403, "Forbidden",
                      "nodes is forbidden: User \"" + user + "\" cannot " + call.substr(0, space) +
                          " resource \"" + call.substr(space + 1) +
                          "\" in API group \"\" at the cluster scope");
  }
  return "";
}

void ApiServerStub::ServeResourceVersions(std::vector<std::string> versions) {
  std::lock_guard<std::mutex> lock(mu_);
  resource_versions_ = std::move(versions);
}

void ApiServerStub::PutResourceClaim(const std::string& ns, const std::string& name,
                                     std::string json) {
  std::lock_guard<std::mutex> lock(mu_);
  claims_[ns + "/" + name] = std::move(json);
  ++rv_;
}

void ApiServerStub::DeleteResourceClaim(const std::string& ns, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  claims_.erase(ns + "/" + name);
  ++rv_;
}

void ApiServerStub::FailNextClaimGets(int code, int times) {
  std::lock_guard<std::mutex> lock(mu_);
  for (int i = 0; i < times; ++i) claim_failures_.push_back(code);
}

void ApiServerStub::HangClaimGets(bool on) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    hang_claims_ = on;
  }
  cv_.notify_all();
}

void ApiServerStub::DelayClaimGets(std::chrono::microseconds delay) {
  std::lock_guard<std::mutex> lock(mu_);
  claim_delay_ = delay;
}

int ApiServerStub::held_claim_gets() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_claim_gets_;
}

int ApiServerStub::claim_get_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return claim_gets_;
}

namespace {

std::string SliceField(const rapidjson::Value& slice, const char* field) {
  if (!slice.IsObject() || !slice.HasMember("spec") || !slice["spec"].IsObject()) return "";
  const rapidjson::Value& spec = slice["spec"];
  return spec.HasMember(field) && spec[field].IsString() ? spec[field].GetString() : "";
}

std::string ToJson(const rapidjson::Value& v) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  v.Accept(w);
  return buf.GetString();
}

// The object with metadata.resourceVersion set to `rv`.
std::string WithVersion(const std::string& json, uint64_t rv) {
  rapidjson::Document d;
  d.Parse(json.c_str());
  d["metadata"]["resourceVersion"].SetString(std::to_string(rv).c_str(), d.GetAllocator());
  return ToJson(d);
}

// "spec.nodeName=a,spec.driver=b" -> {spec.nodeName: a, spec.driver: b}
std::map<std::string, std::string> FieldSelector(const std::string& sel) {
  std::map<std::string, std::string> out;
  size_t start = 0;
  while (start < sel.size()) {
    size_t comma = sel.find(',', start);
    if (comma == std::string::npos) comma = sel.size();
    const std::string term = sel.substr(start, comma - start);
    const size_t eq = term.find('=');
    if (eq != std::string::npos) out[term.substr(0, eq)] = term.substr(eq + 1);
    start = comma + 1;
  }
  return out;
}

bool Selected(const std::string& json, const std::map<std::string, std::string>& sel) {
  rapidjson::Document d;
  d.Parse(json.c_str());
  for (const auto& [field, value] : sel) {
    if (field == "spec.nodeName" && SliceField(d, "nodeName") != value) return false;
    if (field == "spec.driver" && SliceField(d, "driver") != value) return false;
  }
  return true;
}

// A binary quantity ("32768Mi") as kube-apiserver writes it back: the
// largest suffix that keeps an integer ("32Gi"); a plain decimal the same
// way ("1000" -> "1k"). Other values stay.
std::string CanonicalBinary(const std::string& q) {
  static constexpr const char* kSuffixes[] = {"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
  if (q.size() < 3) return q;
  const std::string suffix = q.substr(q.size() - 2);
  size_t at = 0;
  while (at < std::size(kSuffixes) && suffix != kSuffixes[at]) ++at;
  const std::string digits = q.substr(0, q.size() - 2);
  if (!q.empty() && q.find_first_not_of("0123456789") == std::string::npos && q.size() <= 15) {
    // A plain decimal: the largest of k, M, G... that keeps an integer.
    static constexpr const char* kDecimal[] = {"", "k", "M", "G", "T", "P", "E"};
    uint64_t n = std::stoull(q);
    size_t s = 0;
    while (n != 0 && n % 1000 == 0 && s + 1 < std::size(kDecimal)) {
      n /= 1000;
      ++s;
    }
    return std::to_string(n) + kDecimal[s];
  }
  if (at == std::size(kSuffixes) || digits.empty() ||
      digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 15) {
    return q;
  }
  uint64_t n = std::stoull(digits);
  if (n == 0) return "0";
  while (n % 1024 == 0 && at + 1 < std::size(kSuffixes)) {
    n /= 1024;
    ++at;
  }
  return std::to_string(n) + kSuffixes[at];
}

// A device's consumable capacity, dropped as a server with the
// DRAConsumableCapacity gate off drops it.
void DropConsumableCapacity(rapidjson::Value* fields) {
  fields->RemoveMember("allowMultipleAllocations");
  if (!fields->HasMember("capacity") || !(*fields)["capacity"].IsObject()) return;
  for (auto& c : (*fields)["capacity"].GetObject()) {
    if (c.value.IsObject()) c.value.RemoveMember("requestPolicy");
  }
}

// The quantity at `v` (a string) written back as the server would.
void Canonical(rapidjson::Value* v, rapidjson::Document::AllocatorType& a) {
  if (v == nullptr || !v->IsString()) return;
  const std::string canonical = CanonicalBinary(v->GetString());
  v->SetString(canonical.c_str(), a);
}

// The capacities of a slice's devices (v1: devices[].capacity, v1beta1:
// devices[].basic.capacity), as the server stores them.
void CanonicalQuantities(rapidjson::Document* d) {
  auto& a = d->GetAllocator();
  if (!d->IsObject() || !d->HasMember("spec") || !(*d)["spec"].IsObject()) return;
  rapidjson::Value& spec = (*d)["spec"];
  if (!spec.HasMember("devices") || !spec["devices"].IsArray()) return;
  for (rapidjson::Value& dev : spec["devices"].GetArray()) {
    if (!dev.IsObject()) continue;
    rapidjson::Value* holder = &dev;
    if (dev.HasMember("basic") && dev["basic"].IsObject()) holder = &dev["basic"];
    if (!holder->HasMember("capacity") || !(*holder)["capacity"].IsObject()) continue;
    for (auto& c : (*holder)["capacity"].GetObject()) {
      if (!c.value.IsObject() || !c.value.HasMember("value") || !c.value["value"].IsString()) {
        continue;
      }
      Canonical(&c.value["value"], a);
      if (!c.value.HasMember("requestPolicy") || !c.value["requestPolicy"].IsObject()) continue;
      rapidjson::Value& policy = c.value["requestPolicy"];
      if (policy.HasMember("default")) Canonical(&policy["default"], a);
      if (policy.HasMember("validRange") && policy["validRange"].IsObject()) {
        for (auto& bound : policy["validRange"].GetObject()) Canonical(&bound.value, a);
      }
      if (policy.HasMember("validValues") && policy["validValues"].IsArray()) {
        for (auto& v : policy["validValues"].GetArray()) Canonical(&v, a);
      }
    }
  }
}

}  // namespace

std::vector<std::string> ApiServerStub::Slices(const std::string& node) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& [name, json] : slices_) {
    if (Selected(json, {{"spec.nodeName", node}})) out.push_back(json);
  }
  return out;
}

void ApiServerStub::AddSlice(const std::string& json) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    rapidjson::Document d;
    d.Parse(json.c_str());
    auto& a = d.GetAllocator();
    d["metadata"].AddMember("resourceVersion", rapidjson::Value(std::to_string(++rv_).c_str(), a),
                            a);
    const std::string stored = ToJson(d);
    slices_[d["metadata"]["name"].GetString()] = stored;
    slice_events_.push_back({rv_, "ADDED", stored});
  }
  cv_.notify_all();
}

void ApiServerStub::DeleteNodeSlices(const std::string& node) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = slices_.begin(); it != slices_.end();) {
      if (!Selected(it->second, {{"spec.nodeName", node}})) {
        ++it;
        continue;
      }
      slice_events_.push_back({++rv_, "DELETED", WithVersion(it->second, rv_)});
      it = slices_.erase(it);
    }
  }
  cv_.notify_all();
}

void ApiServerStub::EmptySliceDevices(const std::string& name) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = slices_.find(name);
    if (it == slices_.end()) return;
    rapidjson::Document d;
    d.Parse(it->second.c_str());
    d["spec"]["devices"].SetArray();
    d["metadata"]["resourceVersion"].SetString(std::to_string(++rv_).c_str(), d.GetAllocator());
    it->second = ToJson(d);
    slice_events_.push_back({rv_, "MODIFIED", it->second});
  }
  cv_.notify_all();
}

void ApiServerStub::ExpireSliceWatches() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Other objects' writes moved the revision on and the window past every
    // version a watch could name; a list answers the new revision, which is
    // watchable.
    slice_oldest_ = ++rv_;
    ++slice_watch_epoch_;
  }
  cv_.notify_all();
}

int ApiServerStub::slice_writes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return slice_writes_;
}

std::vector<std::string> ApiServerStub::stored_slice_names() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stored_slice_names_;
}

void ApiServerStub::FailNextSliceRequests(const std::string& verb, int code, int times,
                                          int retry_after_s) {
  std::lock_guard<std::mutex> lock(mu_);
  for (int i = 0; i < times; ++i) slice_failures_[verb].push_back({code, retry_after_s});
}

int ApiServerStub::failed_slice_requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failed_slice_requests_;
}

void ApiServerStub::ServeDeviceTaints(bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  serve_taints_ = on;
}

void ApiServerStub::ServeNoneTaintEffect(bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  serve_none_effect_ = on;
}

void ApiServerStub::ServeConsumableCapacity(bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  serve_consumable_ = on;
}

void ApiServerStub::HandleSlices(const httplib::Request& req, httplib::Response& res) {
  // /apis/resource.k8s.io/<version>/resourceslices[/<name>]
  const std::string marker = "/resourceslices";
  const size_t at = req.path.find(marker);
  const std::string rest = req.path.substr(at + marker.size());
  const std::string name = rest.size() > 1 ? rest.substr(1) : "";
  const bool watch = req.method == "GET" && req.has_param("watch");
  const std::string verb = req.method == "POST"     ? "create"
                           : req.method == "PUT"    ? "update"
                           : req.method == "DELETE" ? "delete"
                           : watch                  ? "watch"
                           : name.empty()           ? "list"
                                                    : "get";
  int status = 200;
  if (std::string denied =
          Authorize(req.get_header_value("Authorization"), verb + " resourceslices", &status);
      !denied.empty()) {
    res.status = status;
    res.set_content(denied, "application/json");
    return;
  }
  const std::map<std::string, std::string> sel =
      FieldSelector(req.get_param_value("fieldSelector"));
  const bool dry_run = req.get_param_value("dryRun") == "All";
  std::unique_lock<std::mutex> lock(mu_);
  requests_.push_back({std::chrono::steady_clock::now(), verb + " resourceslices", "", dry_run});
  Request& logged = requests_.back();  // requests_ grows only under mu_, held until answered
  auto answer = [&](int code, const std::string& body) {
    res.status = code;
    res.set_content(body, "application/json");
  };
  if (auto f = slice_failures_.find(dry_run ? "dryRun " + verb : verb);
      f != slice_failures_.end() && !f->second.empty()) {
    const InjectedFailure failure = f->second.front();
    f->second.pop_front();
    ++failed_slice_requests_;
    if (!dry_run && (verb == "create" || verb == "update" || verb == "delete")) ++slice_writes_;
    if (failure.retry_after_s >= 0) {
      res.set_header("Retry-After", std::to_string(failure.retry_after_s));
    }
    answer(failure.code, SliceFailure(verb, name, failure.code));
    return;
  }
  if (verb == "list") {
    std::string items;
    for (const auto& [n, json] : slices_) {
      if (Selected(json, sel)) items += (items.empty() ? "" : ",") + json;
    }
    answer(200,
           "{\"kind\":\"ResourceSliceList\",\"apiVersion\":\"resource.k8s.io/v1\","
           "\"metadata\":{\"resourceVersion\":\"" +
               std::to_string(rv_) + "\"},\"items\":[" + items + "]}");
    return;
  }
  if (verb == "create" || verb == "update") {
    if (!dry_run) ++slice_writes_;
    rapidjson::Document d;
    d.Parse(req.body.c_str());
    if (d.HasParseError() || !d.IsObject() || !d.HasMember("metadata") ||
        !d["metadata"].IsObject()) {
      answer(400, StatusBody(400, "BadRequest", "the body is not a ResourceSlice"));
      return;
    }
    auto& a = d.GetAllocator();
    rapidjson::Value& meta = d["metadata"];
    std::string n =
        meta.HasMember("name") && meta["name"].IsString() ? meta["name"].GetString() : "";
    if (n.empty() && verb == "create" && meta.HasMember("generateName") &&
        meta["generateName"].IsString() && meta["generateName"].GetStringLength() > 0) {
      // As apiserver's SimpleNameGenerator: the prefix cut to 58 characters
      // and 5 of utilrand's; counted here rather than drawn, so no two clash.
      static constexpr char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
      n = std::string(meta["generateName"].GetString()).substr(0, 58);
      for (uint64_t i = 0, x = generated_names_++; i < 5; ++i, x /= 27) n += kAlphabet[x % 27];
      meta.RemoveMember("name");
      meta.AddMember("name", rapidjson::Value(n.c_str(), a), a);
    }
    logged.name = n;
    const std::string kind_name = "ResourceSlice.resource.k8s.io \"" + n + "\"";
    if (n.empty()) {
      answer(422, StatusBody(422, "Invalid",
                             kind_name + " is invalid: metadata.name: Required value: name or "
                                         "generateName is required"));
      return;
    }
    if (std::string problem = NameProblem(n); !problem.empty()) {
      answer(422, StatusBody(422, "Invalid",
                             kind_name + " is invalid: metadata.name: Invalid value: \"" + n +
                                 "\": " + problem));
      return;
    }
    auto it = slices_.find(n);
    // Devices' taints: kept (with timeAdded) or dropped, as the gate says;
    // an effect the server does not know is refused as validation does
    // (field.NotSupported), None only from 1.36 on.
    if (d.HasMember("spec") && d["spec"].IsObject() && d["spec"].HasMember("devices") &&
        d["spec"]["devices"].IsArray()) {
      size_t index = 0;
      for (auto& dev : d["spec"]["devices"].GetArray()) {
        const size_t i = index++;
        if (!dev.IsObject()) continue;
        rapidjson::Value* fields = &dev;
        if (dev.HasMember("basic") && dev["basic"].IsObject()) fields = &dev["basic"];
        if (!serve_consumable_) DropConsumableCapacity(fields);
        if (!fields->HasMember("taints")) continue;
        if (!serve_taints_) {
          fields->RemoveMember("taints");
          continue;
        }
        if (!(*fields)["taints"].IsArray()) continue;
        size_t j = 0;
        for (auto& t : (*fields)["taints"].GetArray()) {
          const std::string effect = t.IsObject() && t.HasMember("effect") && t["effect"].IsString()
                                         ? t["effect"].GetString()
                                         : "";
          const bool known = effect == "NoSchedule" || effect == "NoExecute" ||
                             (effect == "None" && serve_none_effect_);
          if (!known) {
            const std::string where = "spec.devices[" + std::to_string(i) + "]." +
                                      (fields == &dev ? "" : "basic.") + "taints[" +
                                      std::to_string(j) + "].effect";
            answer(422,
                   StatusBody(422, "Invalid",
                              kind_name + " is invalid: " + where + ": Unsupported value: \"" +
                                  effect + "\": supported values: " +
                                  (serve_none_effect_ ? "\"NoExecute\", \"NoSchedule\", \"None\""
                                                      : "\"NoExecute\", \"NoSchedule\"")));
            return;
          }
          ++j;
          if (t.IsObject() && !t.HasMember("timeAdded")) {
            t.AddMember("timeAdded", "2026-01-01T00:00:00Z", a);
          }
        }
      }
    }
    if (dry_run) {
      answer(verb == "create" ? 201 : 200, ToJson(d));
      return;
    }
    if (verb == "create") {
      if (it != slices_.end()) {
        answer(409, StatusBody(409, "AlreadyExists",
                               "resourceslices.resource.k8s.io \"" + n + "\" already exists"));
        return;
      }
      d["metadata"].AddMember("uid", rapidjson::Value(("uid-" + n).c_str(), a), a);
    } else {
      if (it == slices_.end() || n != name) {
        answer(404, StatusBody(404, "NotFound",
                               "resourceslices.resource.k8s.io \"" + name + "\" not found"));
        return;
      }
      rapidjson::Document old;
      old.Parse(it->second.c_str());
      const std::string want =
          d["metadata"].HasMember("resourceVersion") && d["metadata"]["resourceVersion"].IsString()
              ? d["metadata"]["resourceVersion"].GetString()
              : "";
      if (want != old["metadata"]["resourceVersion"].GetString()) {
        answer(409,
               StatusBody(409, "Conflict",
                          "Operation cannot be fulfilled on resourceslices.resource.k8s.io \"" + n +
                              "\": the object has been modified; please apply your "
                              "changes to the latest version and try again"));
        return;
      }
      d["metadata"].RemoveMember("resourceVersion");
    }
    CanonicalQuantities(&d);
    d["metadata"].AddMember("resourceVersion", rapidjson::Value(std::to_string(++rv_).c_str(), a),
                            a);
    const std::string json = ToJson(d);
    slices_[n] = json;
    stored_slice_names_.push_back(n);
    slice_events_.push_back({rv_, verb == "create" ? "ADDED" : "MODIFIED", json});
    lock.unlock();
    cv_.notify_all();
    answer(verb == "create" ? 201 : 200, json);
    return;
  }
  if (verb == "delete") {
    ++slice_writes_;
    auto it = slices_.find(name);
    if (it == slices_.end()) {
      answer(404, StatusBody(404, "NotFound",
                             "resourceslices.resource.k8s.io \"" + name + "\" not found"));
      return;
    }
    // As kube-apiserver: the DELETED event's object carries the deletion's
    // version.
    const std::string json = WithVersion(it->second, ++rv_);
    slices_.erase(it);
    slice_events_.push_back({rv_, "DELETED", json});
    lock.unlock();
    cv_.notify_all();
    answer(200, json);
    return;
  }
  if (verb == "get") {
    auto it = slices_.find(name);
    if (it == slices_.end()) {
      answer(404, StatusBody(404, "NotFound",
                             "resourceslices.resource.k8s.io \"" + name + "\" not found"));
      return;
    }
    answer(200, it->second);
    return;
  }
  // watch
  uint64_t from = std::strtoull(req.get_param_value("resourceVersion").c_str(), nullptr, 10);
  if (from < slice_oldest_) {
    answer(200, ErrorEvent(410, "Expired",
                           "too old resource version: " + std::to_string(from) + " (" +
                               std::to_string(slice_oldest_) + ")"));
    return;
  }
  const long timeout_s = std::strtol(req.get_param_value("timeoutSeconds").c_str(), nullptr, 10);
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline =
      timeout_s > 0 ? Clock::now() + std::chrono::seconds(timeout_s) : Clock::time_point::max();
  const uint64_t epoch = slice_watch_epoch_;
  lock.unlock();
  res.set_chunked_content_provider("application/json", [this, sel, from, epoch, deadline](
                                                           size_t,
                                                           httplib::DataSink& sink) mutable {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_until(lock, std::min(deadline, Clock::now() + std::chrono::milliseconds(200)), [&] {
      if (stopping_ || slice_watch_epoch_ != epoch) return true;
      for (const Event& e : slice_events_) {
        if (e.rv > from) return true;
      }
      return false;
    });
    if (!stopping_ && slice_watch_epoch_ != epoch) {
      // Expired under it: the server says so on the open watch, as one
      // whose window was compacted away does, and ends it.
      const std::string expired =
          ErrorEvent(410, "Expired", "too old resource version: " + std::to_string(from));
      sink.write(expired.data(), expired.size());
      sink.done();
      return true;
    }
    if (stopping_ || Clock::now() >= deadline) {
      sink.done();
      return true;
    }
    std::string out;
    for (const Event& e : slice_events_) {
      if (e.rv <= from) continue;
      from = e.rv;
      if (Selected(e.object, sel)) {
        out += "{\"type\":\"" + e.type + "\",\"object\":" + e.object + "}\n";
      }
    }
    lock.unlock();
    return out.empty() || sink.write(out.data(), out.size());
  });
}

std::string ApiServerStub::HandleResource(const std::string& path, const std::string& auth,
                                          int* status) {
  const std::string group = "/apis/resource.k8s.io";
  const bool discovery = path == group || path == group + "/";
  const std::string call = discovery ? "get resource.k8s.io" : "get resourceclaims";
  if (std::string denied = Authorize(auth, call, status); !denied.empty()) return denied;
  std::unique_lock<std::mutex> lock(mu_);
  requests_.push_back({std::chrono::steady_clock::now(), call, ""});
  auto not_found = [&](const std::string& message) {
    *status = 404;
    return StatusBody(404, "NotFound", message);
  };
  if (discovery) {
    if (resource_versions_.empty()) {
      return not_found("the server could not find the requested resource");
    }
    std::string versions;
    for (const std::string& v : resource_versions_) {
      versions += (versions.empty() ? "" : ",") +
                  std::string("{\"groupVersion\":\"resource.k8s.io/") + v + "\",\"version\":\"" +
                  v + "\"}";
    }
    return "{\"kind\":\"APIGroup\",\"apiVersion\":\"v1\",\"name\":\"resource.k8s.io\","
           "\"versions\":[" +
           versions + "],\"preferredVersion\":{\"groupVersion\":\"resource.k8s.io/" +
           resource_versions_.front() + "\",\"version\":\"" + resource_versions_.front() + "\"}}";
  }
  // /apis/resource.k8s.io/<version>/namespaces/<ns>/resourceclaims/<name>
  std::vector<std::string> parts;
  for (size_t start = group.size() + 1; start <= path.size();) {
    const size_t slash = path.find('/', start);
    parts.push_back(
        path.substr(start, slash == std::string::npos ? std::string::npos : slash - start));
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  if (parts.size() != 5 || parts[1] != "namespaces" || parts[3] != "resourceclaims" ||
      std::find(resource_versions_.begin(), resource_versions_.end(), parts[0]) ==
          resource_versions_.end()) {
    return not_found("the server could not find the requested resource");
  }
  ++claim_gets_;
  if (hang_claims_) {
    ++held_claim_gets_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return stopping_ || !hang_claims_; });
    --held_claim_gets_;
  }
  if (claim_delay_.count() > 0) {
    const auto due = std::chrono::steady_clock::now() + claim_delay_;
    cv_.wait_until(lock, due, [&] { return stopping_; });
  }
  if (!claim_failures_.empty()) {
    const int code = claim_failures_.front();
    claim_failures_.pop_front();
    *status = code;
    if (code == 403) {
      return StatusBody(403, "Forbidden",
                        "resourceclaims.resource.k8s.io \"" + parts[4] +
                            "\" is forbidden: User \"system:serviceaccount:kube-system:gpu-agent\" "
                            "cannot get resource \"resourceclaims\" in API group "
                            "\"resource.k8s.io\" in the namespace \"" +
                            parts[2] + "\"");
    }
    if (code == 429)
      return StatusBody(429, "TooManyRequests", "Too many requests, please try again later.");
    if (code == 409) return StatusBody(409, "Conflict", "the object has been modified");
    return StatusBody(code, "InternalError",
                      "Internal error occurred: etcdserver: request timed out");
  }
  auto it = claims_.find(parts[2] + "/" + parts[4]);
  if (it == claims_.end()) {
    return not_found("resourceclaims.resource.k8s.io \"" + parts[4] + "\" not found");
  }
  return it->second;
}

std::string ApiServerStub::List(const std::string& name, bool from_cache) const {
  std::string items;
  for (const auto& [n, json] : nodes_) {
    if (!name.empty() && n != name) continue;
    items += (items.empty() ? "" : ",") + json;
  }
  // A list's version is the revision it was read at, not any item's.
  return "{\"kind\":\"NodeList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"" +
         std::to_string(from_cache ? cache_rv_ : rv_) + "\"},\"items\":[" + items + "]}";
}

uint64_t ApiServerStub::OldestWatchable() const {
  // As kube-apiserver's watch cache: with nothing evicted since it started,
  // the version it started at; else the oldest event it still holds.
  return evicted_ && !events_.empty() ? events_.front().rv - 1 : cache_start_;
}

void ApiServerStub::Watch(const httplib::Request& req, httplib::Response& res) {
  const std::string name = [&] {
    std::string sel = req.get_param_value("fieldSelector");
    const std::string prefix = "metadata.name=";
    return sel.rfind(prefix, 0) == 0 ? sel.substr(prefix.size()) : std::string();
  }();
  int status = 200;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++watches_;
    if (Arrive("watch nodes", name, req.remote_port)) {
      CutOff(res);
      return;
    }
  }
  if (std::string denied = Authorize(req.get_header_value("Authorization"), "watch nodes", &status);
      !denied.empty()) {
    res.status = status;
    res.set_content(denied, "application/json");
    return;
  }
  const std::string version = req.get_param_value("resourceVersion");
  const bool bookmarks = req.get_param_value("allowWatchBookmarks") == "true";
  const long timeout_s = std::strtol(req.get_param_value("timeoutSeconds").c_str(), nullptr, 10);
  using Clock = std::chrono::steady_clock;
  const Clock::time_point now = Clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    watch_timeouts_.push_back(timeout_s);
  }
  const Clock::time_point deadline =
      timeout_s > 0 ? now + std::chrono::seconds(timeout_s) : Clock::time_point::max();
  // kube-apiserver sends the bookmark 2 s before the watch's deadline.
  Clock::time_point bookmark_at = Clock::time_point::max();
  if (bookmarks && timeout_s > 0) {
    bookmark_at = timeout_s > 2 ? deadline - std::chrono::seconds(2) : now;
  }
  uint64_t from = 0;
  uint64_t epoch, restart_epoch;
  std::string first;  // sent before any event
  {
    std::lock_guard<std::mutex> lock(mu_);
    epoch = watch_epoch_;
    restart_epoch = restart_epoch_;
    const bool named = !version.empty() && version != "0";
    from = named ? std::strtoull(version.c_str(), nullptr, 10) : rv_;
    const uint64_t oldest = OldestWatchable();
    if (end_every_watch_) {
      res.set_content("", "application/json");
      return;
    }
    if (fail_next_watch_ != 0) {
      const int code = fail_next_watch_;
      fail_next_watch_ = 0;
      res.set_content(ErrorEvent(code, "InternalError",
                                 "Internal error occurred: etcdserver: request timed out"),
                      "application/json");
      return;
    }
    if (named && (gone_next_watch_ || expire_every_watch_ || from < oldest)) {
      gone_next_watch_ = false;
      ++expired_;
      res.set_content(ErrorEvent(410, "Expired",
                                 "too old resource version: " + std::to_string(from) + " (" +
                                     std::to_string(oldest) + ")"),
                      "application/json");
      return;
    }
    if (!named) {
      // No version (or "0"): the current object first, as ADDED.
      auto it = nodes_.find(name);
      if (it != nodes_.end()) first = "{\"type\":\"ADDED\",\"object\":" + it->second + "}\n";
    }
  }
  res.set_chunked_content_provider(
      "application/json",
      [this, name, from, epoch, restart_epoch, first, deadline, bookmark_at](
          size_t, httplib::DataSink& sink) mutable {
        if (!first.empty()) {
          const std::string line = std::move(first);
          first.clear();
          return sink.write(line.data(), line.size());
        }
        std::unique_lock<std::mutex> lock(mu_);
        const Clock::time_point wake =
            std::min({Clock::now() + std::chrono::milliseconds(200), deadline, bookmark_at});
        cv_.wait_until(lock, wake, [&] {
          if (stopping_ || watch_epoch_ != epoch || restart_epoch_ != restart_epoch) return true;
          for (const Event& e : events_) {
            if (e.rv > from) return true;
          }
          return false;
        });
        if (restart_epoch_ != restart_epoch) return false;  // the old process is gone
        if (stopping_ || watch_epoch_ != epoch || Clock::now() >= deadline) {
          sink.done();
          return true;
        }
        // The lines to send are taken under the lock and written without
        // it: the store may change (a Restart clears it) while one is written.
        std::vector<std::string> lines;
        for (const Event& e : events_) {
          if (e.rv <= from) continue;
          from = e.rv;
          if (!name.empty() && e.object.find("\"name\":\"" + name + "\"") == std::string::npos) {
            continue;
          }
          lines.push_back("{\"type\":\"" + e.type + "\",\"object\":" + e.object + "}\n");
        }
        lock.unlock();
        for (const std::string& line : lines) {
          if (!sink.write(line.data(), line.size())) return false;
        }
        lock.lock();
        if (Clock::now() >= bookmark_at) {
          bookmark_at = Clock::time_point::max();
          // Every event up to the cache's version has been sent.
          from = std::max(from, cache_rv_);
          const std::string line =
              "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Node\",\"apiVersion\":\"v1\","
              "\"metadata\":{\"resourceVersion\":\"" +
              std::to_string(from) + "\"}}}\n";
          lock.unlock();
          return sink.write(line.data(), line.size());
        }
        return true;
      },
      [this](bool) {
        std::lock_guard<std::mutex> lock(mu_);
        --open_watches_;
      });
  // Counted until httplib releases the stream (the releaser above).
  std::lock_guard<std::mutex> lock(mu_);
  ++open_watches_;
}

namespace {

// The RBAC-style call a request makes, as calls() names them.
std::string CallOf(const httplib::Request& req) {
  const std::string& p = req.path;
  const bool watch = req.method == "GET" && req.has_param("watch");
  if (p.rfind("/apis/resource.k8s.io", 0) == 0) {
    if (p.find("/resourceslices") != std::string::npos) {
      const bool named = p.find("/resourceslices/") != std::string::npos;
      const std::string verb = req.method == "POST"     ? "create"
                               : req.method == "PUT"    ? "update"
                               : req.method == "DELETE" ? "delete"
                               : watch                  ? "watch"
                               : named                  ? "get"
                                                        : "list";
      return verb + " resourceslices";
    }
    if (p.find("/resourceclaims") != std::string::npos) return "get resourceclaims";
    return "get resource.k8s.io";
  }
  if (req.method == "POST" && p.find("/events") != std::string::npos) return "create events";
  if (watch) return "watch nodes";
  if (req.method == "GET") return p == "/api/v1/nodes" ? "list nodes" : "get nodes";
  return p.size() > 7 && p.rfind("/status") == p.size() - 7 ? "patch nodes/status" : "patch nodes";
}

}  // namespace

void ApiServerStub::AnswerWith(const std::string& call, std::string body, bool forever,
                               std::chrono::milliseconds every) {
  std::lock_guard<std::mutex> lock(mu_);
  hostile_[call] = Hostile{std::move(body), forever, every};
}

void ApiServerStub::AnswerNormally(const std::string& call) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    hostile_.erase(call);
  }
  cv_.notify_all();
}

uint64_t ApiServerStub::hostile_bytes_sent() const { return hostile_bytes_.load(); }

bool ApiServerStub::AnswerHostile(const httplib::Request& req, httplib::Response& res) {
  const std::string call = CallOf(req);
  Hostile h;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = hostile_.find(call);
    if (it == hostile_.end()) return false;
    h = it->second;
    requests_.push_back({std::chrono::steady_clock::now(), call, NodeOf(req)});
  }
  res.status = 200;
  if (!h.forever) {
    hostile_bytes_ += h.body.size();
    res.set_content(h.body, "application/json");
    return true;
  }
  res.set_chunked_content_provider(
      "application/json", [this, h, call](size_t, httplib::DataSink& sink) {
        {
          std::unique_lock<std::mutex> lock(mu_);
          if (h.every.count() > 0) {
            cv_.wait_for(lock, h.every, [&] { return stopping_ || hostile_.count(call) == 0; });
          }
          if (stopping_ || hostile_.count(call) == 0) {
            sink.done();
            return true;
          }
        }
        if (!sink.write(h.body.data(), h.body.size())) return false;
        hostile_bytes_ += h.body.size();
        return true;
      });
  return true;
}

ApiServerStub::~ApiServerStub() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    get_mode_ = GetMode::kNormal;
  }
  cv_.notify_all();
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

std::string ApiServerStub::url() const {
  return std::string(tls_ ? "https://localhost:" : "http://127.0.0.1:") + std::to_string(port_);
}

void ApiServerStub::AddNode(const std::string& name, std::map<std::string, std::string> capacity,
                            bool with_capacity) {
  rapidjson::Document d(rapidjson::kObjectType);
  auto& a = d.GetAllocator();
  d.AddMember("kind", "Node", a);
  d.AddMember("apiVersion", "v1", a);
  rapidjson::Value meta(rapidjson::kObjectType);
  meta.AddMember("name", rapidjson::Value(name.c_str(), a), a);
  meta.AddMember("uid", rapidjson::Value(("uid-node-" + name).c_str(), a), a);
  std::lock_guard<std::mutex> lock(mu_);
  meta.AddMember("resourceVersion", rapidjson::Value(std::to_string(++rv_).c_str(), a), a);
  d.AddMember("metadata", meta, a);
  rapidjson::Value status(rapidjson::kObjectType);
  if (with_capacity) {
    rapidjson::Value cap(rapidjson::kObjectType), alloc(rapidjson::kObjectType);
    for (auto& [k, v] : capacity) {
      cap.AddMember(rapidjson::Value(k.c_str(), a), rapidjson::Value(v.c_str(), a), a);
      alloc.AddMember(rapidjson::Value(k.c_str(), a), rapidjson::Value(v.c_str(), a), a);
    }
    status.AddMember("capacity", cap, a);
    status.AddMember("allocatable", alloc, a);
  }
  d.AddMember("status", status, a);
  nodes_[name] = Serialize(d);
  Publish(name, "ADDED");
}

void ApiServerStub::Publish(const std::string& node, const char* type) {
  events_.push_back({rv_, type, nodes_[node]});
  cache_rv_ = rv_;
  while (events_.size() > cache_size_) {
    events_.pop_front();
    evicted_ = true;
  }
  cv_.notify_all();
}

void ApiServerStub::KubeletSetsCapacity(const std::string& node, const std::string& resource,
                                        std::optional<std::string> value) {
  std::lock_guard<std::mutex> lock(mu_);
  if (nodes_.count(node) == 0) return;  // deleted: no kubelet writes to it
  rapidjson::Document d;
  d.Parse(nodes_.at(node).c_str());
  auto& a = d.GetAllocator();
  for (const char* field : {"capacity", "allocatable"}) {
    rapidjson::Value& status = d["status"];
    if (!status.HasMember(field))
      status.AddMember(rapidjson::StringRef(field), rapidjson::Value(rapidjson::kObjectType), a);
    rapidjson::Value& m = status[field];
    m.RemoveMember(resource.c_str());
    if (value)
      m.AddMember(rapidjson::Value(resource.c_str(), a), rapidjson::Value(value->c_str(), a), a);
  }
  d["metadata"]["resourceVersion"].SetString(std::to_string(++rv_).c_str(), a);
  nodes_[node] = Serialize(d);
  Publish(node);
}

void ApiServerStub::DeleteNode(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return;
  rapidjson::Document d;
  d.Parse(it->second.c_str());
  d["metadata"]["resourceVersion"].SetString(std::to_string(++rv_).c_str(), d.GetAllocator());
  it->second = Serialize(d);
  Publish(name, "DELETED");
  nodes_.erase(name);
}

std::optional<std::string> ApiServerStub::Capacity(const std::string& node, const std::string& r) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return std::nullopt;
  rapidjson::Document d;
  d.Parse(it->second.c_str());
  if (!d["status"].HasMember("capacity") || !d["status"]["capacity"].HasMember(r.c_str()))
    return std::nullopt;
  return std::string(d["status"]["capacity"][r.c_str()].GetString());
}

std::optional<std::string> ApiServerStub::Allocatable(const std::string& node,
                                                      const std::string& r) {
  std::lock_guard<std::mutex> lock(mu_);
  if (nodes_.count(node) == 0) return std::nullopt;
  rapidjson::Document d;
  d.Parse(nodes_.at(node).c_str());
  if (!d["status"].HasMember("allocatable") || !d["status"]["allocatable"].HasMember(r.c_str()))
    return std::nullopt;
  return std::string(d["status"]["allocatable"][r.c_str()].GetString());
}

std::string ApiServerStub::NodeJson(const std::string& node) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_.find(node);
  return it == nodes_.end() ? "" : it->second;
}

void ApiServerStub::AllowToken(const std::string& token, bool may_patch, const std::string& user) {
  std::lock_guard<std::mutex> lock(mu_);
  tokens_[token] = {may_patch, user};
}

void ApiServerStub::RevokeToken(const std::string& token) {
  std::lock_guard<std::mutex> lock(mu_);
  tokens_.erase(token);
}

void ApiServerStub::OnUnauthorized(std::function<void()> hook) {
  std::lock_guard<std::mutex> lock(mu_);
  on_unauthorized_ = std::move(hook);
}

void ApiServerStub::FailNextPatches(int code, int times) {
  std::lock_guard<std::mutex> lock(mu_);
  for (int i = 0; i < times; ++i) patch_failures_.push_back(code);
}

void ApiServerStub::DropNextGets(int times) {
  std::lock_guard<std::mutex> lock(mu_);
  drop_gets_ += times;
}

void ApiServerStub::EndWatches(bool gone) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++watch_epoch_;
    gone_next_watch_ = gone;
  }
  cv_.notify_all();
}

void ApiServerStub::EndEveryWatchAtOnce(bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  end_every_watch_ = on;
}

void ApiServerStub::ClearQueuedFailures() {
  std::lock_guard<std::mutex> lock(mu_);
  patch_failures_.clear();
  drop_gets_ = 0;
  fail_next_watch_ = 0;
  slice_failures_.clear();
}

void ApiServerStub::FailNextWatch(int code) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_next_watch_ = code;
}

void ApiServerStub::HangPatches(bool on) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    hang_patches_ = on;
  }
  cv_.notify_all();
}

int ApiServerStub::held_patches() {
  std::lock_guard<std::mutex> lock(mu_);
  return held_patches_;
}

void ApiServerStub::HangLists(bool on) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    hang_lists_ = on;
  }
  cv_.notify_all();
}

void ApiServerStub::ExpireEveryWatch(bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  expire_every_watch_ = on;
}

void ApiServerStub::Restart() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++restart_epoch_;
    const auto now = std::chrono::steady_clock::now();
    doomed_ports_.clear();
    for (const auto& [port, last] : ports_seen_) {
      if (now - last < std::chrono::seconds(5)) doomed_ports_.insert(port);
    }
    ports_seen_.clear();
    events_.clear();
    evicted_ = false;
    cache_start_ = cache_rv_ = rv_;
  }
  cv_.notify_all();
}

void ApiServerStub::TakeBackup() {
  std::lock_guard<std::mutex> lock(mu_);
  backup_ = nodes_;
}

void ApiServerStub::RestoreBackup(uint64_t bump) {
  Restart();
  {
    std::lock_guard<std::mutex> lock(mu_);
    nodes_ = backup_;
    rv_ += bump;
    // The watch cache starts at the restored store's revision; everything
    // before it is compacted.
    cache_start_ = cache_rv_ = rv_;
  }
  cv_.notify_all();
}

void ApiServerStub::TouchOtherObjects(int writes) {
  std::lock_guard<std::mutex> lock(mu_);
  rv_ += static_cast<uint64_t>(writes);
}

void ApiServerStub::SetWatchCacheSize(size_t events) {
  std::lock_guard<std::mutex> lock(mu_);
  cache_size_ = events;
  while (events_.size() > cache_size_) {
    events_.pop_front();
    evicted_ = true;
  }
}

void ApiServerStub::Forbid(const std::string& call) {
  std::lock_guard<std::mutex> lock(mu_);
  forbidden_.insert(call);
}

void ApiServerStub::SetGetMode(GetMode mode) {
  std::lock_guard<std::mutex> lock(mu_);
  get_mode_ = mode;
}

std::set<std::string> ApiServerStub::calls() const {
  std::lock_guard<std::mutex> l(mu_);
  return calls_;
}

int ApiServerStub::patch_count() const {
  std::lock_guard<std::mutex> l(mu_);
  return patches_;
}
int ApiServerStub::get_count() const {
  std::lock_guard<std::mutex> l(mu_);
  return gets_;
}
int ApiServerStub::open_watches() const {
  std::lock_guard<std::mutex> lock(mu_);
  return open_watches_;
}

int ApiServerStub::watch_count() const {
  std::lock_guard<std::mutex> l(mu_);
  return watches_;
}
int ApiServerStub::list_count() const {
  std::lock_guard<std::mutex> l(mu_);
  return lists_;
}
int ApiServerStub::expired_count() const {
  std::lock_guard<std::mutex> l(mu_);
  return expired_;
}
int ApiServerStub::cut_count() const {
  std::lock_guard<std::mutex> l(mu_);
  return cut_;
}
std::vector<long> ApiServerStub::watch_timeouts() const {
  std::lock_guard<std::mutex> l(mu_);
  return watch_timeouts_;
}
uint64_t ApiServerStub::revision() const {
  std::lock_guard<std::mutex> l(mu_);
  return rv_;
}
std::vector<ApiServerStub::Request> ApiServerStub::requests() const {
  std::lock_guard<std::mutex> l(mu_);
  return requests_;
}
int ApiServerStub::RequestsSince(std::chrono::steady_clock::time_point t) const {
  std::lock_guard<std::mutex> l(mu_);
  return static_cast<int>(std::count_if(requests_.begin(), requests_.end(),
                                        [&](const Request& r) { return r.at >= t; }));
}
std::vector<std::string> ApiServerStub::patch_bodies() const {
  std::lock_guard<std::mutex> l(mu_);
  return patch_bodies_;
}
std::vector<std::string> ApiServerStub::patch_content_types() const {
  std::lock_guard<std::mutex> l(mu_);
  return patch_types_;
}

std::string ApiServerStub::Handle(const std::string& method, const std::string& path,
                                  const std::string& auth, const std::string& content_type,
                                  const std::string& body, int* status) {
  std::unique_lock<std::mutex> lock(mu_);
  std::string user;
  bool may_patch;
  if (std::string denied = Authenticate(lock, auth, &user, &may_patch, status); !denied.empty()) {
    return denied;
  }
  const std::string prefix = "/api/v1/nodes/";
  if (path.rfind(prefix, 0) != 0) {
    *status = 404;
    return StatusBody(404, "NotFound", "the server could not find the requested resource");
  }
  std::string rest = path.substr(prefix.size());
  const bool status_sub = rest.size() > 7 && rest.compare(rest.size() - 7, 7, "/status") == 0;
  calls_.insert(std::string(method == "GET" ? "get" : "patch") + " nodes" +
                (status_sub ? "/status" : ""));
  const std::string name = status_sub ? rest.substr(0, rest.size() - 7) : rest;
  if (method == "GET") {
    ++gets_;
    switch (get_mode_) {
      case GetMode::kGarbage:
        return "<html>502 Bad Gateway</html>";
      case GetMode::kHuge:
        return std::string(20u << 20, ' ');
      case GetMode::kHang:
        cv_.wait(lock, [&] { return stopping_ || get_mode_ != GetMode::kHang; });
        break;
      default:
        break;
    }
    auto it = nodes_.find(name);
    if (it == nodes_.end()) {
      *status = 404;
      return StatusBody(404, "NotFound", "nodes \"" + name + "\" not found");
    }
    return it->second;
  }
  // PATCH
  ++patches_;
  patch_bodies_.push_back(body);
  patch_types_.push_back(content_type);
  if (!patch_failures_.empty()) {
    const int code = patch_failures_.front();
    patch_failures_.pop_front();
    *status = code;
    if (code == 409)
      return StatusBody(409, "Conflict",
                        "Operation cannot be fulfilled on nodes \"" + name +
                            "\": the object has been modified; please apply your changes to the "
                            "latest version and try again");
    if (code == 429)
      return StatusBody(429, "TooManyRequests", "Too many requests, please try again later.");
    if (code == 422) return Generic422();
    return StatusBody(code, "InternalError",
                      "Internal error occurred: etcdserver: request timed out");
  }
  if (!may_patch) {
    *status = 403;
    return StatusBody(403, "Forbidden",
                      "nodes \"" + name + "\" is forbidden: User \"" + user +
                          "\" cannot patch resource \"" + (status_sub ? "nodes/status" : "nodes") +
                          "\" in API group \"\" at the cluster scope");
  }
  if (const std::string prefix = "system:node:";
      user.rfind(prefix, 0) == 0 && user.substr(prefix.size()) != name) {
    *status = 403;  // NodeRestriction: a node's credentials modify only their own Node
    return StatusBody(403, "Forbidden",
                      "nodes \"" + name + "\" is forbidden: node \"" + user.substr(prefix.size()) +
                          "\" is not allowed to modify node \"" + name + "\"");
  }
  const bool strategic = content_type.rfind("application/strategic-merge-patch+json", 0) == 0;
  if (strategic && nodes_.find(name) != nodes_.end()) {
    return ApplyPatch(name, body, status_sub, user, status, /*strategic=*/true);
  }
  if (content_type.rfind("application/json-patch+json", 0) != 0 && !strategic) {
    *status = 415;
    return StatusBody(
        415, "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml");
  }
  if (nodes_.find(name) == nodes_.end()) {
    *status = 404;
    return StatusBody(404, "NotFound", "nodes \"" + name + "\" not found");
  }
  return ApplyPatch(name, body, status_sub, user, status);
}

std::string ApiServerStub::ApplyPatch(const std::string& name, const std::string& body,
                                      bool status_sub, const std::string& user, int* status,
                                      bool strategic) {
  rapidjson::Document patch;
  patch.Parse(body.c_str());
  if (patch.HasParseError()) {
    *status = 400;
    return StatusBody(400, "BadRequest", "error decoding patch: invalid character in JSON");
  }
  if (strategic && !patch.IsObject()) {
    *status = 400;
    return StatusBody(400, "BadRequest",
                      "json: cannot unmarshal array into Go value of type map[string]interface {}");
  }
  if (!strategic && !patch.IsArray()) {
    *status = 400;
    return StatusBody(400, "BadRequest",
                      "json: cannot unmarshal object into Go value of type jsonpatch.Patch");
  }
  rapidjson::Document doc, old;
  doc.Parse(nodes_[name].c_str());
  old.Parse(nodes_[name].c_str());
  if (strategic) {
    MergeStrategic(doc, doc, patch);
  } else {
    for (const auto& op : patch.GetArray()) {
      if (!ApplyOp(doc, op)) {
        *status = 422;
        return Generic422();
      }
    }
  }
  // What the registry keeps of the patched object: the Node's endpoint
  // drops status changes; the status subresource resets spec and (v1 Node's
  // legacy rule) keeps metadata changes.
  auto& a = doc.GetAllocator();
  const char* kept = status_sub ? "spec" : "status";
  if (doc.HasMember(kept)) doc.RemoveMember(kept);
  if (old.HasMember(kept))
    doc.AddMember(rapidjson::StringRef(kept), rapidjson::Value(old[kept], a), a);
  for (const char* field : {"capacity", "allocatable"}) {
    if (!doc.HasMember("status") || !doc["status"].IsObject() || !doc["status"].HasMember(field))
      continue;
    for (auto& m : doc["status"][field].GetObject()) {
      if (m.value.IsString() && m.value.GetString()[0] == '-') {
        *status = 422;
        return StatusBody(422, "Invalid",
                          std::string("Node \"") + name + "\" is invalid: status." + field + "." +
                              m.name.GetString() + ": Invalid value: \"" + m.value.GetString() +
                              "\": must be greater than or equal to 0");
      }
    }
  }
  auto labels_of = [](const rapidjson::Document& d) {
    std::map<std::string, std::string> out;
    if (!d.HasMember("metadata") || !d["metadata"].HasMember("labels") ||
        !d["metadata"]["labels"].IsObject())
      return out;
    for (auto& m : d["metadata"]["labels"].GetObject()) {
      out[m.name.GetString()] = m.value.IsString() ? m.value.GetString() : "<not a string>";
    }
    return out;
  };
  const std::map<std::string, std::string> now = labels_of(doc), before = labels_of(old);
  for (const auto& [k, v] : now) {
    if (!ValidLabelValue(v)) {
      *status = 422;
      return StatusBody(
          422, "Invalid",
          "Node \"" + name + "\" is invalid: metadata.labels: Invalid value: \"" + v + "\": " +
              (v.size() > 63 ? "must be no more than 63 characters"
                             : "a valid label must be an empty string or consist of alphanumeric "
                               "characters, '-', '_' or '.', and must start and end with an "
                               "alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
                               "'12345', regex used for validation is "
                               "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"));
    }
  }
  // Admission (NodeRestriction), on the labels the request changes.
  std::set<std::string> modified;
  for (const auto& [k, v] : now) {
    auto it = before.find(k);
    if (it == before.end() || it->second != v) modified.insert(k);
  }
  for (const auto& [k, v] : before) {
    if (now.count(k) == 0) modified.insert(k);
  }
  std::string refused;
  for (const std::string& k : modified) {
    bool no = false;
    for (const std::string& p : forbidden_label_prefixes_) no |= k.rfind(p, 0) == 0;
    if (user.rfind("system:node:", 0) == 0) no |= NodeRestrictionForbids(k);
    if (no) refused += (refused.empty() ? "" : ", ") + k;
  }
  if (!refused.empty()) {
    *status = 403;
    return StatusBody(
        403, "Forbidden",
        "nodes \"" + name + "\" is forbidden: is not allowed to modify labels: " + refused);
  }
  doc["metadata"]["resourceVersion"].SetString(std::to_string(++rv_).c_str(), a);
  nodes_[name] = Serialize(doc);
  Publish(name);
  return nodes_[name];
}

std::string ApiServerStub::CreateEvent(const std::string& path, const std::string& auth,
                                       const std::string& body, int* status) {
  std::unique_lock<std::mutex> lock(mu_);
  std::string user;
  bool may_patch;
  if (std::string denied = Authenticate(lock, auth, &user, &may_patch, status); !denied.empty()) {
    return denied;
  }
  // /api/v1/namespaces/<ns>/events
  const std::string prefix = "/api/v1/namespaces/";
  const size_t slash = path.find('/', prefix.size());
  if (path.rfind(prefix, 0) != 0 || slash == std::string::npos || path.substr(slash) != "/events") {
    *status = 404;
    return StatusBody(404, "NotFound", "the server could not find the requested resource");
  }
  const std::string ns = path.substr(prefix.size(), slash - prefix.size());
  calls_.insert("create events");
  requests_.push_back({std::chrono::steady_clock::now(), "create events", ""});
  if (forbidden_.count("create events") > 0) {
    *status = 403;
    return StatusBody(403, "Forbidden",
                      "events is forbidden: User \"" + user +
                          "\" cannot create resource \"events\" in API group \"\" in the "
                          "namespace \"" +
                          ns + "\"");
  }
  rapidjson::Document ev;
  ev.Parse(body.c_str());
  if (ev.HasParseError() || !ev.IsObject()) {
    *status = 400;
    return StatusBody(400, "BadRequest", "error decoding event: invalid character in JSON");
  }
  for (const char* field : {"involvedObject", "reason", "message"}) {
    if (!ev.HasMember(field)) {
      *status = 422;
      return StatusBody(422, "Invalid",
                        std::string("Event is invalid: ") + field + ": Required value");
    }
  }
  auto& a = ev.GetAllocator();
  if (ev.HasMember("metadata") && ev["metadata"].IsObject()) {
    ev["metadata"].RemoveMember("resourceVersion");
    ev["metadata"].AddMember("resourceVersion", rapidjson::Value(std::to_string(++rv_).c_str(), a),
                             a);
  }
  events_created_.push_back(Serialize(ev));
  *status = 201;
  return events_created_.back();
}

std::vector<std::string> ApiServerStub::events() const {
  std::lock_guard<std::mutex> l(mu_);
  return events_created_;
}

std::string ApiServerStub::Condition(const std::string& node, const std::string& type) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return "";
  rapidjson::Document doc;
  doc.Parse(it->second.c_str());
  if (!doc.HasMember("status") || !doc["status"].HasMember("conditions") ||
      !doc["status"]["conditions"].IsArray()) {
    return "";
  }
  for (const auto& c : doc["status"]["conditions"].GetArray()) {
    if (c.IsObject() && c.HasMember("type") && c["type"].IsString() &&
        c["type"].GetString() == type) {
      rapidjson::StringBuffer buf;
      rapidjson::Writer<rapidjson::StringBuffer> w(buf);
      c.Accept(w);
      return buf.GetString();
    }
  }
  return "";
}

void ApiServerStub::SetCondition(const std::string& node, const std::string& type,
                                 const std::string& status) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return;
  rapidjson::Document doc;
  doc.Parse(it->second.c_str());
  auto& a = doc.GetAllocator();
  if (!doc.HasMember("status"))
    doc.AddMember("status", rapidjson::Value(rapidjson::kObjectType), a);
  rapidjson::Document patch;
  patch.Parse(("{\"conditions\":[{\"type\":\"" + type + "\",\"status\":\"" + status +
               "\",\"reason\":\"Set\"}]}")
                  .c_str());
  if (!doc["status"].HasMember("conditions")) {
    doc["status"].AddMember("conditions", rapidjson::Value(rapidjson::kArrayType), a);
  }
  MergeStrategic(doc, doc["status"], patch);
  doc["metadata"]["resourceVersion"].SetString(std::to_string(++rv_).c_str(), a);
  it->second = Serialize(doc);
  Publish(node);
}

std::map<std::string, std::string> ApiServerStub::Labels(const std::string& node) {
  return Members(node, "labels");
}

std::map<std::string, std::string> ApiServerStub::Annotations(const std::string& node) {
  return Members(node, "annotations");
}

std::map<std::string, std::string> ApiServerStub::Members(const std::string& node,
                                                          const char* field) {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, std::string> out;
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return out;
  rapidjson::Document d;
  d.Parse(it->second.c_str());
  if (!d["metadata"].HasMember(field)) return out;
  for (auto& m : d["metadata"][field].GetObject()) {
    out[m.name.GetString()] = m.value.GetString();
  }
  return out;
}

void ApiServerStub::SetLabel(const std::string& node, const std::string& key,
                             std::optional<std::string> value) {
  std::lock_guard<std::mutex> lock(mu_);
  if (nodes_.count(node) == 0) return;
  rapidjson::Document d;
  d.Parse(nodes_.at(node).c_str());
  auto& a = d.GetAllocator();
  rapidjson::Value& meta = d["metadata"];
  if (!meta.HasMember("labels"))
    meta.AddMember("labels", rapidjson::Value(rapidjson::kObjectType), a);
  meta["labels"].RemoveMember(key.c_str());
  if (value) {
    meta["labels"].AddMember(rapidjson::Value(key.c_str(), a), rapidjson::Value(value->c_str(), a),
                             a);
  }
  meta["resourceVersion"].SetString(std::to_string(++rv_).c_str(), a);
  nodes_[node] = Serialize(d);
  Publish(node);
}

void ApiServerStub::ForbidLabelPrefixes(std::set<std::string> prefixes) {
  std::lock_guard<std::mutex> lock(mu_);
  forbidden_label_prefixes_ = std::move(prefixes);
}

TestPki MakeTestPki(const std::string& dir) {
  TestPki p{dir + "/ca.pem",  dir + "/other-ca.pem", dir + "/srv.pem",
            dir + "/srv.key", dir + "/client.pem",   dir + "/client.key"};
  const std::string q = " >/dev/null 2>&1";
  auto run = [&](const std::string& cmd) {
    if (std::system(("cd " + dir + " && " + cmd + q).c_str()) != 0) {
      throw std::runtime_error("openssl failed: " + cmd);
    }
  };
  const std::string ca_ext =
      "-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign";
  run("openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj "
      "'/CN=test CA' " +
      ca_ext);
  run("openssl req -x509 -newkey rsa:2048 -nodes -keyout other-ca.key -out other-ca.pem -days 2 "
      "-subj '/CN=other CA' " +
      ca_ext);
  run("openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr -subj /CN=localhost");
  run("printf 'subjectAltName=DNS:localhost\\nextendedKeyUsage=serverAuth\\n' > srv.ext");
  run("openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem -days 2 "
      "-extfile srv.ext");
  run("openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr -subj /CN=gpu-agent");
  run("printf 'extendedKeyUsage=clientAuth\\n' > client.ext");
  run("openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem "
      "-days 2 -extfile client.ext");
  return p;
}

}  // namespace gpu_agent::testing
