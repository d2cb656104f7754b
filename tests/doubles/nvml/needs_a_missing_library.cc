// An "NVML" that needs a library nowhere on the loader's path: what a driver
// root missing one of libnvidia-ml's dependencies looks like to dlopen.
extern "C" int gpu_agent_test_gone_library_symbol();
extern "C" int nvmlInit_v2() { return gpu_agent_test_gone_library_symbol(); }
