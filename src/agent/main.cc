// The gpu-agent executable: everything, subcommands and the daemon alike,
// goes through the CLI (agent/cli/cli.h); main stays this thin.
#include <sys/stat.h>

#include "agent/cli/cli.h"

int main(int argc, char** argv) {
  // Whatever the agent creates is its own unless it says otherwise: sockets
  // are bound, and folders made, with no bit for others; files and folders
  // others must read (CDI specs) are given their mode explicitly.
  ::umask(S_IRWXG | S_IRWXO);
  return gpu_agent::RunCli(argc, argv);
}
