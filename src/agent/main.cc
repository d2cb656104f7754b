#include "agent/cli.h"

int main(int argc, char** argv) { return gpu_agent::RunCli(argc, argv); }
