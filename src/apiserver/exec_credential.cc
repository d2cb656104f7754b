#include "apiserver/exec_credential.h"

#include <rapidjson/document.h>

#include <cstring>

#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "base/json.h"
#include "base/strings.h"
#include "base/subprocess.h"
#include "base/text.h"

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

absl::StatusOr<ExecCredential> ParseExecCredential(std::string_view text) {
  // What it printed is never quoted: it may be a token, or part of one.
  json::Document doc;
  if (absl::Status s =
          json::Parse(text, StrCat("what the exec plugin printed (", text.size(), " bytes)"), &doc);
      !s.ok()) {
    return absl::InvalidArgumentError(
        StrCat("the exec plugin printed no ExecCredential JSON: ", s.message()));
  }
  if (!doc.IsObject()) {
    return absl::InvalidArgumentError(
        StrCat("the exec plugin printed no ExecCredential JSON: what it printed (", text.size(),
               " bytes) is JSON but not an object"));
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
  ProgramRun run;
  run.timeout = std::chrono::seconds(30);
  run.max_output = kMaxOutput;
  for (const auto& [k, v] : exec.env) run.env.push_back(k + "=" + v);
  const std::string api =
      exec.api_version.empty() ? "client.authentication.k8s.io/v1beta1" : exec.api_version;
  run.env.push_back(StrCat("KUBERNETES_EXEC_INFO={\"apiVersion\":\"", api,
                           "\",\"kind\":\"ExecCredential\",\"spec\":{\"interactive\":false}}"));
  std::vector<std::string> argv = {exec.command};
  argv.insert(argv.end(), exec.args.begin(), exec.args.end());
  absl::StatusOr<ProgramResult> r = RunProgram(argv, run);
  if (!r.ok()) {
    if (r.status().code() == absl::StatusCode::kDeadlineExceeded) {
      return absl::DeadlineExceededError(
          StrCat("the exec plugin \"", exec.command, "\" did not finish within 30 s"));
    }
    if (r.status().code() == absl::StatusCode::kInvalidArgument) {
      return absl::InvalidArgumentError(
          StrCat("the exec plugin \"", exec.command, "\" printed more than 1 MiB"));
    }
    return r.status();
  }
  if (!r->ok()) {
    return absl::FailedPreconditionError(StrCat("the exec plugin \"", exec.command, "\" failed (",
                                                r->How(),
                                                "): ", Printable(StripWhitespace(r->err), 300)));
  }
  return ParseExecCredential(r->out);
}

}  // namespace gpu_agent::apiserver
