// Helpers shared by the tests: temporary folders, waiting on a condition
// with a deadline, and running the real gpu-agent binary as a subprocess.
#ifndef GPU_AGENT_TESTS_SUPPORT_TEST_SUPPORT_H_
#define GPU_AGENT_TESTS_SUPPORT_TEST_SUPPORT_H_

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace gpu_agent::testing {

// Paths baked in by CMake.
std::string BinaryPath();                          // build/gpu-agent
std::string FakeNvmlDir();                         // build/fake-nvml
std::string FakeNvmlTool();                        // build/fake-nvml-tool
std::string SourceDir();                           // the repository root
std::string FixturePath(const std::string& name);  // tests/fixtures/nvml/<name>

// A fresh folder under /tmp (short, so unix socket paths stay under 108
// bytes), removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string Join(const std::string& name) const { return path_ + "/" + name; }
  // Writes `content` to <dir>/<name>, creating parent folders.
  std::string Write(const std::string& name, const std::string& content) const;

 private:
  std::string path_;
};

std::string ReadFile(const std::string& path);

// Polls `condition` every few milliseconds until it holds or `timeout`
// passes. Returns whether it held. Not a sleep used as synchronisation: the
// outcome is decided by the condition, the deadline only bounds a failure.
bool WaitFor(const std::function<bool()>& condition,
             std::chrono::milliseconds timeout = std::chrono::seconds(10));

// Lets `window` pass: for bench/ only, whose programs measure what a
// process does over a stretch of time (CPU burnt, requests sent, memory).
// Tests never use it (the no_measurement_windows_in_tests test checks):
// they wait on a condition with WaitFor, or drive the code to where it
// would act and assert on a counter.
void MeasurementWindow(std::chrono::milliseconds window);

// Writes the sysfs files (NUMA nodes) the NVML stand-in's `fixture`
// implies under `root`. True on success.
bool WriteFixtureSysfs(const std::string& fixture, const std::string& root);

// Writes a driver root as an installed driver of `version` leaves it: the
// utility and compute libraries under /usr/lib/x86_64-linux-gnu with their
// SONAME and .so links, nvidia-smi and the MPS binaries under /usr/bin, and
// GSP firmware. Contents are placeholders. True on success.
bool WriteFakeDriverRoot(const std::string& root, const std::string& version);

// Writes /dev/nvidiactl, nvidia-uvm, nvidia-uvm-tools, /dev/nvidia<m> for
// each of `minors` and /dev/nvidia-caps/nvidia-cap<c> for each of `caps`
// under `root`: character devices (the driver's majors) when `char_devices`
// and mknod works here, else empty files. Returns whether they are devices.
bool WriteFakeDevRoot(const std::string& root, const std::vector<int>& minors,
                      const std::vector<int>& caps, bool char_devices);

// What a test changes in a child's environment: each entry replaces or adds
// a variable, and the value kUnset removes it. For the gpu-agent binary,
// build it with AgentEnv (agent_env.h), which also removes what the agent
// reads from the test process's own environment.
using EnvOverrides = std::map<std::string, std::string>;
inline constexpr char kUnset[] = "<unset>";

// The child's environment as "KEY=value" strings: the parent's with
// `overrides` applied.
std::vector<std::string> ChildEnvironment(const EnvOverrides& overrides);

// Overrides that remove every variable of the parent's but those in `keep`
// (as `env -i` with a few kept).
EnvOverrides UnsetAllBut(const std::set<std::string>& keep);

// A child process with captured stdout and stderr.
class Subprocess {
 public:
  // The child's environment is ChildEnvironment(env).
  Subprocess(std::vector<std::string> argv, const EnvOverrides& env = {});
  ~Subprocess();  // kills the child if still running

  pid_t pid() const { return pid_; }
  void Signal(int sig);
  // Waits for exit; returns the exit code, 128+signal if killed, or -1 on
  // timeout (the child is then killed).
  int Wait(std::chrono::milliseconds timeout = std::chrono::seconds(20));
  bool Running();

  std::string Stdout();
  std::string Stderr();
  // Waits until stderr contains `text`.
  bool WaitForStderr(const std::string& text,
                     std::chrono::milliseconds timeout = std::chrono::seconds(10));

 private:
  void Pump(int fd, std::string* into);

  pid_t pid_ = -1;
  int exit_code_ = -1;
  bool exited_ = false;
  std::mutex mu_;
  std::string out_, err_;
  std::thread out_thread_, err_thread_;
};

}  // namespace gpu_agent::testing

namespace gpu_agent::testing {

// /proc readings of a live process.
int CountOpenFds(pid_t pid);
int CountThreads(pid_t pid);
// Each thread's name (/proc/PID/task/*/comm), one entry per thread.
std::vector<std::string> ThreadNames(pid_t pid);
long CpuTicks(pid_t pid);  // user + system, in clock ticks
// Whether no thread of `pid` is running or runnable now: each is blocked
// (in poll, a futex, a sleep). A spinning thread never is.
bool AllThreadsAsleep(pid_t pid);
// Whether a lock request on the file at `path` (flock or fcntl) is blocked
// behind a lock someone else holds, as /proc/locks lists it.
bool SomeoneWaitsForLock(const std::string& path);

// Writes one line to a FIFO without blocking; false if no reader has it open.
bool WriteFifo(const std::string& path, const std::string& line);

// A TCP connection to 127.0.0.1:`port` with 10 s send and receive timeouts;
// -1 when it fails. `nonblocking`: the socket is, and a connect still in
// progress counts as made.
int ConnectLoopback(int port, bool nonblocking = false);

}  // namespace gpu_agent::testing

#endif  // GPU_AGENT_TESTS_SUPPORT_TEST_SUPPORT_H_
