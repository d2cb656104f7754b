#include "base/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/strings.h"

extern char** environ;

namespace gpu_agent {
namespace {

// Whether child `pid` exits by `deadline` (it is not reaped here).
bool ExitsBefore(pid_t pid, std::chrono::steady_clock::time_point deadline) {
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) {
    // No pidfd (a kernel before 5.3): a blocking wait, as before.
    return true;
  }
  bool exited = false;
  for (;;) {
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p = {fd, POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    exited = n > 0;
    break;
  }
  ::close(fd);
  return exited;
}

}  // namespace

std::string ProgramResult::How() const {
  return exited ? StrCat("exit code ", exit_code) : StrCat("signal ", signal);
}

absl::StatusOr<ProgramResult> RunProgram(const std::vector<std::string>& argv_in,
                                         const ProgramRun& run) {
  if (argv_in.empty() || argv_in[0].empty()) {
    return absl::InvalidArgumentError("no program to run");
  }
  // Everything the child needs is built before fork: after it, in a
  // process with other threads, the child only calls what is
  // async-signal-safe until exec.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    const std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const std::string& mine : run.env) {
      if (mine.compare(0, name.size() + 1, name + "=") == 0) replaced = true;
    }
    if (!replaced) env_strings.push_back(entry);
  }
  for (const std::string& mine : run.env) env_strings.push_back(mine);
  std::vector<std::string> args = argv_in;
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string cannot = StrCat("cannot run ", args[0], ": ");

  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    return absl::ResourceExhaustedError(StrCat("pipe: ", std::strerror(errno)));
  }
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    const int err = errno;
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return absl::ResourceExhaustedError(StrCat("pipe: ", std::strerror(err)));
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) ::close(fd);
    return absl::ResourceExhaustedError(StrCat("fork: ", std::strerror(err)));
  }
  if (pid == 0) {
    // A process group of its own: on a timeout the whole group is killed,
    // whatever the program started (a plugin's helpers that would keep its
    // pipes open and outlive it).
    ::setpgid(0, 0);
    ::dup2(out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execvpe(argv[0], argv.data(), envp.data());
    const char* why = std::strerror(errno);
    (void)!::write(2, cannot.data(), cannot.size());
    (void)!::write(2, why, std::strlen(why));
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // as the child does: whichever runs first
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  ProgramResult result;
  const auto deadline = std::chrono::steady_clock::now() + run.timeout;
  bool out_open = true, err_open = true, too_much = false, timed_out = false;
  while (out_open || err_open) {
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd fds[2] = {{out_open ? out_pipe[0] : -1, POLLIN, 0},
                     {err_open ? err_pipe[0] : -1, POLLIN, 0}};
    if (::poll(fds, 2, static_cast<int>(left.count())) < 0 && errno != EINTR) {
      timed_out = true;  // cannot watch it any more: stopped, not waited for unbounded
      break;
    }
    char buf[4096];
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        (i == 0 ? out_open : err_open) = false;
        continue;
      }
      std::string& into = i == 0 ? result.out : result.err;
      if (into.size() + static_cast<size_t>(n) > run.max_output) {
        too_much = true;
        out_open = err_open = false;
        break;
      }
      into.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(out_pipe[0]);
  ::close(err_pipe[0]);
  // Its outputs closed, it may still run (one that closes them and hangs):
  // waited for until the deadline, through a pidfd (no polling loop), then
  // killed with its group like one that printed too long.
  if (!timed_out && !too_much && !ExitsBefore(pid, deadline)) timed_out = true;
  if (timed_out || too_much) ::kill(-pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return absl::DeadlineExceededError(
        StrCat(args[0], " did not finish within ", run.timeout.count(), " ms"));
  }
  if (too_much) {
    return absl::InvalidArgumentError(
        StrCat(args[0], " printed more than ", run.max_output, " bytes"));
  }
  result.exited = WIFEXITED(status);
  result.exit_code = result.exited ? WEXITSTATUS(status) : -1;
  result.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  return result;
}

}  // namespace gpu_agent
