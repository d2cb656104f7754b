// The library needs_a_missing_library.cc links to, kept off every path.
extern "C" int gpu_agent_test_gone_library_symbol() { return 0; }
