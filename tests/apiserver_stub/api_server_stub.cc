#include "api_server_stub.h"

#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
#error "cpp-httplib needs CPPHTTPLIB_OPENSSL_SUPPORT"
#endif
#include <httplib.h>
#include <rapidjson/document.h>
#include <rapidjson/pointer.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cstdlib>
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

}  // namespace

ApiServerStub::ApiServerStub(std::string cert, std::string key, std::string client_ca) {
  if (!cert.empty()) {
    server_ = std::make_unique<httplib::SSLServer>(cert.c_str(), key.c_str(),
                                                   client_ca.empty() ? nullptr : client_ca.c_str());
    tls_ = true;
  } else {
    server_ = std::make_unique<httplib::Server>();
  }
  auto handler = [this](const httplib::Request& req, httplib::Response& res) {
    if (req.method == "GET" && req.has_param("watch")) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++watches_;
        calls_.insert("watch nodes");
      }
      const std::string name = [&] {
        std::string sel = req.get_param_value("fieldSelector");
        const std::string prefix = "metadata.name=";
        return sel.rfind(prefix, 0) == 0 ? sel.substr(prefix.size()) : std::string();
      }();
      uint64_t from = 0;
      if (req.has_param("resourceVersion")) {
        from = std::strtoull(req.get_param_value("resourceVersion").c_str(), nullptr, 10);
      }
      uint64_t epoch;
      std::string first;  // sent before any event
      {
        std::lock_guard<std::mutex> lock(mu_);
        epoch = watch_epoch_;
        if (gone_next_watch_ && req.has_param("resourceVersion")) {
          // History compacted: a real server answers 410 Gone in an ERROR event.
          gone_next_watch_ = false;
          res.set_content(
              "{\"type\":\"ERROR\",\"object\":" +
                  StatusBody(410, "Expired", "too old resource version: " + std::to_string(from)) +
                  "}\n",
              "application/json");
          return;
        }
        if (!req.has_param("resourceVersion")) {
          // No version: start now, with an ADDED event for the current object.
          from = rv_;
          auto it = nodes_.find(name);
          if (it != nodes_.end()) first = "{\"type\":\"ADDED\",\"object\":" + it->second + "}\n";
        }
      }
      res.set_chunked_content_provider("application/json", [this, name, from, epoch, first](
                                                               size_t,
                                                               httplib::DataSink& sink) mutable {
        if (!first.empty()) {
          const std::string line = std::move(first);
          first.clear();
          return sink.write(line.data(), line.size());
        }
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait_for(lock, std::chrono::milliseconds(200), [&] {
          if (stopping_ || watch_epoch_ != epoch) return true;
          for (const Event& e : events_) {
            if (e.rv > from) return true;
          }
          return false;
        });
        if (stopping_ || watch_epoch_ != epoch) {
          sink.done();
          return true;
        }
        for (const Event& e : events_) {
          if (e.rv <= from) continue;
          if (!name.empty() && e.object.find("\"name\":\"" + name + "\"") == std::string::npos) {
            from = e.rv;
            continue;
          }
          const std::string line = "{\"type\":\"" + e.type + "\",\"object\":" + e.object + "}\n";
          from = e.rv;
          lock.unlock();
          if (!sink.write(line.data(), line.size())) return false;
          lock.lock();
        }
        return true;
      });
      return;
    }
    if (req.method == "GET") {
      std::lock_guard<std::mutex> lock(mu_);
      if (drop_gets_ > 0) {
        --drop_gets_;
        ++gets_;
        // Promise a body, then fail: the client sees the connection drop.
        res.set_content_provider(4096, "application/json",
                                 [](size_t, size_t, httplib::DataSink&) { return false; });
        return;
      }
    }
    int status = 200;
    std::string auth = req.get_header_value("Authorization");
    std::string body =
        Handle(req.method, req.path, auth, req.get_header_value("Content-Type"), req.body, &status);
    res.status = status;
    res.set_content(body, "application/json");
  };
  server_->Get(".*", handler);
  server_->Patch(".*", handler);
  server_->set_read_timeout(5, 0);
  server_->set_tcp_nodelay(true);  // as the API server does
  port_ = server_->bind_to_any_port("127.0.0.1");
  if (port_ <= 0) throw std::runtime_error("stub cannot bind");
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  while (!server_->is_running()) std::this_thread::yield();
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
}

