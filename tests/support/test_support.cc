#include "test_support.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace gpu_agent::testing {

std::string BinaryPath() {
  // A benchmark may compare another build of the agent.
  const char* other = std::getenv("GPU_AGENT_BINARY");
  return other != nullptr && *other != '\0' ? other : GPU_AGENT_BINARY;
}
std::string FakeNvmlDir() { return GPU_AGENT_FAKE_NVML_DIR; }
std::string FakeNvmlTool() { return GPU_AGENT_FAKE_NVML_TOOL; }
std::string SourceDir() { return GPU_AGENT_SOURCE_DIR; }
std::string FixturePath(const std::string& name) {
  return SourceDir() + "/tests/fixtures/nvml/" + name;
}

TempDir::TempDir() {
  char tmpl[] = "/tmp/gat.XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::Write(const std::string& name, const std::string& content) const {
  const std::string path = Join(name);
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

void MeasurementWindow(std::chrono::milliseconds window) { std::this_thread::sleep_for(window); }

bool WriteFakeDriverRoot(const std::string& root, const std::string& version) {
  namespace fs = std::filesystem;
  const std::string lib = root + "/usr/lib/x86_64-linux-gnu";
  std::error_code ec;
  for (const char* dir : {"/usr/lib/x86_64-linux-gnu", "/usr/bin", "/lib/firmware/nvidia"}) {
    fs::create_directories(root + dir, ec);
    if (ec) return false;
  }
  fs::create_directories(root + "/lib/firmware/nvidia/" + version, ec);
  // name, SONAME link ("" when the SONAME is the versioned name), .so link
  struct Lib {
    const char* name;
    const char* soname;
    bool dev_link;
  };
  for (const Lib& l : {Lib{"libnvidia-ml.so", "libnvidia-ml.so.1", true},
                       Lib{"libnvidia-cfg.so", "libnvidia-cfg.so.1", true},
                       Lib{"libcuda.so", "libcuda.so.1", true},
                       Lib{"libcudadebugger.so", "libcudadebugger.so.1", false},
                       Lib{"libnvidia-opencl.so", "libnvidia-opencl.so.1", false},
                       Lib{"libnvidia-gpucomp.so", "", false},
                       Lib{"libnvidia-ptxjitcompiler.so", "libnvidia-ptxjitcompiler.so.1", true},
                       Lib{"libnvidia-allocator.so", "libnvidia-allocator.so.1", true},
                       Lib{"libnvidia-pkcs11-openssl3.so", "", false},
                       Lib{"libnvidia-nvvm.so", "libnvidia-nvvm.so.4", true},
                       // Not a compute or utility library: must stay out.
                       Lib{"libnvidia-encode.so", "libnvidia-encode.so.1", true}}) {
    const std::string file = std::string(l.name) + "." + version;
    std::ofstream(lib + "/" + file) << "placeholder for " << file << "\n";
    std::string target = file;
    if (*l.soname) {
      fs::create_symlink(file, lib + "/" + l.soname, ec);
      if (ec) return false;
      target = l.soname;
    }
    if (l.dev_link) {
      fs::create_symlink(target, lib + "/" + l.name, ec);
      if (ec) return false;
    }
  }
  for (const char* bin : {"nvidia-smi", "nvidia-debugdump", "nvidia-persistenced",
                          "nvidia-cuda-mps-control", "nvidia-cuda-mps-server"}) {
    std::ofstream(root + "/usr/bin/" + bin) << "#!/bin/sh\n";
  }
  for (const char* fw : {"gsp_ga10x.bin", "gsp_tu10x.bin"}) {
    std::ofstream(root + "/lib/firmware/nvidia/" + version + "/" + fw) << "firmware\n";
  }
  return true;
}

bool WriteFakeDevRoot(const std::string& root, const std::vector<int>& minors,
                      const std::vector<int>& caps, bool char_devices) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(root + "/dev/nvidia-caps", ec);
  if (ec) return false;
  // The driver's majors: 195 for the GPUs and nvidiactl; nvidia-uvm and
  // nvidia-caps get dynamic ones (these are typical).
  struct Node {
    std::string path;
    unsigned major, minor;
  };
  std::vector<Node> nodes = {
      {"/dev/nvidiactl", 195, 255}, {"/dev/nvidia-uvm", 510, 0}, {"/dev/nvidia-uvm-tools", 510, 1}};
  for (int m : minors) nodes.push_back({"/dev/nvidia" + std::to_string(m), 195, unsigned(m)});
  for (int c : caps) {
    nodes.push_back({"/dev/nvidia-caps/nvidia-cap" + std::to_string(c), 511, unsigned(c)});
  }
  bool devices = char_devices;
  for (const Node& n : nodes) {
    const std::string path = root + n.path;
    ::unlink(path.c_str());
    if (devices && ::mknod(path.c_str(), S_IFCHR | 0666, makedev(n.major, n.minor)) != 0) {
      devices = false;  // no CAP_MKNOD here: the rest are files too
      for (const Node& before : nodes) {
        if (&before == &n) break;
        ::unlink((root + before.path).c_str());
        std::ofstream(root + before.path);
      }
    }
    if (!devices) std::ofstream(path).flush();
  }
  return devices;
}

bool WriteFixtureSysfs(const std::string& fixture, const std::string& root) {
  return std::system((FakeNvmlTool() + " sysfs " + fixture + " " + root).c_str()) == 0;
}

namespace {
std::map<std::string, std::string> ParentEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv(*e);
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}
}  // namespace

