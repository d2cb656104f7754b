#include "agent/run/mode_condition.h"

#include <utility>

#include "agent/config/api_connection.h"
#include "apiserver/node_client.h"
#include "apiserver/node_condition.h"
#include "base/backoff.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/thread_name.h"

namespace gpu_agent {

std::unique_ptr<ModeCondition> ModeCondition::Create(const Config& config) {
  absl::StatusOr<apiserver::Connection> conn = ConnectionFor(config);
  if (config.node_name.empty() || !conn.ok()) {
    LogWarning(
        "the node's GpuAgentMode condition is not written: it needs nodeName and an API "
        "connection",
        {{"error", conn.ok() ? "no node name" : std::string(conn.status().message())}});
    return nullptr;
  }
  absl::StatusOr<std::unique_ptr<apiserver::RestClient>> rest =
      apiserver::RestClient::Create(*conn, RestOptionsFor(config));
  if (!rest.ok()) {
    LogWarning("the node's GpuAgentMode condition is not written",
               {{"error", std::string(rest.status().message())}});
    return nullptr;
  }
  return std::unique_ptr<ModeCondition>(new ModeCondition(*std::move(rest), config.node_name));
}

ModeCondition::ModeCondition(std::unique_ptr<apiserver::RestClient> rest, std::string node)
    : rest_(std::move(rest)), node_(std::move(node)) {}

ModeCondition::~ModeCondition() { Stop(); }

void ModeCondition::Set(const std::string& reason, const std::string& text) {
  Want(reason, text, /*if_shown=*/false);
}

void ModeCondition::SetIfShown(const std::string& reason, const std::string& text) {
  Want(reason, text, /*if_shown=*/true);
}

bool ModeCondition::Shown(std::string* why) {
  absl::StatusOr<apiserver::NodeView> node = apiserver::NodeClient(rest_.get(), node_).Get();
  if (!node.ok()) {
    *why = std::string(node.status().message());
    return false;
  }
  return node->condition_types.count("GpuAgentMode") > 0;
}

void ModeCondition::Want(const std::string& reason, const std::string& text, bool if_shown) {
  // A node's status is read by every describe and list: the holders of
  // many GPUs are cut short.
  constexpr size_t kMaxMessage = 1024;
  const std::string message =
      text.size() <= kMaxMessage ? text : StrCat(text.substr(0, kMaxMessage - 3), "...");
  {
    std::lock_guard<std::mutex> lock(mu_);
    // The same again is no news, unless it would now be written whatever
    // the Node shows where the last was only if shown.
    if (stop_ || (reason == reason_ && message == message_ && (if_shown || !if_shown_))) return;
    if (reason != reason_) transition_ = apiserver::Rfc3339Now();
    // A write still pending that was to be made whatever the Node shows
    // stays so.
    if_shown_ = if_shown && (written_ == wanted_ || if_shown_);
    reason_ = reason;
    message_ = message;
    ++wanted_;
    if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
  }
  cv_.notify_all();
}

void ModeCondition::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  rest_->Cancel();
  if (thread_.joinable()) thread_.join();
}

void ModeCondition::Run() {
  NameThisThread("mode-condition");
  Backoff backoff = Backoff::Doubling(std::chrono::seconds(1), std::chrono::minutes(1));
  int said = -1;  // the last refusal logged
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || written_ < wanted_; });
    if (stop_) return;
    const uint64_t at = wanted_;
    const bool if_shown = if_shown_;
    const std::string body = apiserver::NodeConditionPatch(
        {"GpuAgentMode", "True", reason_, message_, apiserver::Rfc3339Now(), transition_});
    lock.unlock();
    absl::StatusOr<apiserver::HttpResponse> r = absl::UnknownError("");
    std::string unread;  // why the Node could not be read
    if (!if_shown || Shown(&unread)) {
      r = rest_->Patch(StrCat("/api/v1/nodes/", node_, "/status"), body,
                       apiserver::kStrategicMergePatch, /*repeatable=*/true);
    } else if (unread.empty()) {
      r = apiserver::HttpResponse{200, ""};  // not shown: nothing to put right
    } else {
      r = absl::UnavailableError(StrCat("cannot read the Node: ", unread));
    }
    const int code = r.ok() ? r->status : 0;
    lock.lock();
    if (code == 200) {
      written_ = at;
      backoff.Reset();
      said = -1;
      continue;
    }
    if (stop_) return;
    if (code != said) {
      said = code;
      const std::string why =
          r.ok() ? std::string(
                       apiserver::ExplainAnswer(*r, node_, "patch nodes/status", body).message())
                 : std::string(r.status().message());
      LogWarning("cannot write the node's GpuAgentMode condition; trying again", {{"error", why}});
    }
    cv_.wait_for(lock, backoff.Next(), [this] { return stop_; });
  }
}

}  // namespace gpu_agent