void ApiServerStub::Publish(const std::string& node) {
  events_.push_back({rv_, "MODIFIED", nodes_[node]});
  if (events_.size() > 100) events_.pop_front();
  cv_.notify_all();
}

void ApiServerStub::KubeletSetsCapacity(const std::string& node, const std::string& resource,
                                        std::optional<std::string> value) {
  std::lock_guard<std::mutex> lock(mu_);
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

std::optional<std::string> ApiServerStub::Capacity(const std::string& node, const std::string& r) {
  std::lock_guard<std::mutex> lock(mu_);
  rapidjson::Document d;
  d.Parse(nodes_.at(node).c_str());
  if (!d["status"].HasMember("capacity") || !d["status"]["capacity"].HasMember(r.c_str()))
    return std::nullopt;
  return std::string(d["status"]["capacity"][r.c_str()].GetString());
}

std::optional<std::string> ApiServerStub::Allocatable(const std::string& node,
                                                      const std::string& r) {
  std::lock_guard<std::mutex> lock(mu_);
  rapidjson::Document d;
  d.Parse(nodes_.at(node).c_str());
  if (!d["status"].HasMember("allocatable") || !d["status"]["allocatable"].HasMember(r.c_str()))
    return std::nullopt;
  return std::string(d["status"]["allocatable"][r.c_str()].GetString());
}

std::string ApiServerStub::NodeJson(const std::string& node) {
  std::lock_guard<std::mutex> lock(mu_);
  return nodes_.at(node);
}

void ApiServerStub::AllowToken(const std::string& token, bool may_patch, const std::string& user) {
  std::lock_guard<std::mutex> lock(mu_);
  tokens_[token] = {may_patch, user};
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
int ApiServerStub::watch_count() const {
  std::lock_guard<std::mutex> l(mu_);
  return watches_;
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
  std::string user = "system:anonymous";
  bool may_patch = true;
  if (!tokens_.empty()) {
    const std::string prefix = "Bearer ";
    auto it = auth.rfind(prefix, 0) == 0 ? tokens_.find(auth.substr(prefix.size())) : tokens_.end();
    if (it == tokens_.end()) {
      auto hook = on_unauthorized_;
      lock.unlock();
      if (hook) hook();
      *status = 401;
      return StatusBody(401, "Unauthorized", "Unauthorized");
    }
    may_patch = it->second.first;
    user = it->second.second;
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
    return StatusBody(
        403, "Forbidden",
        "nodes \"" + name + "\" is forbidden: User \"" + user +
            "\" cannot patch resource \"nodes/status\" in API group \"\" at the cluster scope");
  }
  if (content_type.rfind("application/json-patch+json", 0) != 0) {
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
  return ApplyPatch(name, body, status);
}

std::string ApiServerStub::ApplyPatch(const std::string& name, const std::string& body,
                                      int* status) {
  rapidjson::Document patch;
  patch.Parse(body.c_str());
  if (patch.HasParseError()) {
    *status = 400;
    return StatusBody(400, "BadRequest", "error decoding patch: invalid character in JSON");
  }
  if (!patch.IsArray()) {
    *status = 400;
    return StatusBody(400, "BadRequest",
                      "json: cannot unmarshal object into Go value of type jsonpatch.Patch");
  }
  rapidjson::Document doc;
  doc.Parse(nodes_[name].c_str());
  for (const auto& op : patch.GetArray()) {
    if (!ApplyOp(doc, op)) {
      *status = 422;
      return Generic422();
    }
  }
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
  doc["metadata"]["resourceVersion"].SetString(std::to_string(++rv_).c_str(), doc.GetAllocator());
  nodes_[name] = Serialize(doc);
  Publish(name);
  return nodes_[name];
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