std::vector<std::string> ChildEnvironment(const EnvOverrides& overrides) {
  std::map<std::string, std::string> merged = ParentEnvironment();
  for (const auto& [k, v] : overrides) {
    if (v == kUnset) {
      merged.erase(k);
    } else {
      merged[k] = v;
    }
  }
  std::vector<std::string> strings;
  for (const auto& [k, v] : merged) strings.push_back(k + "=" + v);
  return strings;
}

EnvOverrides UnsetAllBut(const std::set<std::string>& keep) {
  EnvOverrides env;
  for (const auto& [k, v] : ParentEnvironment()) {
    if (keep.count(k) == 0) env[k] = kUnset;
  }
  return env;
}

Subprocess::Subprocess(std::vector<std::string> argv, const EnvOverrides& env) {
  std::vector<std::string> env_strings = ChildEnvironment(env);
  std::vector<char*> envp, args;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);

  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    throw std::runtime_error("pipe failed");
  }
  pid_ = ::fork();
  if (pid_ == 0) {
    ::dup2(out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    // The child starts with no signals blocked, like a process from a shell.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve(args[0], args.data(), envp.data());
    std::fprintf(stderr, "execve %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  out_thread_ = std::thread([this, fd = out_pipe[0]] { Pump(fd, &out_); });
  err_thread_ = std::thread([this, fd = err_pipe[0]] { Pump(fd, &err_); });
}

void Subprocess::Pump(int fd, std::string* into) {
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    std::lock_guard<std::mutex> lock(mu_);
    into->append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
}

Subprocess::~Subprocess() {
  if (!exited_ && pid_ > 0) {
    ::kill(pid_, SIGKILL);
    Wait(std::chrono::seconds(10));
  }
  if (out_thread_.joinable()) out_thread_.join();
  if (err_thread_.joinable()) err_thread_.join();
}

void Subprocess::Signal(int sig) {
  if (!exited_) ::kill(pid_, sig);
}

bool Subprocess::Running() {
  if (exited_) return false;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exited_ = true;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return false;
  }
  return true;
}

int Subprocess::Wait(std::chrono::milliseconds timeout) {
  if (!WaitFor([this] { return !Running(); }, timeout)) {
    ::kill(pid_, SIGKILL);
    WaitFor([this] { return !Running(); }, std::chrono::seconds(10));
    if (out_thread_.joinable()) out_thread_.join();
    if (err_thread_.joinable()) err_thread_.join();
    return -1;
  }
  if (out_thread_.joinable()) out_thread_.join();
  if (err_thread_.joinable()) err_thread_.join();
  return exit_code_;
}

std::string Subprocess::Stdout() {
  std::lock_guard<std::mutex> lock(mu_);
  return out_;
}

std::string Subprocess::Stderr() {
  std::lock_guard<std::mutex> lock(mu_);
  return err_;
}

bool Subprocess::WaitForStderr(const std::string& text, std::chrono::milliseconds timeout) {
  return WaitFor([&] { return Stderr().find(text) != std::string::npos; }, timeout);
}

}  // namespace gpu_agent::testing

namespace gpu_agent::testing {

namespace {
int CountEntries(const std::string& dir) {
  std::error_code ec;
  int n = 0;
  for (auto it = std::filesystem::directory_iterator(dir, ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return n;
}
}  // namespace

int CountOpenFds(pid_t pid) { return CountEntries("/proc/" + std::to_string(pid) + "/fd"); }
int CountThreads(pid_t pid) { return CountEntries("/proc/" + std::to_string(pid) + "/task"); }

std::vector<std::string> ThreadNames(pid_t pid) {
  std::vector<std::string> names;
  std::error_code ec;
  const std::string task = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& entry : std::filesystem::directory_iterator(task, ec)) {
    std::string name = ReadFile(entry.path().string() + "/comm");
    while (!name.empty() && name.back() == '\n') name.pop_back();
    if (!name.empty()) names.push_back(name);  // empty: the thread ended meanwhile
  }
  return names;
}

long CpuTicks(pid_t pid) {
  std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream in(stat.substr(close + 2));
  std::string field;
  long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && in >> field; ++i) {
    if (i == 14) utime = std::stol(field);
    if (i == 15) stime = std::stol(field);
  }
  return utime + stime;
}

bool AllThreadsAsleep(pid_t pid) {
  std::error_code ec;
  const std::string task = "/proc/" + std::to_string(pid) + "/task";
  bool any = false;
  for (const auto& entry : std::filesystem::directory_iterator(task, ec)) {
    const std::string stat = ReadFile(entry.path().string() + "/stat");
    const size_t close = stat.rfind(')');
    if (close == std::string::npos || close + 2 >= stat.size()) continue;  // ended meanwhile
    // R: running or runnable. S, D: blocked. Anything else (stopped,
    // ending) is not running either.
    if (stat[close + 2] == 'R') return false;
    any = true;
  }
  return any && !ec;
}

bool SomeoneWaitsForLock(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return false;
  // /proc/locks: "1: FLOCK  ADVISORY  WRITE 2617 fe:00:10952768 0 EOF",
  // each request blocked behind it as "1: -> FLOCK ...".
  const std::string inode = ":" + std::to_string(st.st_ino);
  std::istringstream locks(ReadFile("/proc/locks"));
  for (std::string line; std::getline(locks, line);) {
    std::istringstream fields(line);
    std::string f;
    bool waiter = false;
    while (fields >> f) {
      if (f == "->") waiter = true;
      if (waiter && f.size() > inode.size() && f.ends_with(inode)) return true;
    }
  }
  return false;
}

bool WriteFifo(const std::string& path, const std::string& line) {
  int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  const std::string text = line + "\n";
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

int ConnectLoopback(int port, bool nonblocking) {
  const int fd =
      ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0), 0);
  if (fd < 0) return -1;
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 &&
      !(nonblocking && errno == EINPROGRESS)) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace gpu_agent::testing
