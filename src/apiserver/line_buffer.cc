#include "apiserver/line_buffer.h"

namespace gpu_agent::apiserver {

std::optional<std::string> LineBuffer::NextLine() {
  const size_t nl = buffer_.find('\n', start_ + scanned_);
  if (nl == std::string::npos) {
    // Drop what was consumed once it is at least half the buffer: each byte
    // is moved a bounded number of times.
    if (start_ > 0 && start_ >= buffer_.size() / 2) {
      buffer_.erase(0, start_);
      start_ = 0;
    }
    scanned_ = buffer_.size() - start_;
    return std::nullopt;
  }
  std::string line = buffer_.substr(start_, nl - start_);
  start_ = nl + 1;
  scanned_ = 0;
  if (start_ == buffer_.size()) {
    buffer_.clear();
    start_ = 0;
  }
  return line;
}

}  // namespace gpu_agent::apiserver
