// The metrics endpoint's request reader (HttpRequestReader): what a network
// client sends, in chunks of varying size as the server reads it, with the
// agent's caps and with small ones (so short inputs reach them). Checked:
// the same requests and refusal whatever the chunks, never more buffered
// than the head's cap, never full without a request or a refusal, and
// every request one the endpoint can route (GET or HEAD, an absolute path,
// HTTP/1.0 or 1.1, a target within the request line's cap).
//
// Input: two bytes that seed the chunk sizes, then the bytes sent.
#include <string>
#include <vector>

#include "agent/run/http_request_reader.h"
#include "fuzz_support.h"

using namespace gpu_agent;

namespace {

// Feeds `sent` in chunks (the whole of it at once when seed is 0), reading
// every request after each; returns what came out, one string each.
std::vector<std::string> Read(std::string_view sent, uint32_t seed,
                              const HttpRequestReader::Limits& limits) {
  HttpRequestReader reader(limits);
  std::vector<std::string> out;
  size_t off = 0;
  for (;;) {
    size_t want = sent.size() - off;
    if (seed != 0) {
      seed = seed * 1103515245u + 12345u;
      want = std::min<size_t>(want, 1 + (seed >> 16) % 64);
    }
    const size_t took = reader.Feed(sent.substr(off, want));
    off += took;
    fuzz::Check(reader.buffered() <= limits.max_head, "buffered past the head's cap");
    for (;;) {
      HttpRequest r;
      const HttpRequestReader::Result result = reader.Next(&r);
      if (result == HttpRequestReader::Result::kNeedMore) break;
      if (result == HttpRequestReader::Result::kRefused) {
        const int s = reader.refusal_status();
        fuzz::Check(s == 400 || s == 405 || s == 413 || s == 414 || s == 431 || s == 505,
                    "refused with an unexpected status");
        fuzz::Check(!reader.refusal_reason().empty(), "refused without a reason");
        fuzz::Check(reader.room() == 0 && reader.Feed("x") == 0, "fed after a refusal");
        out.push_back("refused " + std::to_string(s));
        return out;
      }
      fuzz::Check(!r.path.empty() && r.path.front() == '/', "a path that is not absolute");
      fuzz::Check(r.path.find('?') == std::string::npos, "a query left in the path");
      fuzz::Check(!r.target.empty() && r.target.size() <= limits.max_request_line,
                  "a target past the request line's cap");
      fuzz::Check(r.minor_version == 0 || r.minor_version == 1, "a version not served");
      out.push_back(std::string(r.method == HttpRequest::Method::kGet ? "GET " : "HEAD ") +
                    r.target + (r.keep_alive ? " keep" : " close"));
    }
    fuzz::Check(reader.room() > 0, "full without a request or a refusal");
    if (off == sent.size()) return out;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint32_t seed = (static_cast<uint32_t>(data[0]) << 8 | data[1]) | 1u;
  const std::string_view sent = fuzz::AsView(data + 2, size - 2);
  const HttpRequestReader::Limits agent;
  HttpRequestReader::Limits small;
  small.max_request_line = 40;
  small.max_head = 120;
  for (const HttpRequestReader::Limits& limits : {agent, small}) {
    const std::vector<std::string> whole = Read(sent, 0, limits);
    fuzz::Check(Read(sent, seed, limits) == whole, "chunks changed what was read");
  }
  return 0;
}
