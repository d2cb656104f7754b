// What base offers against input from outside the process: the bounded JSON
// parse, file reads that take only regular files of bounded size, writes
// that never follow a link someone planted, folders no one else may write,
// the one backoff rule, and programs killed with everything they started.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include "base/backoff.h"
#include "base/file_util.h"
#include "base/json.h"
#include "base/slotted_file.h"
#include "base/subprocess.h"
#include "support/fake_clock.h"
#include "support/test_support.h"

namespace gpu_agent {
namespace {

using testing::ReadFile;
using testing::TempDir;
using testing::WaitFor;

// --- JSON ---

TEST(JsonParseTest, DeepNestingIsRefusedWithoutRecursion) {
  // 200,000 levels in 400 KB: RapidJSON's recursive parser overflows the
  // stack on this (SIGSEGV); the bounded parse refuses it in one pass.
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  rapidjson::Document d;
  absl::Status s = json::Parse(deep, "a watch event", &d);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "a watch event nests arrays and objects deeper than 128 levels");
  EXPECT_TRUE(d.IsNull());
  // Unbalanced, too: an opening run alone.
  EXPECT_FALSE(json::Parse(std::string(200000, '{'), "x", &d).ok());
  // As deep as allowed is parsed; one more is not.
  const std::string at_limit = std::string(128, '[') + std::string(128, ']');
  EXPECT_TRUE(json::Parse(at_limit, "x", &d).ok());
  const std::string past = std::string(129, '[') + std::string(129, ']');
  EXPECT_FALSE(json::Parse(past, "x", &d).ok());
}

TEST(JsonParseTest, BracketsInStringsDoNotCount) {
  const std::string text = R"({"a":"[[[[[[[[\"{{{{","b":[1,{"c":"]]]"}]})";
  EXPECT_EQ(json::NestingDepth(text, 100), 3);
  rapidjson::Document d;
  ASSERT_TRUE(json::Parse(text, "x", &d, {1024, 3}).ok());
  EXPECT_EQ(json::String(d, "a"), "[[[[[[[[\"{{{{");
  EXPECT_FALSE(json::Parse(text, "x", &d, {1024, 2}).ok());
}

TEST(JsonParseTest, SizeAndSyntaxErrorsSayWhatAndWhere) {
  rapidjson::Document d;
  absl::Status big = json::Parse(std::string(2000, ' '), "the Node", &d, {1000, 10});
  EXPECT_EQ(big.message(), "the Node of 2000 bytes is over the 1000-byte limit");
  absl::Status bad = json::Parse("{\"a\": 1,\n \"b\": [1, 2,, 3]}", "the claim", &d);
  EXPECT_EQ(bad.message(), "the claim is not valid JSON (Invalid value. at line 2, column 13)");
  EXPECT_TRUE(d.IsNull());
}

TEST(JsonParseTest, MessageOfReadsAStatusOrQuotesTheStartPrintably) {
  EXPECT_EQ(json::MessageOf(R"({"kind":"Status","message":"nodes \"x\" not found"})"),
            "nodes \"x\" not found");
  EXPECT_EQ(json::MessageOf("<html>\x01 gateway</html>", 12), "<html>\\x01 gate...");
  // Deeply nested garbage from a broken server is quoted, not parsed.
  EXPECT_EQ(json::MessageOf(std::string(100000, '['), 5), "[[[[[...");
}

// --- Reading files ---

TEST(ReadFileBoundedTest, TakesOnlyRegularFilesOfBoundedSize) {
  TempDir dir;
  const std::string file = dir.Write("ok", "hello");
  EXPECT_EQ(*ReadFileBounded(file, 5), "hello");
  absl::StatusOr<std::string> big = ReadFileBounded(file, 4);
  EXPECT_EQ(big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(big.status().message().find("holds 5 bytes, over the 4-byte limit"), std::string::npos);
  // A device that never ends (a token file named /dev/zero once took the
  // agent to 4.2 GB).
  absl::StatusOr<std::string> zero = ReadFileBounded("/dev/zero", 1 << 20);
  EXPECT_NE(zero.status().message().find("it is a device, not a regular file"), std::string::npos)
      << zero.status();
  EXPECT_EQ(ReadFileBounded(dir.path(), 10).status().message(),
            "cannot read \"" + dir.path() + "\": it is a folder, not a regular file");
  EXPECT_EQ(ReadFileBounded(dir.Join("none"), 10).status().code(), absl::StatusCode::kNotFound);
}

TEST(ReadFileBoundedTest, AFifoIsRefusedAtOnceNotWaitedOn) {
  TempDir dir;
  const std::string fifo = dir.Join("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // No writer ever comes: a blocking open would hang here for good.
  absl::StatusOr<std::string> r = ReadFileBounded(fifo, 100);
  EXPECT_EQ(r.status().message(), "cannot read \"" + fifo + "\": it is a FIFO, not a regular file");
}

TEST(ReadFileBoundedTest, ALinkIsFollowedOnlyWhereAsked) {
  TempDir dir;
  const std::string target = dir.Write("target", "secret");
  const std::string link = dir.Join("link");
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  EXPECT_EQ(*ReadFileBounded(link, 100, Links::kFollow), "secret");  // a projected token
  absl::StatusOr<std::string> refused = ReadFileBounded(link, 100, Links::kRefuse);
  EXPECT_EQ(refused.status().message(),
            "cannot read \"" + link + "\": it is a symbolic link, which is not followed here");
}

// --- Writing files ---

// Another user's file the agent must never write through a link: root-owned
// 0600 in the attack; here the test's own, with its content and mode
// checked afterwards.
std::string Victim(const TempDir& dir) {
  const std::string v = dir.Write("victim", "precious");
  ::chmod(v.c_str(), 0600);
  return v;
}

TEST(WriteFileAtomicallyTest, ALinkPlantedAtTheOldTemporaryNameIsNeverFollowed) {
  TempDir dir;
  const std::string victim = Victim(dir);
  const std::string path = dir.Join("spec.json");
  // The name the agent used to write through: predictable from its pid.
  const std::string old_tmp = dir.Join(".spec.json.tmp-" + std::to_string(::getpid()));
  ASSERT_EQ(::symlink(victim.c_str(), old_tmp.c_str()), 0);
  ASSERT_TRUE(WriteFileAtomically(path, "{}").ok());
  EXPECT_EQ(ReadFile(path), "{}");
  EXPECT_EQ(ReadFile(victim), "precious");
  struct stat st;
  ASSERT_EQ(::stat(victim.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // Only the agent's file and the planted link: no temporary file left.
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 3);
}

TEST(WriteFileAtomicallyTest, ALinkAtThePathIsReplacedNotWrittenThrough) {
  TempDir dir;
  const std::string victim = Victim(dir);
  const std::string path = dir.Join("checkpoint.json");
  ASSERT_EQ(::symlink(victim.c_str(), path.c_str()), 0);
  ASSERT_TRUE(WriteFileAtomically(path, "mine", Durability::kFlushed, 0600).ok());
  struct stat st;
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(ReadFile(victim), "precious");
}

TEST(WriteFileAtomicallyTest, TheModeIsExactlyWhatIsAskedWhateverTheUmask) {
  TempDir dir;
  const mode_t old = ::umask(0077);
  EXPECT_TRUE(WriteFileAtomically(dir.Join("a"), "x").ok());  // 0644 by default
  ::umask(0);
  EXPECT_TRUE(WriteFileAtomically(dir.Join("b"), "x", Durability::kRenamedOnly, 0600).ok());
  ::umask(old);
  struct stat a, b;
  ASSERT_EQ(::stat(dir.Join("a").c_str(), &a), 0);
  ASSERT_EQ(::stat(dir.Join("b").c_str(), &b), 0);
  EXPECT_EQ(a.st_mode & 0777, 0644u);
  EXPECT_EQ(b.st_mode & 0777, 0600u);
}

TEST(SlottedFileHostileTest, TheCheckpointIsNeverWrittenThroughALinkOrAHardLink) {
  TempDir dir;
  const std::string victim = Victim(dir);
  const std::string path = dir.Join("checkpoint.json");
  SlottedWriter w(path);
  ASSERT_TRUE(w.Write("{\"n\":1}").ok());
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);  // the agent's own state
  // Someone swaps the checkpoint for a link to another file: the next write
  // makes a new file at the path, the other file keeps its content.
  ASSERT_EQ(::unlink(path.c_str()), 0);
  ASSERT_EQ(::symlink(victim.c_str(), path.c_str()), 0);
  ASSERT_TRUE(w.Write("{\"n\":2}").ok());
  EXPECT_EQ(ReadFile(victim), "precious");
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(ReadSlotted(path).record, "{\"n\":2}");
  // A hard link to the checkpoint elsewhere: written in place, the other
  // name would change too; the writer makes a whole new file instead.
  const std::string other = dir.Join("other");
  ASSERT_EQ(::link(path.c_str(), other.c_str()), 0);
  const std::string before = ReadFile(other);
  ASSERT_TRUE(w.Write("{\"n\":3}").ok());
  EXPECT_EQ(ReadFile(other), before);
  EXPECT_EQ(ReadSlotted(path).record, "{\"n\":3}");
}

TEST(SlottedFileHostileTest, ALinkOrFifoAtTheCheckpointIsReportedNotRead) {
  TempDir dir;
  const std::string link = dir.Join("link.json");
  ASSERT_EQ(::symlink("/dev/zero", link.c_str()), 0);
  SlottedRead r = ReadSlotted(link);
  EXPECT_TRUE(r.found);
  EXPECT_NE(r.problem.find("symbolic link"), std::string::npos) << r.problem;
  const std::string fifo = dir.Join("fifo.json");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  r = ReadSlotted(fifo);
  EXPECT_TRUE(r.found);
  EXPECT_NE(r.problem.find("FIFO"), std::string::npos) << r.problem;
  EXPECT_FALSE(ReadSlotted(dir.Join("none")).found);
}

// --- Folders ---

TEST(TrustedFolderTest, AFolderOthersCanWriteIsRefused) {
  TempDir dir;
  const std::string f = dir.Join("cdi");
  ASSERT_TRUE(MakeTrustedFolder(f, 0755, "cdi.specDir").ok());
  struct stat st;
  ASSERT_EQ(::stat(f.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  for (mode_t bad : {0775, 0757, 01777}) {
    ASSERT_EQ(::chmod(f.c_str(), bad), 0);
    absl::Status s = CheckTrustedFolder(f, "cdi.specDir");
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << std::oct << bad;
    EXPECT_NE(s.message().find("cdi.specDir: the folder \"" + f + "\""), std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find("chmod go-w"), std::string::npos) << s.message();
  }
  ASSERT_EQ(::chmod(f.c_str(), 0750), 0);
  EXPECT_TRUE(CheckTrustedFolder(f, "x").ok());
  EXPECT_FALSE(CheckTrustedFolder(dir.Write("file", ""), "x").ok());
}

TEST(TrustedFolderTest, MadeWithItsModeWhateverTheUmask) {
  TempDir dir;
  const mode_t old = ::umask(0077);
  const std::string f = dir.Join("a/b/plugin");
  const absl::Status s = MakeTrustedFolder(f, 0750, "dra.pluginDir");
  ::umask(old);
  ASSERT_TRUE(s.ok()) << s;
  struct stat st;
  ASSERT_EQ(::stat(f.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0750u);
  // Its missing parents as mkdir -p makes them under the usual umask.
  for (const char* parent : {"a", "a/b"}) {
    ASSERT_EQ(::stat(dir.Join(parent).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0755u) << parent;
  }
}

// --- Backoff ---

TEST(BackoffTest, GrowsThroughAStormAndStartsOverOnlyAfterQuiet) {
  testing::FakeClock clock;
  using Ms = std::chrono::milliseconds;
  Backoff b(Ms(100), Ms(1000), Ms(-1), Ms(0), &clock);
  auto within = [](Ms got, Ms want) { return got >= want * 8 / 10 && got <= want * 12 / 10; };
  // A storm: each try follows the last by its wait.
  for (Ms want : {Ms(100), Ms(100), Ms(200), Ms(400), Ms(800), Ms(1000), Ms(1000)}) {
    const Ms got = b.Next();
    EXPECT_TRUE(within(got, want)) << got.count() << " for " << want.count();
    clock.Advance(got);
  }
  // Twice the longest wait without a try: quiet, so it starts over.
  clock.Advance(Ms(2000));
  EXPECT_TRUE(within(b.Next(), Ms(100)));
  EXPECT_EQ(b.step(), 1);
}

TEST(BackoffTest, AFirstTryAtOnceThenBackedOff) {
  testing::FakeClock clock;
  using Ms = std::chrono::milliseconds;
  // The relist after a 410: at once the first time, then backed off; the
  // success between tries (a list) does not start it over.
  Backoff b(Ms(500), Ms(30000), /*first=*/Ms(0), Ms(0), &clock);
  EXPECT_EQ(b.Next(), Ms(0));
  clock.Advance(Ms(5));
  const Ms second = b.Next();
  EXPECT_GE(second, Ms(400));
  clock.Advance(second);
  EXPECT_GE(b.Next(), Ms(800));
  clock.Advance(Ms(60000));
  EXPECT_EQ(b.Next(), Ms(0));
}

TEST(BackoffTest, ExactStepsHaveNoJitter) {
  testing::FakeClock clock;
  using Ms = std::chrono::milliseconds;
  // A grace period an operator set: never shorter than asked.
  Backoff b(Ms(200), Ms(500), /*first=*/Ms(100), Ms(0), &clock);
  for (Ms want : {Ms(100), Ms(200), Ms(400), Ms(500), Ms(500)}) {
    EXPECT_EQ(b.NextExact(), want);
    clock.Advance(want);
  }
  b.Reset();
  EXPECT_EQ(b.NextExact(), Ms(100));
}

TEST(BackoffTest, DoublingNeverWaitsOverItsMax) {
  testing::FakeClock clock;
  using Ms = std::chrono::milliseconds;
  // A cap under the first wait (health.eventWaitTimeout 10 ms: at most 20 ms).
  Backoff small = Backoff::Doubling(Ms(100), Ms(20), &clock);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(small.NextExact(), Ms(20)) << i;
  // A cap between the first and the second.
  Backoff mid = Backoff::Doubling(Ms(100), Ms(150), &clock);
  for (Ms want : {Ms(100), Ms(150), Ms(150)}) EXPECT_EQ(mid.NextExact(), want);
  // And the plain doubling.
  Backoff plain = Backoff::Doubling(Ms(100), Ms(1000), &clock);
  for (Ms want : {Ms(100), Ms(200), Ms(400), Ms(800), Ms(1000)}) {
    EXPECT_EQ(plain.NextExact(), want);
  }
}

// --- Programs ---

bool Gone(pid_t pid) {
  // Reaped, or a zombie whose parent (init here) has not reaped it yet.
  const std::string stat = "/proc/" + std::to_string(pid) + "/stat";
  FILE* f = std::fopen(stat.c_str(), "r");
  if (f == nullptr) return true;
  int p = 0;
  char name[256], state = 0;
  const bool read = std::fscanf(f, "%d %255s %c", &p, name, &state) == 3;
  std::fclose(f);
  return read && state == 'Z';
}

TEST(RunProgramHostileTest, ATimedOutProgramIsKilledWithWhatItStarted) {
  TempDir dir;
  const std::string pid_file = dir.Join("child.pid");
  ProgramRun run;
  run.timeout = std::chrono::milliseconds(300);
  // A plugin that leaves a helper behind holding nothing of ours, then
  // hangs: the helper's pid is written before the hang.
  absl::StatusOr<ProgramResult> r =
      RunProgram({"/bin/sh", "-c", "sleep 300 & echo $! > " + pid_file + "; exec sleep 300"}, run);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
  const pid_t helper = std::stoi(ReadFile(pid_file));
  EXPECT_TRUE(WaitFor([&] { return Gone(helper); }, std::chrono::seconds(5)))
      << "the program's helper " << helper << " outlived its timeout";
}

// A program that closes its outputs and hangs is bounded by the timeout
// too (its outputs' end is not its end).
TEST(RunProgramHostileTest, AProgramThatClosesItsOutputsAndHangsIsKilledAtTheTimeout) {
  ProgramRun run;
  run.timeout = std::chrono::milliseconds(300);
  const auto started = std::chrono::steady_clock::now();
  absl::StatusOr<ProgramResult> r =
      RunProgram({"/bin/sh", "-c", "exec >/dev/null 2>&1; exec sleep 300"}, run);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(30));
}

}  // namespace
}  // namespace gpu_agent
