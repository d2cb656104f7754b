// Splits a byte stream that arrives in chunks (a watch body) into lines.
#ifndef GPU_AGENT_APISERVER_LINE_BUFFER_H_
#define GPU_AGENT_APISERVER_LINE_BUFFER_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace gpu_agent::apiserver {

// Each byte is scanned for '\n' once, and consumed lines are dropped in
// amortised constant time, so the work is linear in the stream however it is
// chunked (a long line in many small chunks included). Not thread-safe.
class LineBuffer {
 public:
  void Append(std::string_view chunk) { buffer_.append(chunk.data(), chunk.size()); }
  // The next complete line without its '\n'; nullopt until one is complete.
  std::optional<std::string> NextLine();
  // Bytes received and not yet returned as a line: the unfinished line once
  // NextLine returned nullopt. A caller caps it to bound memory.
  size_t pending() const { return buffer_.size() - start_; }

 private:
  std::string buffer_;
  size_t start_ = 0;    // where the next line begins
  size_t scanned_ = 0;  // bytes from start_ known to hold no '\n'
};

}  // namespace gpu_agent::apiserver

#endif  // GPU_AGENT_APISERVER_LINE_BUFFER_H_
