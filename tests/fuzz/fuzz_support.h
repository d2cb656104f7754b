// Helpers shared by the libFuzzer targets: a private temp folder, input
// splitting, and a check that aborts (libFuzzer reports an abort as a crash
// with the input that caused it).
#ifndef GPU_AGENT_TESTS_FUZZ_FUZZ_SUPPORT_H_
#define GPU_AGENT_TESTS_FUZZ_FUZZ_SUPPORT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpu_agent::fuzz {

// A folder made once per process under $TMPDIR (or /tmp), removed at exit.
const std::string& TempDir();

// Writes `data` to `path`, replacing it; aborts on failure.
void WriteFileOrDie(const std::string& path, std::string_view data);

// Splits on `sep`, keeping empty pieces; at most `max` pieces (the last one
// keeps the rest).
std::vector<std::string_view> Split(std::string_view data, char sep, size_t max = SIZE_MAX);

// Only errors are logged: a warning per refused input would swamp the run.
void QuietLogs();

// Prints `what` and aborts when `ok` is false.
void Check(bool ok, std::string_view what);

inline std::string_view AsView(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace gpu_agent::fuzz

#endif  // GPU_AGENT_TESTS_FUZZ_FUZZ_SUPPORT_H_
