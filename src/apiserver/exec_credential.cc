#include "apiserver/exec_credential.h"

#include <fcntl.h>
#include <poll.h>
#include <rapidjson/document.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "base/strings.h"
#include "base/text.h"

extern char** environ;

namespace gpu_agent::apiserver {
namespace {

constexpr size_t kMaxOutput = 1 << 20;

// "2026-11-22T14:00:00Z" (RFC 3339, UTC or with an offset), years 0001 to
// 9999 as RFC 3339 writes them; a time past what system_clock holds (2262)
// saturates.
std::optional<std::chrono::system_clock::time_point> ParseRfc3339(const std::string& s) {
  absl::Time t;
  std::string err;
  if (!absl::ParseTime(absl::RFC3339_full, s, &t, &err)) return std::nullopt;
  const absl::TimeZone utc = absl::UTCTimeZone();
  if (t < absl::FromCivil(absl::CivilSecond(1, 1, 1), utc) ||
      t >= absl::FromCivil(absl::CivilSecond(10000, 1, 1), utc)) {
    return std::nullopt;
  }
  return absl::ToChronoTime(t);
}

}  // namespace

absl::StatusOr<ExecCredential> ParseExecCredential(std::string_view json) {
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseIterativeFlag>(json.data(), json.size());
  if (doc.HasParseError() || !doc.IsObject()) {
    return absl::InvalidArgumentError(
        StrCat("the exec plugin printed no ExecCredential JSON: \"", Printable(json, 100), "\""));
  }
  auto kind = doc.FindMember("kind");
  if (kind == doc.MemberEnd() || !kind->value.IsString() ||
      std::string_view(kind->value.GetString()) != "ExecCredential") {
    return absl::InvalidArgumentError("the exec plugin's output is not of kind ExecCredential");
  }
  auto status = doc.FindMember("status");
  if (status == doc.MemberEnd() || !status->value.IsObject()) {
    return absl::InvalidArgumentError("the exec plugin's ExecCredential has no status");
  }
  ExecCredential out;
  auto token = status->value.FindMember("token");
  if (token == status->value.MemberEnd() || !token->value.IsString() ||
      token->value.GetStringLength() == 0) {
    if (status->value.HasMember("clientCertificateData")) {
      return absl::UnimplementedError(
          "the exec plugin returned a client certificate; only token credentials are supported");
    }
    return absl::InvalidArgumentError("the exec plugin's ExecCredential has no status.token");
  }
  out.token.assign(token->value.GetString(), token->value.GetStringLength());
  if (absl::Status bad = CheckBearerToken(out.token); !bad.ok()) {
    return absl::InvalidArgumentError(
        StrCat("the exec plugin's ExecCredential status.token: ", bad.message()));
  }
  auto exp = status->value.FindMember("expirationTimestamp");
  if (exp != status->value.MemberEnd() && exp->value.IsString()) {
    out.expires = ParseRfc3339(std::string(exp->value.GetString(), exp->value.GetStringLength()));
    if (!out.expires) {
      return absl::InvalidArgumentError(StrCat(
          "the exec plugin's expirationTimestamp \"",
          Printable(std::string_view(exp->value.GetString(), exp->value.GetStringLength()), 60),
          "\" is not RFC 3339"));
    }
  }
  return out;
}

absl::StatusOr<ExecCredential> RunExecPlugin(const ExecConfig& exec) {
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    return absl::ResourceExhaustedError(StrCat("pipe: ", std::strerror(errno)));
  }
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) env_strings.emplace_back(*e);
  for (const auto& [k, v] : exec.env) env_strings.push_back(k + "=" + v);
  const std::string api =
      exec.api_version.empty() ? "client.authentication.k8s.io/v1beta1" : exec.api_version;
  env_strings.push_back(StrCat("KUBERNETES_EXEC_INFO={\"apiVersion\":\"", api,
                               "\",\"kind\":\"ExecCredential\",\"spec\":{\"interactive\":false}}"));
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string command = exec.command;
  std::vector<std::string> args = exec.args;
  argv.push_back(command.data());
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return absl::ResourceExhaustedError(StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    ::dup2(out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execvpe(argv[0], argv.data(), envp.data());
    std::fprintf(stderr, "cannot run: %s\n", std::strerror(errno));
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  std::string out, err;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  bool out_open = true, err_open = true, too_much = false, timed_out = false;
  while (out_open || err_open) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd fds[2] = {{out_open ? out_pipe[0] : -1, POLLIN, 0},
                     {err_open ? err_pipe[0] : -1, POLLIN, 0}};
    if (::poll(fds, 2, static_cast<int>(left.count())) < 0 && errno != EINTR) break;
    char buf[4096];
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        (i == 0 ? out_open : err_open) = false;
        continue;
      }
      std::string& into = i == 0 ? out : err;
      if (into.size() + static_cast<size_t>(n) > kMaxOutput) {
        too_much = true;
        out_open = err_open = false;
        break;
      }
      into.append(buf, static_cast<size_t>(n));
    }
  }
  if (timed_out || too_much) ::kill(pid, SIGKILL);
  ::close(out_pipe[0]);
  ::close(err_pipe[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (timed_out) {
    return absl::DeadlineExceededError(
        StrCat("the exec plugin \"", exec.command, "\" did not finish within 30 s"));
  }
  if (too_much) {
    return absl::InvalidArgumentError(
        StrCat("the exec plugin \"", exec.command, "\" printed more than 1 MiB"));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::FailedPreconditionError(StrCat("the exec plugin \"", exec.command, "\" failed (",
                                                WIFEXITED(status)
                                                    ? StrCat("exit code ", WEXITSTATUS(status))
                                                    : StrCat("signal ", WTERMSIG(status)),
                                                "): ", Printable(StripWhitespace(err), 300)));
  }
  return ParseExecCredential(out);
}

}  // namespace gpu_agent::apiserver
