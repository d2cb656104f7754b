// The metrics endpoint's connections: reading requests, dispatching them to
// their route's worker, and writing answers (head and body in one sendmsg),
// keep-alive or closing without a reset.
#include "agent/run/http_connection.h"

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <utility>

#include "base/strings.h"

namespace gpu_agent {
namespace {

using TimePoint = std::chrono::steady_clock::time_point;

const char* Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 413:
      return "Content Too Large";
    case 414:
      return "URI Too Long";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

// RFC 9110's IMF-fixdate of now.
std::string HttpDate() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[64];
  const size_t n = std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return std::string(buf, n);
}

std::shared_ptr<const std::string> Text(std::string s) {
  return std::make_shared<const std::string>(std::move(s));
}

}  // namespace

void HttpServer::OnReadable(Connection& c, TimePoint now) {
  char buf[16384];
  if (c.state == Connection::State::kClosing) {
    const ssize_t n = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (n > 0) c.dropped += static_cast<size_t>(n);
    if (n <= 0 || c.dropped > limits_.max_linger_bytes) Close(c.id);
    return;
  }
  if (c.state != Connection::State::kReading) return;
  const size_t room = std::min(sizeof buf, c.reader.room());
  if (room == 0) return;
  const ssize_t n = ::recv(c.fd, buf, room, MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  if (n <= 0) {  // the client is gone, or ended without a whole request
    Close(c.id);
    return;
  }
  c.reader.Feed(std::string_view(buf, static_cast<size_t>(n)));
  Advance(c, now);
}

void HttpServer::OnWritable(Connection& c, TimePoint now) {
  if (c.state != Connection::State::kWriting) return;
  Flush(c, now);
  Advance(c, now);
}

void HttpServer::Advance(Connection& c, TimePoint now) {
  while (!c.dead && c.state == Connection::State::kReading) {
    HttpRequest request;
    switch (c.reader.Next(&request)) {
      case HttpRequestReader::Result::kNeedMore:
        return;
      case HttpRequestReader::Result::kRefused:
        CountRefusal(c.reader.refusal_status());
        NotePressure(now);
        c.close_after = true;
        Answer(c, c.reader.refusal_status(), "text/plain", Text(c.reader.refusal_reason() + "\n"),
               c.reader.refusal_status() == 405, now);
        return;
      case HttpRequestReader::Result::kRequest:
        break;
    }
    c.request = std::move(request);
    c.close_after = !c.request.keep_alive;
    const auto route = std::find_if(routes_.begin(), routes_.end(),
                                    [&](const Route& r) { return r.path == c.request.path; });
    if (route == routes_.end()) {
      answered_.fetch_add(1, std::memory_order_relaxed);
      Answer(c, 404, "text/plain", Text("not found\n"), false, now);
      continue;  // written at once, most often: on to a pipelined request
    }
    c.route = static_cast<size_t>(route - routes_.begin());
    c.state = Connection::State::kHandling;
    c.since = now;
    if (!workers_[c.route]->Ask(c.id)) {
      CountRefusal(503);
      c.close_after = true;
      Answer(c, 503, "text/plain", Text("cannot answer now\n"), false, now);
    }
    return;
  }
}

void HttpServer::Answer(Connection& c, int status, const std::string& content_type,
                        std::shared_ptr<const std::string> body, bool allow, TimePoint now) {
  std::string head =
      StrCat("HTTP/1.1 ", status, " ", Reason(status), "\r\nDate: ", HttpDate(),
             "\r\nContent-Type: ", content_type, "\r\nContent-Length: ", body->size(), "\r\n");
  if (allow) head += "Allow: GET, HEAD\r\n";
  if (c.close_after) {
    head += "Connection: close\r\n";
  } else if (c.request.minor_version == 0) {
    head += "Connection: keep-alive\r\n";
  }
  head += "\r\n";
  c.head = std::move(head);
  const bool head_only = !c.reader.refused() && c.request.method == HttpRequest::Method::kHead;
  c.body = head_only ? nullptr : std::move(body);
  c.sent = 0;
  c.state = Connection::State::kWriting;
  c.since = now;
  c.answered_once = true;
  Flush(c, now);
}

void HttpServer::Flush(Connection& c, TimePoint now) {
  while (c.Unsent() > 0) {
    iovec iov[2];
    int parts = 0;
    if (c.sent < c.head.size()) {
      iov[parts++] = {c.head.data() + c.sent, c.head.size() - c.sent};
    }
    if (c.body && !c.body->empty()) {
      const size_t into = c.sent > c.head.size() ? c.sent - c.head.size() : 0;
      iov[parts++] = {const_cast<char*>(c.body->data()) + into, c.body->size() - into};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(parts);
    const ssize_t n = ::sendmsg(c.fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) Close(c.id);
      return;  // kWriting: POLLOUT says when to go on
    }
    c.sent += static_cast<size_t>(n);
  }
  c.head.clear();
  c.head.shrink_to_fit();
  c.body.reset();
  if (c.close_after) {
    StartClosing(c, now);
  } else {
    c.state = Connection::State::kReading;
    c.since = now;
  }
}

void HttpServer::StartClosing(Connection& c, TimePoint now) {
  // Closing with unread bytes would send a reset, which can destroy the
  // answer before the client reads it: end our side and drop what still
  // comes, for a bounded time.
  ::shutdown(c.fd, SHUT_WR);
  c.state = Connection::State::kClosing;
  c.since = now;
  c.dropped = 0;
}

}  // namespace gpu_agent
