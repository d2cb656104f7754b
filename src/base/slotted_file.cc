#include "base/slotted_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>

#include "base/crc32c.h"
#include "base/file_util.h"
#include "base/strings.h"

namespace gpu_agent {
namespace {

constexpr size_t kPage = 4096;
constexpr size_t kMinSlot = 4 * kPage;
// A file an older version wrote: the record itself, plain.
constexpr char kPlainTag[] = "{\"version\"";

// The header line, newline included; the one spelling a reader accepts.
std::string HeaderOf(uint64_t seq, size_t length, uint32_t crc) {
  char buf[96];
  std::snprintf(buf, sizeof buf,
                "{\"slot\":{\"seq\":%" PRIu64 ",\"length\":%zu,\"crc32c\":\"%08x\"}}\n", seq,
                length, crc);
  return buf;
}

std::string Header(uint64_t seq, std::string_view record) {
  return HeaderOf(seq, record.size(), Crc32c(record));
}

// One slot's record, or why it has none ("empty" for a slot never written).
struct Slot {
  bool intact = false;
  uint64_t seq = 0;
  std::string record;
  std::string fault;
};

Slot ParseSlot(std::string_view region) {
  Slot s;
  if (region.find_first_not_of(" \n") == std::string_view::npos) {
    s.fault = "empty";
    return s;
  }
  const size_t eol = region.find('\n');
  if (eol == std::string_view::npos || eol > 95) {
    s.fault = "no header line";
    return s;
  }
  const std::string header(region.substr(0, eol));
  uint64_t seq = 0;
  size_t length = 0;
  unsigned crc = 0;
  int end = -1;
  if (std::sscanf(header.c_str(),
                  "{\"slot\":{\"seq\":%" SCNu64 ",\"length\":%zu,\"crc32c\":\"%8x\"}}%n", &seq,
                  &length, &crc, &end) != 3 ||
      end != static_cast<int>(header.size()) ||
      // scanf takes signs, spaces, "0x" and upper case; a header is only
      // ever written one way.
      HeaderOf(seq, length, crc) != StrCat(header, "\n")) {
    s.fault = "a header that cannot be read";
    return s;
  }
  const size_t after = region.size() - eol - 1;  // bytes past the header line
  if (length >= after || region[eol + 1 + length] != '\n') {
    s.fault = StrCat("record ", seq, " cut short");
    return s;
  }
  std::string_view record = region.substr(eol + 1, length);
  if (Crc32c(record) != crc) {
    s.fault = StrCat("record ", seq, " fails its CRC");
    return s;
  }
  s.intact = true;
  s.seq = seq;
  s.record = std::string(record);
  return s;
}

bool WriteAllAt(int fd, std::string_view data, off_t at) {
  for (size_t done = 0; done < data.size();) {
    const ssize_t n =
        ::pwrite(fd, data.data() + done, data.size() - done, at + static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

SlottedRead ReadSlotted(const std::string& path, size_t max_bytes) {
  // A link, a FIFO or a file past the cap planted at the path is not read:
  // it is reported as the file's problem.
  absl::StatusOr<std::string> text = ReadFileBounded(path, max_bytes, Links::kRefuse);
  if (!text.ok()) {
    SlottedRead out;
    if (text.status().code() == absl::StatusCode::kNotFound) return out;
    out.found = true;
    out.problem = std::string(text.status().message());
    return out;
  }
  return ParseSlotted(*std::move(text));
}

SlottedRead ParseSlotted(std::string all) {
  SlottedRead out;
  out.found = true;
  if (all.starts_with(kPlainTag)) {
    out.record = std::move(all);
    return out;
  }
  out.slotted = true;
  if (all.empty() || all.size() % 2 != 0) {
    out.problem = StrCat(all.size(), " bytes, not two slots of one size");
    return out;
  }
  const size_t size = all.size() / 2;
  const Slot a = ParseSlot(std::string_view(all).substr(0, size));
  const Slot b = ParseSlot(std::string_view(all).substr(size));
  const Slot* best = nullptr;
  for (const Slot* s : {&a, &b}) {
    if (s->intact && (best == nullptr || s->seq > best->seq)) best = s;
  }
  if (best == nullptr) {
    out.problem = StrCat("slot 0: ", a.fault, "; slot 1: ", b.fault);
    return out;
  }
  out.record = best->record;
  return out;
}

SlottedStamp StampSlotted(const std::string& path) {
  SlottedStamp out;
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return out;
  struct stat st;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    out.inode = st.st_ino;
    const size_t size = static_cast<size_t>(st.st_size);
    for (size_t at : {size_t{0}, size / 2}) {
      if (size == 0 || size % 2 != 0) break;
      char buf[96];
      const ssize_t n = ::pread(fd, buf, sizeof buf - 1, static_cast<off_t>(at));
      if (n <= 0) continue;
      buf[n] = '\0';
      uint64_t seq = 0;
      if (std::sscanf(buf, "{\"slot\":{\"seq\":%" SCNu64, &seq) == 1) {
        out.seq = std::max(out.seq, seq);
      }
    }
  }
  ::close(fd);
  return out;
}

SlottedWriter::~SlottedWriter() { Close(); }

void SlottedWriter::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  inode_ = 0;
}

absl::Status SlottedWriter::MakeFile(std::string_view record) {
  Close();
  // Past any record at the path too, not only this writer's: a reader's
  // stamp (inode, seq) never comes back, even where a new file gets a freed
  // inode again (another process's writer, restarted, starts from 0).
  const uint64_t seq = std::max(seq_, StampSlotted(path_).seq) + 1;
  const std::string first = StrCat(Header(seq, record), record, "\n");
  const size_t slot = std::max(kMinSlot, (2 * first.size() + kPage - 1) / kPage * kPage);
  std::string content(2 * slot, ' ');
  content.replace(0, first.size(), first);
  content[slot - 1] = '\n';
  content[2 * slot - 1] = '\n';

  if (absl::Status s = WriteFileAtomically(path_, content, Durability::kFlushed, mode_); !s.ok()) {
    return s;
  }
  // Kept open for the writes in place; what it opened must be what was
  // written, not a link or a file put there since.
  const int fd = ::open(path_.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return WriteError(path_, "opening it after writing it");
  struct stat st;
  absl::Status opened =
      ::fstat(fd, &st) != 0 ? WriteError(path_, "reading back what was written")
      : !S_ISREG(st.st_mode) || st.st_nlink != 1 || st.st_uid != ::geteuid() ||
              static_cast<size_t>(st.st_size) != content.size()
          ? absl::FailedPreconditionError(
                StrCat("cannot write ", path_, ": another file was put there as it was written"))
          : absl::OkStatus();
  if (!opened.ok()) {
    ::close(fd);
    return opened;
  }
  fd_ = fd;
  inode_ = st.st_ino;
  slot_size_ = slot;
  seq_ = seq;
  newest_ = 0;
  used_[0] = first.size();
  used_[1] = 0;
  ++files_made_;
  return absl::OkStatus();
}

absl::Status SlottedWriter::Write(std::string_view record) {
  if (fd_ < 0) return MakeFile(record);
  // Replaced (by a link too: lstat), removed, linked elsewhere or cut
  // behind the writer's back: what it would overwrite is no longer the file
  // at `path` alone, or no longer whole.
  struct stat st;
  if (::lstat(path_.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_ino != inode_ ||
      st.st_nlink != 1 || static_cast<size_t>(st.st_size) != 2 * slot_size_) {
    return MakeFile(record);
  }
  const std::string header = Header(seq_ + 1, record);
  const size_t need = header.size() + record.size() + 1;
  if (need > slot_size_ - 1) return MakeFile(record);
  const int slot = 1 - newest_;
  std::string buf = StrCat(header, record, "\n");
  // What the slot held past this record becomes spaces, so the file reads
  // as its records alone.
  if (used_[slot] > need) buf.append(used_[slot] - need, ' ');
  used_[slot] = std::max(used_[slot], need);
  if (!WriteAllAt(fd_, buf, static_cast<off_t>(slot * slot_size_))) {
    return WriteError(path_, "writing in place");
  }
  if (::fdatasync(fd_) != 0) return WriteError(path_, "flushing");
  used_[slot] = need;
  ++seq_;
  newest_ = slot;
  return absl::OkStatus();
}

}  // namespace gpu_agent
