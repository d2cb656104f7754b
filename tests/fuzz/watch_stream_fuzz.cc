// A watch body as it arrives: bytes in chunks of varying size, split into
// lines by LineBuffer (checked against a plain split of the whole body) and
// each line parsed as a watch event.
//
// Input: two bytes that seed the chunk sizes, then the body.
#include <string>
#include <vector>

#include "apiserver/line_buffer.h"
#include "apiserver/node.h"
#include "fuzz_support.h"

using namespace gpu_agent;
using namespace gpu_agent::apiserver;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  uint32_t seed = static_cast<uint32_t>(data[0]) << 8 | data[1];
  const std::string_view body = fuzz::AsView(data + 2, size - 2);

  std::vector<std::string_view> expect = fuzz::Split(body, '\n');
  expect.pop_back();  // the unfinished rest

  LineBuffer buffer;
  std::vector<std::string> got;
  for (size_t off = 0; off < body.size();) {
    seed = seed * 1103515245u + 12345u;
    const size_t n = std::min<size_t>(body.size() - off, 1 + (seed >> 16) % 64);
    buffer.Append(body.substr(off, n));
    off += n;
    while (std::optional<std::string> line = buffer.NextLine()) {
      got.push_back(*std::move(line));
    }
  }
  fuzz::Check(got.size() == expect.size(), "LineBuffer found another number of lines");
  size_t consumed = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    fuzz::Check(got[i] == expect[i], "LineBuffer returned another line");
    consumed += got[i].size() + 1;
  }
  fuzz::Check(buffer.pending() == body.size() - consumed, "LineBuffer lost unfinished bytes");
  for (const std::string& line : got) {
    if (line.empty()) continue;
    absl::StatusOr<WatchEvent> ev = ParseWatchEvent(line);
    if (!ev.ok()) fuzz::Check(!ev.status().message().empty(), "error without a message");
  }
  return 0;
}
