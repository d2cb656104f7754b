// HttpRequestReader: what the metrics endpoint takes as a request, what it
// refuses and with which status, pipelining, and heads split anywhere.
#include "agent/run/http_request_reader.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpu_agent {
namespace {

using Result = HttpRequestReader::Result;

// One request as "METHOD path minor keep|close target", or a refusal as
// "refused STATUS".
std::string Describe(const HttpRequest& r) {
  return std::string(r.method == HttpRequest::Method::kGet ? "GET" : "HEAD") + " " + r.path + " " +
         std::to_string(r.minor_version) + " " + (r.keep_alive ? "keep" : "close") + " " + r.target;
}

// Every request the reader yields (and its refusal, if any) until it needs
// more bytes.
std::vector<std::string> Drain(HttpRequestReader& reader) {
  std::vector<std::string> out;
  for (;;) {
    HttpRequest r;
    switch (reader.Next(&r)) {
      case Result::kNeedMore:
        return out;
      case Result::kRefused:
        out.push_back("refused " + std::to_string(reader.refusal_status()));
        return out;
      case Result::kRequest:
        out.push_back(Describe(r));
        break;
    }
  }
}

// Feeds `bytes` in pieces of `piece` bytes (0: all at once), draining after
// each, as the server does; what does not fit waits for the next turn.
std::vector<std::string> ReadAll(const std::string& bytes, size_t piece = 0,
                                 HttpRequestReader::Limits limits = {}) {
  HttpRequestReader reader(limits);
  std::vector<std::string> out;
  size_t at = 0;
  while (at < bytes.size() && !reader.refused()) {
    const size_t want = piece == 0 ? bytes.size() - at : std::min(piece, bytes.size() - at);
    const size_t took = reader.Feed(std::string_view(bytes).substr(at, want));
    at += took;
    for (std::string& s : Drain(reader)) out.push_back(std::move(s));
    if (took == 0 && !reader.refused()) {
      ADD_FAILURE() << "full without a request or a refusal";
      break;
    }
    EXPECT_LE(reader.buffered(), limits.max_head);
  }
  return out;
}

TEST(HttpRequestReaderTest, Accepted) {
  struct Case {
    std::string raw, want;
  };
  for (const Case& c : std::vector<Case>{
           {"GET /metrics HTTP/1.1\r\nHost: 10.0.0.7:9400\r\nAccept: */*\r\n\r\n",
            "GET /metrics 1 keep /metrics"},
           {"HEAD /healthz HTTP/1.1\r\n\r\n", "HEAD /healthz 1 keep /healthz"},
           {"GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n", "GET /healthz 1 close /healthz"},
           // Header names and Connection's options in any case, in a list.
           {"GET /healthz HTTP/1.1\r\nCONNECTION: Keep-Alive, CLOSE\r\n\r\n",
            "GET /healthz 1 close /healthz"},
           {"GET /readyz HTTP/1.1\r\nconnection:close\r\n\r\n", "GET /readyz 1 close /readyz"},
           {"GET /readyz HTTP/1.1\r\nConnection: upgrade\r\n\r\n", "GET /readyz 1 keep /readyz"},
           // HTTP/1.0 closes unless it asks to keep alive.
           {"GET /metrics HTTP/1.0\r\n\r\n", "GET /metrics 0 close /metrics"},
           {"GET /metrics HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
            "GET /metrics 0 keep /metrics"},
           // Bare LF ends a line as CRLF does, on any line.
           {"GET /metrics HTTP/1.1\nHost: x\n\n", "GET /metrics 1 keep /metrics"},
           {"GET /metrics HTTP/1.1\r\nHost: x\n\r\n", "GET /metrics 1 keep /metrics"},
           // Blank lines before the request line are skipped.
           {"\r\n\nGET /metrics HTTP/1.1\r\n\r\n", "GET /metrics 1 keep /metrics"},
           {"GET /metrics?name[]=up HTTP/1.1\r\n\r\n", "GET /metrics 1 keep /metrics?name[]=up"},
           {"GET http://10.0.0.7:9400/healthz?x HTTP/1.1\r\n\r\n",
            "GET /healthz 1 keep http://10.0.0.7:9400/healthz?x"},
           {"GET HTTPS://h?x HTTP/1.1\r\n\r\n", "GET / 1 keep HTTPS://h?x"},
           {"GET /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n", "GET /metrics 1 keep /metrics"},
           {"GET /metrics HTTP/1.1\r\nContent-Length: 000\r\n\r\n", "GET /metrics 1 keep /metrics"},
           // Values: tabs, obs-text, nothing at all; blanks round them dropped.
           {"GET / HTTP/1.1\r\nX-A:\t caf\xc3\xa9 \t\r\nX-B:\r\nX-C: a\tb\r\n\r\n",
            "GET / 1 keep /"},
           {"GET /%2Fmetrics HTTP/1.1\r\n\r\n", "GET /%2Fmetrics 1 keep /%2Fmetrics"},
       }) {
    EXPECT_EQ(ReadAll(c.raw), std::vector<std::string>{c.want}) << c.raw;
  }
}

TEST(HttpRequestReaderTest, RefusedWithTheRightStatus) {
  struct Case {
    std::string raw;
    int status;
  };
  const std::string long_target(2000, 'a');
  for (const Case& c : std::vector<Case>{
           // Not HTTP.
           {"GET /metrics\r\n\r\n", 400},
           {"GET  /metrics HTTP/1.1\r\n\r\n", 400},
           {"GET /metrics HTTP/1.1 \r\n\r\n", 400},
           {" GET /metrics HTTP/1.1\r\n\r\n", 400},
           {"G(T /metrics HTTP/1.1\r\n\r\n", 400},
           {"GET metrics HTTP/1.1\r\n\r\n", 400},
           {"GET * HTTP/1.1\r\n\r\n", 400},
           {"CONNECT 10.0.0.7:9400 HTTP/1.1\r\n\r\n", 400},
           {"GET /a\x01z HTTP/1.1\r\n\r\n", 400},
           {"GET /metrics HTTP/1.x\r\n\r\n", 400},
           {"GET /metrics HTTPS/1.1\r\n\r\n", 400},
           {"GET /metrics HTTP/11\r\n\r\n", 400},
           {"GET /metrics HTTP/1.1\rX\r\n\r\n", 400},       // bare CR
           {"GET / HTTP/1.1\r\nX: a\rb\r\n\r\n", 400},      // bare CR
           {"GET / HTTP/1.1\r\nX: a\r\r\n\r\n", 400},       // bare CR
           {"GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400},     // blank before ':'
           {"GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n", 400},   // obs-fold
           {"GET / HTTP/1.1\r\nX: a\r\n\tb\r\n\r\n", 400},  // obs-fold
           {"GET / HTTP/1.1\r\nNo colon\r\n\r\n", 400},
           {"GET / HTTP/1.1\r\n: no name\r\n\r\n", 400},
           {std::string("GET / HTTP/1.1\r\nX: a\0b\r\n\r\n", 26), 400},
           {"GET / HTTP/1.1\r\nX: a\x7f\r\n\r\n", 400},
           {"GET / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n", 400},
           {"GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400},
           {"GET / HTTP/1.1\r\nContent-Length: 1, 1\r\n\r\n", 400},
           {"GET / HTTP/1.1\r\nContent-Length:\r\n\r\n", 400},
           // Methods but GET and HEAD (case counts).
           {"POST /metrics HTTP/1.1\r\n\r\n", 405},
           {"get /metrics HTTP/1.1\r\n\r\n", 405},
           {"OPTIONS /metrics HTTP/1.1\r\n\r\n", 405},
           {"PUT /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", 405},
           // A body, announced either way, however large.
           {"GET /metrics HTTP/1.1\r\nContent-Length: 1\r\n\r\nx", 413},
           {"GET /metrics HTTP/1.1\r\nContent-Length: 100000000000\r\n\r\n", 413},
           {"GET /metrics HTTP/1.1\r\nContent-Length: 99999999999999999999999999999\r\n\r\n", 413},
           {"GET /metrics HTTP/1.1\r\ncontent-length: 0\r\nContent-Length: 7\r\n\r\n", 413},
           {"GET /metrics HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 413},
           {"GET /metrics HTTP/1.1\r\ntransfer-encoding: identity\r\n\r\n", 413},
           // Too long.
           {"GET /" + long_target + " HTTP/1.1\r\n\r\n", 414},
           {"GET /metrics HTTP/1.1\r\nX: " + std::string(5000, 'v') + "\r\n\r\n", 431},
           // Other versions.
           {"GET /metrics HTTP/2.0\r\n\r\n", 505},
           {"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505},
           {"GET /metrics HTTP/0.9\r\n\r\n", 505},
           {"GET /metrics HTTP/1.2\r\n\r\n", 505},
       }) {
    EXPECT_EQ(ReadAll(c.raw), std::vector<std::string>{"refused " + std::to_string(c.status)})
        << c.raw.substr(0, 200);
  }
}

TEST(HttpRequestReaderTest, RefusalIsFinalAndHoldsNothing) {
  HttpRequestReader reader;
  reader.Feed("POST /metrics HTTP/1.1\r\n\r\nGET /metrics HTTP/1.1\r\n\r\n");
  HttpRequest r;
  EXPECT_EQ(reader.Next(&r), Result::kRefused);
  EXPECT_EQ(reader.refusal_status(), 405);
  EXPECT_FALSE(reader.refusal_reason().empty());
  EXPECT_EQ(reader.buffered(), 0u);
  EXPECT_EQ(reader.room(), 0u);
  EXPECT_EQ(reader.Feed("GET /metrics HTTP/1.1\r\n\r\n"), 0u);
  EXPECT_EQ(reader.Next(&r), Result::kRefused);
  EXPECT_EQ(reader.refusal_status(), 405);
}

TEST(HttpRequestReaderTest, TwentyPipelinedRequestsComeOutInOrder) {
  const char* paths[] = {"/metrics", "/healthz", "/readyz", "/nope"};
  std::string raw;
  std::vector<std::string> want;
  for (int i = 0; i < 20; ++i) {
    const std::string path = std::string(paths[i % 4]) + "?n=" + std::to_string(i);
    raw += "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n";
    want.push_back(std::string("GET ") + paths[i % 4] + " 1 keep " + path);
  }
  EXPECT_EQ(ReadAll(raw), want);
  HttpRequestReader reader;
  ASSERT_EQ(reader.Feed(raw), raw.size());
  EXPECT_EQ(Drain(reader), want);
  EXPECT_EQ(reader.buffered(), 0u);
}

// The same requests and refusals whatever the pieces the bytes come in:
// split in two at every byte, and a byte at a time.
TEST(HttpRequestReaderTest, SplitAnywhereReadsTheSame) {
  const std::vector<std::string> streams = {
      "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: text/plain\r\n\r\n"
      "HEAD /healthz HTTP/1.1\r\n\r\n\r\nGET /readyz HTTP/1.0\nConnection: keep-alive\n\n"
      "GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n",
      "GET /healthz HTTP/1.1\r\n\r\nGET /healthz HTTP/1.1\r\nContent-Length: 12\r\n\r\n",
      "GET /healthz HTTP/1.1\r\nX: a\r\n b\r\n\r\n",
      "GET /" + std::string(1100, 'a') + " HTTP/1.1\r\n\r\n",
      "GET /metrics HTTP/1.1\r\n" + std::string(300, 'x') + ": y\r\n" + std::string(4000, 'z') +
          "\r\n\r\n",
  };
  for (const std::string& s : streams) {
    const std::vector<std::string> whole = ReadAll(s);
    ASSERT_FALSE(whole.empty()) << s.substr(0, 60);
    EXPECT_EQ(ReadAll(s, 1), whole) << s.substr(0, 60);
    for (size_t cut = 1; cut < s.size(); ++cut) {
      HttpRequestReader reader;
      std::vector<std::string> got;
      for (const std::string_view part :
           {std::string_view(s).substr(0, cut), std::string_view(s).substr(cut)}) {
        size_t fed = 0;
        while (fed < part.size() && !reader.refused()) {
          const size_t took = reader.Feed(part.substr(fed));
          fed += took;
          for (std::string& d : Drain(reader)) got.push_back(std::move(d));
          if (took == 0) break;
        }
      }
      ASSERT_EQ(got, whole) << "cut at " << cut << " of " << s.substr(0, 60);
    }
  }
}

TEST(HttpRequestReaderTest, NeverHoldsMoreThanItsCap) {
  HttpRequestReader reader;
  const std::string header_line = "X-Flood: " + std::string(8 * 1024, 'a') + "\r\n";
  EXPECT_EQ(reader.Feed("GET /metrics HTTP/1.1\r\n"), 23u);
  size_t taken = 23;
  HttpRequest r;
  Result last = Result::kNeedMore;
  for (int i = 0; i < 100 && last == Result::kNeedMore; ++i) {
    taken += reader.Feed(header_line);
    EXPECT_LE(reader.buffered(), 4096u);
    last = reader.Next(&r);
  }
  EXPECT_EQ(last, Result::kRefused);
  EXPECT_EQ(reader.refusal_status(), 431);
  EXPECT_EQ(taken, 4096u);
  // Endless short header lines: refused at the same cap.
  std::string stream = "GET /metrics HTTP/1.1\r\n";
  while (stream.size() < 100000) stream += "X: y\r\n";
  EXPECT_EQ(ReadAll(stream, 512), std::vector<std::string>{"refused 431"});
}

TEST(HttpRequestReaderTest, CapsAreExact) {
  HttpRequestReader::Limits limits;
  // A request line of exactly the cap, then one byte over.
  const std::string at_cap = "GET /" + std::string(limits.max_request_line - 14, 'a') + " HTTP/1.1";
  ASSERT_EQ(at_cap.size(), limits.max_request_line);
  EXPECT_EQ(ReadAll(at_cap + "\r\n\r\n").size(), 1u);
  EXPECT_NE(ReadAll(at_cap + "\r\n\r\n")[0].rfind("GET /a", 0), std::string::npos);
  EXPECT_EQ(ReadAll("GET /" + std::string(limits.max_request_line - 13, 'a') + " HTTP/1.1\n\n"),
            std::vector<std::string>{"refused 414"});
  // A request line with no end: refused once past the cap, not when the
  // head's cap fills.
  HttpRequestReader reader;
  reader.Feed("GET /" + std::string(1100, 'a'));
  HttpRequest r;
  EXPECT_EQ(reader.Next(&r), Result::kRefused);
  EXPECT_EQ(reader.refusal_status(), 414);
  // A head of exactly the cap, then one byte over.
  std::string head = "GET /metrics HTTP/1.1\r\nX: ";
  head += std::string(limits.max_head - head.size() - 4, 'v') + "\r\n\r\n";
  ASSERT_EQ(head.size(), limits.max_head);
  EXPECT_EQ(ReadAll(head), std::vector<std::string>{"GET /metrics 1 keep /metrics"});
  EXPECT_EQ(ReadAll(head.substr(0, 26) + "v" + head.substr(26)),
            std::vector<std::string>{"refused 431"});
  // Pipelined behind a whole request, a head too large is refused after it.
  EXPECT_EQ(ReadAll("GET /healthz HTTP/1.1\r\n\r\n" + head.substr(0, 26) + "v" + head.substr(26)),
            (std::vector<std::string>{"GET /healthz 1 keep /healthz", "refused 431"}));
}

TEST(HttpRequestReaderTest, IdleReaderHoldsNoBuffer) {
  HttpRequestReader reader;
  reader.Feed("GET /healthz HTTP/1.1\r\n\r\n");
  EXPECT_EQ(Drain(reader).size(), 1u);
  EXPECT_EQ(reader.buffered(), 0u);
  EXPECT_EQ(reader.room(), 4096u);
}

}  // namespace
}  // namespace gpu_agent
