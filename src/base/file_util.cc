#include "base/file_util.h"

#include <sys/stat.h>

namespace gpu_agent {

bool PathExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

ino_t InodeOf(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

std::string JoinRoot(std::string_view root, std::string_view path) {
  while (!root.empty() && root.back() == '/') root.remove_suffix(1);
  return std::string(root) + std::string(path);
}

}  // namespace gpu_agent
