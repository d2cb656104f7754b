// The gpu-agent executable: everything, subcommands and the daemon alike,
// goes through the CLI (agent/cli/cli.h); main stays this thin.
#include <malloc.h>
#include <sys/stat.h>

#include "agent/cli/cli.h"

int main(int argc, char** argv) {
  // Whatever the agent creates is its own unless it says otherwise: sockets
  // are bound, and folders made, with no bit for others; files and folders
  // others must read (CDI specs) are given their mode explicitly.
  ::umask(S_IRWXG | S_IRWXO);
  // One malloc arena for every thread. glibc gives each thread that meets a
  // busy arena one of its own (up to 8 per core), each with its own free
  // lists and pages; the agent's threads allocate little and seldom at the
  // same time, so what their own arenas held was private memory kept apart
  // for nothing (bench/RESULTS.md, "Footprint"). Before any thread starts.
  ::mallopt(M_ARENA_MAX, 1);
  return gpu_agent::RunCli(argc, argv);
}
