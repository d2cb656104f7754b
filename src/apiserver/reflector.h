// The one list-then-watch loop of every watcher, the way client-go's
// reflector does it: LIST (the list's resourceVersion is the server's
// current revision), WATCH from there, and take every later version from
// the watch's own events and bookmarks, never from an object's own
// resourceVersion (a quiet object keeps it until it falls out of the API
// server's watch window, and every watch from it then answers 410 Gone).
//
// A 410 (as an answer or as an ERROR event) means list again: at once the
// first time, after a backoff if it happens again before a quiet stretch.
// A watch that fails, answers an error or ends within a second backs off
// with jitter (base/backoff, honouring a longer Retry-After); a connection
// that breaks off is opened again after a delay spread over
// reconnect_spread, so a fleet does not reconnect in the same second.
// Watch timeouts are drawn from [watch_timeout, 2*watch_timeout), so a
// fleet started together does not stay in step.
//
// What is watched, and what is done with it, is the owner's: a
// ReflectorHandler. Run() loops on the caller's thread until Cancel();
// Interrupt() ends the watch in progress (or the one about to start) so
// that the owner's Sync runs again at once.
#ifndef GPU_AGENT_APISERVER_REFLECTOR_H_
#define GPU_AGENT_APISERVER_REFLECTOR_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "apiserver/rest_client.h"
#include "base/backoff.h"

namespace gpu_agent::apiserver {

struct ReflectorOptions {
  // Each watch asks the server to end it after a time drawn from
  // [watch_timeout, 2*watch_timeout), whole seconds, at least 1 s.
  std::chrono::milliseconds watch_timeout{std::chrono::minutes(10)};
  // The first retry after a broken connection waits a time drawn from
  // [0, reconnect_spread).
  std::chrono::milliseconds reconnect_spread{0};
  std::chrono::milliseconds backoff_initial{500};
  std::chrono::milliseconds backoff_max{30000};
  // After any failure, LIST again (an owner that writes starts over from
  // what the server holds) rather than watch on from the last version.
  bool relist_after_failure = false;
  // A 410 again soon after a list (a server or proxy that expires every
  // watch) is logged and counted as a failure; otherwise it is only waited
  // out, and the first 410's warning stays the one line about it.
  bool log_repeated_expiry = true;
  // Starts every log line ("node config: ", "ResourceSlices: ").
  std::string log_prefix;
  // The watch in log lines: "<watch_name> broke off; retrying".
  std::string watch_name = "the watch";
  // The warning when a watch is answered with an HTTP error.
  std::string watch_refused = "cannot watch";
  // Fields every warning carries (node, driver...).
  std::vector<std::pair<std::string, std::string>> log_fields;
};

struct ReflectorStats {
  std::atomic<uint64_t> lists{0};
  std::atomic<uint64_t> watches{0};
  // Watches answered 410 Gone: the version was older than the server keeps.
  std::atomic<uint64_t> watch_expired{0};
  // Watches that failed, answered an error, or ended at once.
  std::atomic<uint64_t> watch_failures{0};
};

// One ADDED, MODIFIED or DELETED event (bookmarks and errors are the
// reflector's).
struct ObjectEvent {
  enum class Type { kAdded, kModified, kDeleted };
  Type type = Type::kAdded;
  std::string resource_version;  // empty when the event gave none
  std::string object;            // as compact JSON, within base/json's bounds
};

// A request of the owner's that failed: logged as "<what>; retrying" with
// `why`, then retried after the backoff (or `retry_after_s`, the server's
// Retry-After, when longer).
struct ReflectorFailure {
  std::string what;
  std::string why;
  int retry_after_s = -1;
};

// The owner's side. Called on the Run() thread; none may block for long
// but on its own requests (which Cancel ends).
class ReflectorHandler {
 public:
  // What Sync came to.
  enum class Next { kWatch, kSyncAgain, kList };
  virtual ~ReflectorHandler() = default;
  // LIST: takes the items and sets `version`, where the watch starts (empty:
  // watch without one, which starts with every object); or a failure.
  virtual std::optional<ReflectorFailure> List(std::string* version) = 0;
  // After a LIST and before each watch: the owner's own requests (writes
  // that make the server hold what it wants). kWatch: watch now;
  // kSyncAgain: Sync again at once; kList: LIST again at once. A failure:
  // backed off, then (relist_after_failure) listed again.
  virtual Next Sync(std::optional<ReflectorFailure>* /*failure*/) { return Next::kWatch; }
  virtual std::string WatchPath(const std::string& version, std::chrono::seconds timeout) = 0;
  // The owner may shorten a watch (a retry of its own falls due): at most
  // `drawn`, at least 1 s.
  virtual std::chrono::seconds WatchFor(std::chrono::seconds drawn) { return drawn; }
  // An event; false ends the watch (the owner has something to repair) and
  // Sync runs next, not a failure.
  virtual bool OnEvent(ObjectEvent event) = 0;
  // Nothing changed: a bookmark, or a watch that ran its course.
  virtual void InSync() {}
  // A watch answered `status` (not 200) with `head`, the body's start.
  virtual std::string Refused(int status, const std::string& head);
  // Every failure, as it is logged.
  virtual void OnFailure() {}
};

class Reflector {
 public:
  // `rest` for the LIST and the owner's requests, `watch` for the watch
  // streams (a read timeout past the longest watch); with `stats` (null:
  // none kept), all must outlive the Reflector.
  Reflector(ReflectorOptions options, ReflectorHandler* handler, RestClient* rest,
            RestClient* watch, ReflectorStats* stats);

