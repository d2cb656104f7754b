// A small record kept durably in one file that is rewritten in place, never
// renamed: what a checkpoint written on every request needs. Replacing a file
// by a rename (write, fsync, rename) makes the file system commit its journal
// on every write; overwriting blocks the file already owns and flushing them
// (fdatasync) does not, and costs a fraction of it.
//
// The file holds two slots of equal size. A write goes to the slot that does
// not hold the newest record, with a sequence number one higher and a CRC-32C
// of the record, then is flushed; a write cut short by a crash spoils only
// that slot, and a reader takes the intact slot with the higher number: the
// record before the write, or the record after it, never a part.
//
// Each slot is text, so the file reads as JSON values one after another:
//   {"slot":{"seq":7,"length":1234,"crc32c":"9a3e01f2"}}
//   <the record, `length` bytes>
// then spaces up to the slot's end (`jq . FILE` prints both slots).
//
// The file is made whole (both slots written, flushed, renamed into place,
// the folder flushed) the first time, when it was replaced, removed or cut
// behind the writer's back, and when a record outgrows a slot (then with
// slots twice as large as it needs).
#ifndef GPU_AGENT_BASE_SLOTTED_FILE_H_
#define GPU_AGENT_BASE_SLOTTED_FILE_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace gpu_agent {

struct SlottedRead {
  bool found = false;    // a file is there
  bool slotted = false;  // ... in this format; otherwise `record` is its whole text
  std::string record;    // the newest intact record
  // Why no record could be taken from a file in this format (both slots
  // spoilt), naming each slot's fault; empty otherwise.
  std::string problem;
};

// A file past this is not read (a record of a few KiB a claim fits a node's
// claims many times over).
inline constexpr size_t kMaxSlottedFileBytes = 16u << 20;

// Reads `path`. A file that is not in the slotted format (one an older
// version wrote as plain text) is handed back whole, `slotted` false. A
// link, FIFO, device or a file past `max_bytes` at `path` is not read: it
// is `found`, with the reason as its `problem`.
SlottedRead ReadSlotted(const std::string& path, size_t max_bytes = kMaxSlottedFileBytes);
// The same, of a file's whole text (`found` true).
SlottedRead ParseSlotted(std::string text);

// What tells one record at a path from another without reading it: the
// file's inode and the sequence number of its newest intact slot header
// (0 for a file not in slots). A writer writes in place only to the file
// it made, with a higher number each time, so a stamp that has not changed
// means no one has written since.
struct SlottedStamp {
  ino_t inode = 0;  // 0: no file
  uint64_t seq = 0;
  friend bool operator==(const SlottedStamp&, const SlottedStamp&) = default;
};
// Reads the two slots' header lines only (a link is not followed).
SlottedStamp StampSlotted(const std::string& path);

class SlottedWriter {
 public:
  // The file gets exactly `mode` (0600: the agent's own state).
  explicit SlottedWriter(std::string path, mode_t mode = 0600)
      : path_(std::move(path)), mode_(mode) {}
  ~SlottedWriter();
  SlottedWriter(const SlottedWriter&) = delete;
  SlottedWriter& operator=(const SlottedWriter&) = delete;

  // Writes `record` and returns once it is on the disk. The folder must
  // exist. Writes in place only to the file it made (never through a link,
  // nor to a file with another name linked to it); anything else at `path`
  // is replaced by a whole new file. Errors name the path, the step and the system's reason; after
  // a failed write a reader finds the newest record written before it, or (when only the flush
  // failed) that record itself.
  absl::Status Write(std::string_view record);

  const std::string& path() const { return path_; }
  // The stamp of the record it last wrote (StampSlotted's for the file
  // then); inode 0 before its first write.
  SlottedStamp stamp() const { return {inode_, seq_}; }
  // Times the file was made whole (see above): once, for a writer whose
  // file stays in place and whose records fit.
  int files_made() const { return files_made_; }

 private:
  absl::Status MakeFile(std::string_view record);
  void Close();

  const std::string path_;
  const mode_t mode_;
  int fd_ = -1;
  ino_t inode_ = 0;
  size_t slot_size_ = 0;
  uint64_t seq_ = 0;         // the newest record's
  int newest_ = 0;           // the slot that holds it
  size_t used_[2] = {0, 0};  // bytes up to each slot's last non-space
  int files_made_ = 0;
};

}  // namespace gpu_agent

#endif  // GPU_AGENT_BASE_SLOTTED_FILE_H_
