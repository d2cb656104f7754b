#include "fuzz_support.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "base/log.h"

namespace gpu_agent::fuzz {

const std::string& TempDir() {
  static const std::string* dir = [] {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/gpu-agent-fuzz-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      std::perror("mkdtemp");
      std::abort();
    }
    auto* d = new std::string(pattern);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(TempDir(), ec);
    });
    return d;
  }();
  return *dir;
}

void WriteFileOrDie(const std::string& path, std::string_view data) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    std::perror(path.c_str());
    std::abort();
  }
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n <= 0) {
      std::perror(path.c_str());
      std::abort();
    }
    off += static_cast<size_t>(n);
  }
  ::close(fd);
}

std::vector<std::string_view> Split(std::string_view data, char sep, size_t max) {
  std::vector<std::string_view> out;
  while (out.size() + 1 < max) {
    const size_t at = data.find(sep);
    if (at == std::string_view::npos) break;
    out.push_back(data.substr(0, at));
    data.remove_prefix(at + 1);
  }
  out.push_back(data);
  return out;
}

void QuietLogs() { SetLogOptions(LogLevel::kError, LogFormat::kText); }

void Check(bool ok, std::string_view what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz check failed: %.*s\n", static_cast<int>(what.size()), what.data());
  std::abort();
}

}  // namespace gpu_agent::fuzz