  // Lists and watches until Cancel().
  void Run();
  // From any thread: Run returns promptly, whatever request is in progress
  // or about to start (RestClient::Cancel on both clients: those of other
  // users of `rest` too, until they Resume it).
  void Cancel();
  // From any thread: the watch in progress, or the next to start, ends, and
  // the owner's Sync runs at once.
  void Interrupt();
  bool Cancelled();
  // Waits `d` unless cancelled first; false when cancelled.
  bool Wait(std::chrono::milliseconds d);

 private:
  // How one watch ended.
  struct WatchEnd;
  // What one Run carries from one try to the next.
  struct RunState;
  WatchEnd WatchOnce(std::string* version);
  // After a watch from `from` that neither the owner nor a Cancel ended:
  // the next step (list again, retry after a wait, or renew the watch).
  void AfterWatch(RunState& run, const WatchEnd& end, const std::string& from);
  // The server no longer holds `from` (410): list again, at once the first
  // time, backed off if it happens again before a quiet stretch.
  void AfterExpiry(RunState& run, const WatchEnd& end, const std::string& from);
  // A failure, unless a Cancel caused it: Fail's wait is the next, and with
  // relist_after_failure the next try lists first.
  void Failed(RunState& run, const ReflectorFailure& f,
              std::optional<std::chrono::milliseconds> given = std::nullopt,
              std::chrono::milliseconds at_least = {});
  using Fields = std::vector<std::pair<std::string, std::string>>;
  // Logs "<log_prefix><message>" as a warning, with the options' fields
  // and `more`.
  void Warn(const std::string& message, const Fields& more);
  // A failure: counted, logged, and the wait before the next try: `given`,
  // else the next of `failures`; at least `at_least` and a Retry-After.
  std::chrono::milliseconds Fail(const ReflectorFailure& f, gpu_agent::Backoff* failures,
                                 std::optional<std::chrono::milliseconds> given = std::nullopt,
                                 std::chrono::milliseconds at_least = {});

  const ReflectorOptions options_;
  ReflectorHandler* const handler_;
  RestClient* const rest_;
  RestClient* const watch_;
  ReflectorStats own_stats_;
  ReflectorStats* const stats_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool cancelled_ = false;    // protected by mu_
  bool interrupted_ = false;  // protected by mu_: since the last Sync
};

}  // namespace gpu_agent::apiserver

#endif  // GPU_AGENT_APISERVER_REFLECTOR_H_
