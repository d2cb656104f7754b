#include "agent/run/endpoint_worker.h"

#include <exception>
#include <system_error>
#include <utility>

#include "base/log.h"
#include "base/thread_name.h"

namespace gpu_agent {

EndpointWorker::EndpointWorker(std::string thread_name, std::chrono::milliseconds min_interval,
                               Handler handler, Done done)
    : thread_name_(std::move(thread_name)),
      min_interval_(min_interval),
      handler_(std::move(handler)),
      done_(std::move(done)) {}

EndpointWorker::~EndpointWorker() { Stop(); }

bool EndpointWorker::Ask(uint64_t waiter) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopped_) return false;
  waiting_.push_back(waiter);
  if (running_) return true;
  // The previous thread cleared running_ as its last step under mu_: it has
  // ended or is ending, so this join returns at once.
  if (thread_.joinable()) thread_.join();
  try {
    thread_ = std::thread([this] { Run(); });
  } catch (const std::system_error& e) {
    waiting_.pop_back();  // the only one: no thread ran to take the others
    LogError("cannot start a thread for the metrics endpoint",
             {{"thread", thread_name_}, {"error", e.what()}});
    return false;
  }
  running_ = true;
  return true;
}

void EndpointWorker::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
    waiting_.clear();
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void EndpointWorker::Run() {
  NameThisThread(thread_name_);
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (stopped_ || waiting_.empty()) {
      running_ = false;
      return;
    }
    const auto due = last_start_ + min_interval_;
    if (std::chrono::steady_clock::now() < due) {
      // Requests that come meanwhile join this evaluation.
      stop_cv_.wait_until(lock, due, [this] { return stopped_; });
      continue;
    }
    std::vector<uint64_t> batch;
    batch.swap(waiting_);
    last_start_ = std::chrono::steady_clock::now();
    lock.unlock();
    EndpointAnswer answer;
    try {
      answer = handler_();
    } catch (const std::exception& e) {
      LogError("a metrics endpoint handler failed",
               {{"thread", thread_name_}, {"error", e.what()}});
      answer = {500, "text/plain", std::make_shared<const std::string>("internal error\n")};
    } catch (...) {
      LogError("a metrics endpoint handler failed", {{"thread", thread_name_}});
      answer = {500, "text/plain", std::make_shared<const std::string>("internal error\n")};
    }
    if (!answer.body) answer.body = std::make_shared<const std::string>();
    done_(std::move(batch), std::move(answer));
    lock.lock();
  }
}

}  // namespace gpu_agent
