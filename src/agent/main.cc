// The gpu-agent executable: everything, subcommands and the daemon alike,
// goes through the CLI (agent/cli/cli.h); main stays this thin.
#include "agent/cli/cli.h"

int main(int argc, char** argv) { return gpu_agent::RunCli(argc, argv); }
