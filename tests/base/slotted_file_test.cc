// SlottedWriter and ReadSlotted on real files: records read back, written in
// place (one inode for the file's life), a write spoilt in either slot
// leaving the record before it, a file replaced behind the writer's back,
// records that outgrow a slot, and files that are not of this format.
#include "base/slotted_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "base/crc32c.h"
#include "base/file_util.h"
#include "support/test_support.h"

namespace gpu_agent {
namespace {

using testing::ReadFile;
using testing::TempDir;

// Overwrites `n` bytes of `path` at `at` with `c`, as a write cut short
// leaves them.
void Spoil(const std::string& path, size_t at, size_t n, char c = 'X') {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(at));
  f << std::string(n, c);
}

TEST(SlottedFileTest, TheNewestRecordIsReadBackAndWrittenInPlace) {
  TempDir dir;
  const std::string path = dir.Join("record");
  SlottedWriter w(path);
  ASSERT_TRUE(w.Write(R"({"n":1})").ok());
  const ino_t inode = InodeOf(path);
  for (int n = 2; n <= 5; ++n) {
    ASSERT_TRUE(w.Write(std::to_string(n)).ok());
    const SlottedRead r = ReadSlotted(path);
    EXPECT_TRUE(r.found);
    EXPECT_TRUE(r.slotted);
    EXPECT_EQ(r.record, std::to_string(n));
    EXPECT_EQ(r.problem, "");
  }
  EXPECT_EQ(InodeOf(path), inode);  // never renamed after the first write
  EXPECT_EQ(w.files_made(), 1);
  EXPECT_FALSE(ReadSlotted(dir.Join("none")).found);
}

// A second writer of the same path (another process's, or one restarted)
// numbers past what is there, so a reader's stamp (inode, seq) never comes
// back, even where the new file gets the inode a freed one had: one that
// did not change means no one wrote.
TEST(SlottedFileTest, ANewWriterNumbersPastTheRecordsAlreadyThere) {
  TempDir dir;
  const std::string path = dir.Join("record");
  SlottedStamp seen;
  {
    SlottedWriter first(path);
    for (int n = 1; n <= 3; ++n) ASSERT_TRUE(first.Write(std::to_string(n)).ok());
    seen = StampSlotted(path);
    EXPECT_EQ(seen.seq, 3u);
  }
  SlottedWriter second(path);
  ASSERT_TRUE(second.Write("4").ok());
  const SlottedStamp now = StampSlotted(path);
  EXPECT_EQ(now.seq, 4u);
  EXPECT_EQ(second.stamp(), now);
  EXPECT_NE(now, seen);
  EXPECT_EQ(ReadSlotted(path).record, "4");
}

TEST(SlottedFileTest, AShorterRecordLeavesOnlySpacesBehindIt) {
  TempDir dir;
  const std::string path = dir.Join("record");
  SlottedWriter w(path);
  ASSERT_TRUE(w.Write(std::string(3000, 'a')).ok());
  ASSERT_TRUE(w.Write(std::string(3000, 'b')).ok());
  ASSERT_TRUE(w.Write("c").ok());  // slot 0 again, over the 3,000 a's
  const std::string text = ReadFile(path);
  EXPECT_EQ(text.find('a'), std::string::npos);
  EXPECT_EQ(ReadSlotted(path).record, "c");
}

TEST(SlottedFileTest, ASpoiltSlotLeavesTheRecordBeforeIt) {
  TempDir dir;
  const std::string path = dir.Join("record");
  SlottedWriter w(path);
  ASSERT_TRUE(w.Write("first").ok());   // slot 0
  ASSERT_TRUE(w.Write("second").ok());  // slot 1
  const size_t slot = std::filesystem::file_size(path) / 2;
  // The record of slot 1 damaged (its CRC fails): slot 0's is taken.
  const std::string text = ReadFile(path);
  const size_t at = text.find("second");
  ASSERT_NE(at, std::string::npos);
  Spoil(path, at, 3);
  EXPECT_EQ(ReadSlotted(path).record, "first");
  // Its header damaged instead: the same.
  ASSERT_TRUE(w.Write("third").ok());   // slot 0
  ASSERT_TRUE(w.Write("fourth").ok());  // slot 1
  Spoil(path, slot, 10);
  EXPECT_EQ(ReadSlotted(path).record, "third");
  // Cut short: the newline after the record gone.
  ASSERT_TRUE(w.Write("fifth").ok());  // slot 0
  ASSERT_TRUE(w.Write("sixth").ok());  // slot 1, whole again
  EXPECT_EQ(ReadSlotted(path).record, "sixth");
  Spoil(path, ReadFile(path).find("sixth") + 5, 1, ' ');
  EXPECT_EQ(ReadSlotted(path).record, "fifth");
  // Slot 0 spoilt at its start too: nothing intact, each slot's fault named.
  Spoil(path, 0, 10);
  const SlottedRead r = ReadSlotted(path);
  EXPECT_TRUE(r.slotted);
  EXPECT_EQ(r.record, "");
  EXPECT_EQ(r.problem, "slot 0: a header that cannot be read; slot 1: record 6 cut short");
}

TEST(SlottedFileTest, AFileReplacedOrRemovedBehindTheWritersBackIsMadeAgain) {
  TempDir dir;
  const std::string path = dir.Join("record");
  SlottedWriter w(path);
  ASSERT_TRUE(w.Write("one").ok());
  std::filesystem::remove(path);
  ASSERT_TRUE(w.Write("two").ok());
  EXPECT_EQ(ReadSlotted(path).record, "two");
  dir.Write("record", "someone else's");  // the same file, cut and written over
  ASSERT_TRUE(w.Write("three").ok());
  EXPECT_EQ(ReadSlotted(path).record, "three");
  EXPECT_EQ(w.files_made(), 3);
}

TEST(SlottedFileTest, ARecordThatOutgrowsItsSlotGetsALargerFile) {
  TempDir dir;
  const std::string path = dir.Join("record");
  SlottedWriter w(path);
  ASSERT_TRUE(w.Write("small").ok());
  const auto size = std::filesystem::file_size(path);
  const std::string big(size, 'z');
  ASSERT_TRUE(w.Write(big).ok());
  EXPECT_GT(std::filesystem::file_size(path), 2 * size);
  EXPECT_EQ(ReadSlotted(path).record, big);
  ASSERT_TRUE(w.Write("small again").ok());
  EXPECT_EQ(ReadSlotted(path).record, "small again");
  EXPECT_EQ(w.files_made(), 2);
}

TEST(SlottedFileTest, FilesNotOfThisFormatAreNamedOrHandedBackWhole) {
  TempDir dir;
  // What an older version wrote: the record itself.
  dir.Write("plain", R"({"version":1,"claims":{}})");
  SlottedRead r = ReadSlotted(dir.Join("plain"));
  EXPECT_TRUE(r.found);
  EXPECT_FALSE(r.slotted);
  EXPECT_EQ(r.record, R"({"version":1,"claims":{}})");
  dir.Write("empty", "");
  r = ReadSlotted(dir.Join("empty"));
  EXPECT_TRUE(r.slotted);
  EXPECT_EQ(r.problem, "0 bytes, not two slots of one size");
  dir.Write("odd", "abc");
  EXPECT_EQ(ReadSlotted(dir.Join("odd")).problem, "3 bytes, not two slots of one size");
  dir.Write("garbage", "garbage!");
  EXPECT_EQ(ReadSlotted(dir.Join("garbage")).problem,
            "slot 0: no header line; slot 1: no header line");
}

TEST(SlottedFileTest, AFolderThatCannotBeWrittenIsAnErrorNamingThePath) {
  TempDir dir;
  const std::string path = dir.Join("missing/record");
  SlottedWriter w(path);
  const absl::Status s = w.Write("x");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("creating a temporary file"), std::string::npos) << s.message();
}

TEST(SlottedFileTest, Crc32cIsCastagnolis) {
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);  // the standard check value
  EXPECT_EQ(Crc32c(""), 0u);
}

}  // namespace
}  // namespace gpu_agent
