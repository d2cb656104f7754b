// The request side of HTTP/1.1 as the metrics endpoint speaks it: fed the
// bytes a client sends, it yields whole request heads one after another (a
// client may pipeline several) or one refusal, with the status to answer.
// It holds at most Limits::max_head bytes, whatever the client sends: bytes
// past that are left with the caller (Feed takes what fits), so a client
// that sends faster than it is answered is held back by TCP, not buffered.
//
// What it refuses, each for good (the caller answers and closes):
//   400  a request line or header line that is not HTTP (bare CR, a space
//        before a header's ':', obs-fold, control characters)
//   405  a method other than GET or HEAD (answer with Allow: GET, HEAD)
//   413  a request that announces a body (Content-Length > 0, or any
//        Transfer-Encoding): the endpoint serves GETs only and reads no body
//   414  a request line longer than Limits::max_request_line
//   431  a head (request line, headers, end line) longer than
//        Limits::max_head
//   505  an HTTP version other than 1.0 and 1.1
// Lines may end in CRLF or in a bare LF (RFC 9112 2.2), the same for every
// line; blank lines before a request line are skipped. Header names are
// matched without regard to case; Connection's "close" and "keep-alive"
// are honoured (HTTP/1.0 closes unless asked to keep alive).
//
// Not thread-safe; one per connection.
#ifndef GPU_AGENT_AGENT_RUN_HTTP_REQUEST_READER_H_
#define GPU_AGENT_AGENT_RUN_HTTP_REQUEST_READER_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace gpu_agent {

struct HttpRequest {
  enum class Method { kGet, kHead };
  Method method = Method::kGet;
  std::string target;      // as sent (origin or absolute form)
  std::string path;        // the target's path, without the query
  int minor_version = 1;   // HTTP/1.<minor_version>
  bool keep_alive = true;  // false: answer, then close
};

class HttpRequestReader {
 public:
  struct Limits {
    size_t max_request_line = 1024;  // without its line end
    size_t max_head = 4096;          // everything up to and with the blank line
  };
  enum class Result {
    kNeedMore,  // no whole head buffered yet (and none refused)
    kRequest,   // *request holds the next request
    kRefused,   // refusal_status() says why; every later call says the same
  };

  HttpRequestReader() : HttpRequestReader(Limits{}) {}
  explicit HttpRequestReader(Limits limits) : limits_(limits) {}

  // How many more bytes Feed takes now (0 once refused).
  size_t room() const;
  // Buffers the first room() bytes of `bytes`; returns how many it took.
  size_t Feed(std::string_view bytes);
  // The next request, taken out of the buffer; the bytes after it stay for
  // the next call.
  Result Next(HttpRequest* request);

  // The status to answer once refused (400, 405, 413, 414, 431 or 505),
  // and a short reason for the answer's body.
  int refusal_status() const { return refusal_status_; }
  const std::string& refusal_reason() const { return refusal_reason_; }
  bool refused() const { return refusal_status_ != 0; }
  // Bytes held: at most Limits::max_head.
  size_t buffered() const { return buf_.size(); }

 private:
  Result Refuse(int status, std::string reason);
  // Looks for the end of the head from where the last call stopped; true
  // with head_end_ set once found. May refuse (414, 431).
  bool FindHeadEnd();
  Result ParseHead(std::string_view head, HttpRequest* request);
  void Consume(size_t n);

  const Limits limits_;
  std::string buf_;  // never longer than limits_.max_head
  // The scan for the head's end, kept between calls so that a head sent a
  // byte at a time is scanned once, not once per byte.
  size_t scan_ = 0;              // next byte to look at
  size_t line_start_ = 0;        // where the line being scanned starts
  bool in_request_line_ = true;  // no non-blank line has ended yet
  size_t head_end_ = 0;          // one past the blank line that ends the head
  int refusal_status_ = 0;
  std::string refusal_reason_;
};

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_RUN_HTTP_REQUEST_READER_H_
