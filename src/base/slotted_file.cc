#include "base/slotted_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/crc32c.h"
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

absl::Status Failed(const std::string& path, const char* step) {
  const int err = errno;
  return absl::Status(err == EACCES || err == EPERM || err == EROFS
                          ? absl::StatusCode::kPermissionDenied
                          : absl::StatusCode::kFailedPrecondition,
                      StrCat("cannot write ", path, ": ", step, ": ", std::strerror(err)));
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

SlottedRead ReadSlotted(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return SlottedRead();
  std::ostringstream text;
  text << in.rdbuf();
  return ParseSlotted(std::move(text).str());
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

SlottedWriter::~SlottedWriter() { Close(); }

void SlottedWriter::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  inode_ = 0;
}

absl::Status SlottedWriter::MakeFile(std::string_view record) {
  Close();
  const uint64_t seq = seq_ + 1;
  const std::string first = StrCat(Header(seq, record), record, "\n");
  const size_t slot = std::max(kMinSlot, (2 * first.size() + kPage - 1) / kPage * kPage);
  std::string content(2 * slot, ' ');
  content.replace(0, first.size(), first);
  content[slot - 1] = '\n';
  content[2 * slot - 1] = '\n';

  const size_t cut = path_.rfind('/');
  const std::string dir = cut == std::string::npos ? "." : path_.substr(0, cut + 1);
  const std::string tmp = StrCat(dir, ".", cut == std::string::npos ? path_ : path_.substr(cut + 1),
                                 ".tmp-", ::getpid());
  const int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Failed(path_, "creating a temporary file in its folder");
  auto fail = [&](const char* step) {
    absl::Status s = Failed(path_, step);
    ::close(fd);
    ::unlink(tmp.c_str());
    return s;
  };
  if (!WriteAllAt(fd, content, 0)) return fail("writing");
  if (::fchmod(fd, 0644) != 0 || ::fsync(fd) != 0) return fail("flushing");
  if (::rename(tmp.c_str(), path_.c_str()) != 0) {
    return fail("renaming the temporary file over it");
  }
  // The rename itself on the disk: a crash must not bring the old file back.
  if (const int d = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); d >= 0) {
    const bool synced = ::fsync(d) == 0;
    ::close(d);
    if (!synced) return fail("flushing its folder");
  } else {
    return fail("opening its folder to flush it");
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) return fail("reading what was written");
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
  // Replaced, removed or cut behind the writer's back: what it would
  // overwrite is no longer the file at `path`, or no longer whole.
  struct stat st;
  if (::stat(path_.c_str(), &st) != 0 || st.st_ino != inode_ ||
      static_cast<size_t>(st.st_size) != 2 * slot_size_) {
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
    return Failed(path_, "writing in place");
  }
  if (::fdatasync(fd_) != 0) return Failed(path_, "flushing");
  used_[slot] = need;
  ++seq_;
  newest_ = slot;
  return absl::OkStatus();
}

}  // namespace gpu_agent
