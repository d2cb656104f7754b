// Command-line argument vectors: CLI11 parsing of every subcommand and flag,
// then the config load they drive (file named by --config, env, flags).
// The subcommands themselves are replaced by stubs that check what reached
// them: a fuzz run must not start the agent or call an API server.
//
// Input: the arguments after "gpu-agent", separated by NUL.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "agent/cli/cli.h"
#include "fuzz_support.h"

using namespace gpu_agent;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::QuietLogs();
  // --help and the subcommands print to stdout; a --config naming
  // /dev/stdin must not wait for a terminal.
  if (std::freopen("/dev/null", "w", stdout) == nullptr) std::abort();
  const int null_in = ::open("/dev/null", O_RDONLY);
  if (null_in < 0 || ::dup2(null_in, STDIN_FILENO) < 0) std::abort();
  ::close(null_in);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args = {"gpu-agent"};
  if (size > 0) {
    for (std::string_view a : fuzz::Split(fuzz::AsView(data, size), '\0', 64)) {
      args.emplace_back(a);
    }
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  CliCommands stubs;
  auto loaded_ok = [](const LoadedConfig& l) {
    fuzz::Check(!l.config.resource_name.empty(), "a loaded config without a resource name");
    return 0;
  };
  stubs.devices = [&](const LoadedConfig& l, const std::string&) { return loaded_ok(l); };
  stubs.capacity = [&](const LoadedConfig& l, const CapacityRequest&) { return loaded_ok(l); };
  stubs.labels = [&](const LoadedConfig& l, const LabelsRequest&) { return loaded_ok(l); };
  stubs.cdi_generate = [&](const LoadedConfig& l, const std::string&, const std::string&) {
    return loaded_ok(l);
  };
  stubs.config = [&](LoadedConfig& l, const ConfigCommandOptions&) {
    fuzz::Check(!ConfigReport(l).empty(), "empty config report");
    return 0;
  };
  stubs.run = [&](const ConfigRequest&, LoadedConfig l) { return loaded_ok(l); };
  const int code = RunCli(static_cast<int>(args.size()), argv.data(), stubs);
  fuzz::Check(code == 0 || code == 1 || code == 2, "an exit code other than 0, 1 or 2");
  // RunCli applies the loaded config's log settings; later inputs start quiet.
  fuzz::QuietLogs();
  return 0;
}
