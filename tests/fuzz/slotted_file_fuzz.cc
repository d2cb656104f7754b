// A checkpoint file as base/slotted_file reads it (the DRA checkpoint): any
// bytes give the newest intact record, the whole text of a plain file, or a
// problem naming each slot, and a record taken is one the file holds under
// a header whose CRC it matches.
#include <cstdio>
#include <string>

#include "base/crc32c.h"
#include "base/slotted_file.h"
#include "fuzz_support.h"

using namespace gpu_agent;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(fuzz::AsView(data, size));
  const SlottedRead r = ParseSlotted(text);
  fuzz::Check(r.found, "a text read is found");
  if (!r.slotted) {
    fuzz::Check(r.record == text, "a plain file handed back whole");
    return 0;
  }
  if (!r.problem.empty()) {
    fuzz::Check(r.record.empty(), "a record taken from a file with a problem");
    fuzz::Check(
        r.problem.find("slot 0: ") == 0 || r.problem.find(" bytes, not two") != std::string::npos,
        "a problem that names neither slot nor the size");
    return 0;
  }
  // Taken from one of the two halves, right after a header line carrying
  // its CRC.
  const size_t half = text.size() / 2;
  char crc[16];
  std::snprintf(crc, sizeof crc, "\"%08x\"}}\n", Crc32c(r.record));
  bool held = false;
  for (size_t start : {size_t{0}, half}) {
    const std::string_view slot = std::string_view(text).substr(start, half);
    const size_t eol = slot.find('\n');
    if (eol == std::string_view::npos) continue;
    if (slot.substr(eol + 1, r.record.size()) == r.record &&
        slot.substr(0, eol + 1).ends_with(crc)) {
      held = true;
    }
  }
  fuzz::Check(held, "a record the file does not hold under its CRC");
  return 0;
}
