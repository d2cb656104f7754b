#include "agent/run/http_request_reader.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace gpu_agent {
namespace {

// RFC 9110 5.6.2: the characters of a method or a header name.
bool IsTokenChar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return c != '\0' && std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
}

bool IsToken(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), IsTokenChar);
}

// A header value may hold tabs, visible ASCII and obs-text (bytes of 0x80
// and above), never another control character.
bool IsFieldValue(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return c == '\t' || (c >= 0x20 && c != 0x7f);
  });
}

// The request target: visible ASCII only (no spaces, no control bytes).
bool IsTargetText(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return c > 0x20 && c < 0x7f;
  });
}

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; };
           return lower(x) == lower(y);
         });
}

bool StartsWithIgnoringCase(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && EqualsIgnoringCase(s.substr(0, prefix.size()), prefix);
}

std::string_view TrimBlanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The path of an origin-form ("/p?q") or absolute-form ("http://h/p?q")
// target; false for any other form ("*", "host:port").
bool TargetPath(std::string_view target, std::string* path) {
  std::string_view p;
  if (target.front() == '/') {
    p = target;
  } else {
    size_t scheme = 0;
    if (StartsWithIgnoringCase(target, "http://")) scheme = 7;
    if (StartsWithIgnoringCase(target, "https://")) scheme = 8;
    if (scheme == 0) return false;
    const std::string_view rest = target.substr(scheme);
    const size_t end = rest.find_first_of("/?");
    p = end == std::string_view::npos || rest[end] == '?' ? std::string_view("/")
                                                          : rest.substr(end);
  }
  *path = std::string(p.substr(0, p.find('?')));
  return true;
}

}  // namespace

size_t HttpRequestReader::room() const {
  return refused() ? 0 : limits_.max_head - std::min(buf_.size(), limits_.max_head);
}

size_t HttpRequestReader::Feed(std::string_view bytes) {
  const size_t n = std::min(bytes.size(), room());
  if (buf_.size() + n > buf_.capacity()) {
    // Grown here, not by append's doubling, which could reserve twice the
    // cap: never more than the cap.
    const size_t want = std::min(limits_.max_head, std::max(buf_.size() + n, 2 * buf_.capacity()));
    std::string bigger;
    bigger.reserve(want);
    bigger.append(buf_);
    buf_.swap(bigger);
  }
  buf_.append(bytes.data(), n);
  return n;
}

HttpRequestReader::Result HttpRequestReader::Refuse(int status, std::string reason) {
  refusal_status_ = status;
  refusal_reason_ = std::move(reason);
  // Nothing more is read: the bytes held are of no further use.
  std::string().swap(buf_);
  return Result::kRefused;
}

bool HttpRequestReader::FindHeadEnd() {
  // A request line may end in CR LF: one byte more than its cap, not yet
  // over it.
  const size_t line_cap = limits_.max_request_line + 1;
  while (scan_ < buf_.size()) {
    if (buf_[scan_] == '\n') {
      size_t len = scan_ - line_start_;
      if (len > 0 && buf_[scan_ - 1] == '\r') --len;
      if (len == 0 && !in_request_line_) {
        head_end_ = ++scan_;
        return true;
      }
      if (len > 0 && in_request_line_) {
        if (len > limits_.max_request_line) {
          Refuse(414, "request line too long");
          return false;
        }
        in_request_line_ = false;
      }
      line_start_ = scan_ + 1;
    }
    ++scan_;
    if (in_request_line_ && scan_ - line_start_ > line_cap) {
      Refuse(414, "request line too long");
      return false;
    }
  }
  if (buf_.size() >= limits_.max_head) Refuse(431, "request head too large");
  return false;
}

HttpRequestReader::Result HttpRequestReader::Next(HttpRequest* request) {
  if (refused()) return Result::kRefused;
  if (!FindHeadEnd()) return refused() ? Result::kRefused : Result::kNeedMore;
  const Result r = ParseHead(std::string_view(buf_.data(), head_end_), request);
  if (r == Result::kRequest) Consume(head_end_);
  return r;
}

void HttpRequestReader::Consume(size_t n) {
  buf_.erase(0, n);
  // An idle keep-alive connection holds nothing.
  if (buf_.empty()) std::string().swap(buf_);
  scan_ = 0;
  line_start_ = 0;
  in_request_line_ = true;
  head_end_ = 0;
}

HttpRequestReader::Result HttpRequestReader::ParseHead(std::string_view head,
                                                       HttpRequest* request) {
  size_t pos = 0;
  // The next line without its end; false for a bare CR inside it. The head
  // ends in LF, so a line end is always found.
  auto next_line = [&](std::string_view* line) {
    const size_t lf = head.find('\n', pos);
    std::string_view l = head.substr(pos, lf - pos);
    pos = lf + 1;
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    *line = l;
    return l.find('\r') == std::string_view::npos;
  };
  std::string_view line;
  do {
    if (!next_line(&line)) return Refuse(400, "bare CR in the request line");
  } while (line.empty());

  // method SP request-target SP HTTP-version, single spaces.
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return Refuse(400, "malformed request line");
  }
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!IsToken(method)) return Refuse(400, "malformed method");
  if (!IsTargetText(target)) return Refuse(400, "malformed request target");
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || !digit(version[5]) ||
      version[6] != '.' || !digit(version[7])) {
    return Refuse(400, "malformed HTTP version");
  }
  if (version[5] != '1' || (version[7] != '0' && version[7] != '1')) {
    return Refuse(505, "only HTTP/1.0 and HTTP/1.1 are served");
  }
  std::string path;
  if (!TargetPath(target, &path)) return Refuse(400, "unsupported request target form");

  bool close = false, keep_alive = false, body = false;
  for (;;) {
    if (!next_line(&line)) return Refuse(400, "bare CR in a header line");
    if (line.empty()) break;
    if (line.front() == ' ' || line.front() == '\t') {
      return Refuse(400, "folded header line (obs-fold)");
    }
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) return Refuse(400, "header line without ':'");
    const std::string_view name = line.substr(0, colon);
    const std::string_view value = TrimBlanks(line.substr(colon + 1));
    if (!IsToken(name)) return Refuse(400, "malformed header name");
    if (!IsFieldValue(value)) return Refuse(400, "control character in a header value");
    if (EqualsIgnoringCase(name, "content-length")) {
      if (value.empty() || !std::all_of(value.begin(), value.end(), digit)) {
        return Refuse(400, "malformed Content-Length");
      }
      // Any length but zero is a body, however many digits it has.
      if (value.find_first_not_of('0') != std::string_view::npos) body = true;
    } else if (EqualsIgnoringCase(name, "transfer-encoding")) {
      body = true;
    } else if (EqualsIgnoringCase(name, "connection")) {
      std::string_view rest = value;
      while (!rest.empty()) {
        const size_t comma = rest.find(',');
        const std::string_view option = TrimBlanks(rest.substr(0, comma));
        if (EqualsIgnoringCase(option, "close")) close = true;
        if (EqualsIgnoringCase(option, "keep-alive")) keep_alive = true;
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      }
    }
  }
  const bool get = method == "GET";
  if (!get && method != "HEAD") return Refuse(405, "only GET and HEAD are served");
  if (body) return Refuse(413, "a request body is not accepted");

  request->method = get ? HttpRequest::Method::kGet : HttpRequest::Method::kHead;
  request->target = std::string(target);
  request->path = std::move(path);
  request->minor_version = version[7] - '0';
  request->keep_alive = request->minor_version == 1 ? !close : keep_alive && !close;
  return Result::kRequest;
}

}  // namespace gpu_agent
