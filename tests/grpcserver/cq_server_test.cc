// CqServer, the one gRPC server model of the device plugin and DRA, with the
// UnaryCall and StreamCall helpers as those servers use them, over real gRPC
// on a real unix socket: the socket's guard (the path checked, a live
// server's socket never taken, a stale one replaced, mode 0600, removed on
// shutdown only while it is still ours), calls answered at once or later
// from another thread, server streams, and shutdown with calls in flight.
// The service is the device plugin's v1beta1 DevicePlugin (a unary method
// and a server stream); none of the device plugin's own code runs here.
#include "grpcserver/cq_server.h"

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/file_util.h"
#include "base/socket_path.h"
#include "base/strings.h"
#include "deviceplugin/api.grpc.pb.h"
#include "grpcserver/stream_call.h"
#include "grpcserver/unary_call.h"
#include "support/test_support.h"

namespace gpu_agent::grpcserver {
namespace {

using ::testing::HasSubstr;
using Service = v1beta1::DevicePlugin::AsyncService;
using OptionsCall = UnaryCall<Service, v1beta1::Empty, v1beta1::DevicePluginOptions>;
using Clock = std::chrono::steady_clock;
using gpu_agent::testing::TempDir;
using gpu_agent::testing::WaitFor;

constexpr char kSettings[] = "test.socketDir setting";
constexpr char kThread[] = "cq-test";

// What the streams send: a version, each new one sent as a message with
// that many devices. The streams subscribe here when they arrive.
class Feed;

class Stream final : public StreamCall<v1beta1::Empty, v1beta1::ListAndWatchResponse> {
 public:
  Stream(CqServer* server, Service* async, Feed* feed)
      : StreamCall<v1beta1::Empty, v1beta1::ListAndWatchResponse>(server),
        async_(async),
        feed_(feed) {}

 private:
  void RequestCall(grpc::ServerContext* ctx, v1beta1::Empty* request, Writer* writer,
                   void* tag) override {
    async_->RequestListAndWatch(ctx, request, writer, server()->cq(), server()->cq(), tag);
  }
  void Arrived() override;
  bool Fill(v1beta1::ListAndWatchResponse* out) override;
  void Ended() override;

  Service* const async_;
  Feed* const feed_;
  int sent_ = 0;  // protected by the stream's lock (Fill)
};

class Feed {
 public:
  // A new version, pumped into every stream.
  void Publish() {
    std::vector<std::shared_ptr<Stream>> streams;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++version_;
      streams = Live();
    }
    for (const auto& s : streams) s->Pump();
  }
  // Finishes every stream with OK, as a server's stop does.
  void CloseAll() {
    std::vector<std::shared_ptr<Stream>> streams;
    {
      std::lock_guard<std::mutex> lock(mu_);
      streams = Live();
    }
    for (const auto& s : streams) s->Close(grpc::Status::OK);
  }
  int version() {
    std::lock_guard<std::mutex> lock(mu_);
    return version_;
  }
  int opened() {
    std::lock_guard<std::mutex> lock(mu_);
    return opened_;
  }
  int ended() {
    std::lock_guard<std::mutex> lock(mu_);
    return ended_;
  }

  void Subscribe(std::shared_ptr<Stream> s) {
    std::lock_guard<std::mutex> lock(mu_);
    streams_.push_back(s);
    ++opened_;
  }
  void Ended() {
    std::lock_guard<std::mutex> lock(mu_);
    ++ended_;
  }

 private:
  // REQUIRES: mu_ held.
  std::vector<std::shared_ptr<Stream>> Live() {
    std::vector<std::shared_ptr<Stream>> live;
    for (const auto& w : streams_) {
      if (auto s = w.lock()) live.push_back(std::move(s));
    }
    return live;
  }

  std::mutex mu_;
  int version_ = 1;
  int opened_ = 0;
  int ended_ = 0;
  std::vector<std::weak_ptr<Stream>> streams_;
};

void Stream::Arrived() {
  if (!server()->shutting_down()) Next<Stream>(server(), async_, feed_);
  feed_->Subscribe(std::static_pointer_cast<Stream>(server()->Kept(this)));
}

bool Stream::Fill(v1beta1::ListAndWatchResponse* out) {
  const int version = feed_->version();
  if (version == sent_) return false;
  out->Clear();
  for (int i = 0; i < version; ++i) out->add_devices()->set_id(StrCat("dev-", i));
  sent_ = version;
  return true;
}

void Stream::Ended() { feed_->Ended(); }

// GetDevicePluginOptions calls the handler holds instead of answering: the
// test answers them later, from its own thread.
class HeldCalls {
 public:
  void Hold(OptionsCall* call) {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.push_back(call);
  }
  size_t count() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_.size();
  }
  OptionsCall* Take() {
    std::lock_guard<std::mutex> lock(mu_);
    if (calls_.empty()) return nullptr;
    OptionsCall* call = calls_.front();
    calls_.erase(calls_.begin());
    return call;
  }

 private:
  std::mutex mu_;
  std::vector<OptionsCall*> calls_;
};

// A CqServer serving GetDevicePluginOptions (answered at once with
// pre_start_required, or held when `hold`) and ListAndWatch from `feed`.
struct TestServer {
  Service async;
  Feed feed;
  HeldCalls held;
  bool hold = false;
  std::unique_ptr<CqServer> server;

  absl::Status Start(const std::string& path) {
    absl::StatusOr<std::unique_ptr<CqServer>> s =
        CqServer::Start({path, kSettings, kThread}, {&async}, [this](CqServer& cq) { Ask(cq); });
    if (!s.ok()) return s.status();
    server = *std::move(s);
    return absl::OkStatus();
  }

  void Ask(CqServer& cq) {
    OptionsCall::Next(&cq, &async, &Service::RequestGetDevicePluginOptions,
                      [this](OptionsCall& call) {
                        if (hold) {
                          held.Hold(&call);
                          return;
                        }
                        call.response()->set_pre_start_required(true);
                        call.Finish(grpc::Status::OK);
                      });
    Stream::Next<Stream>(&cq, &async, &feed);
  }
};

std::unique_ptr<v1beta1::DevicePlugin::Stub> Client(const std::string& path) {
  return v1beta1::DevicePlugin::NewStub(
      grpc::CreateChannel("unix://" + path, grpc::InsecureChannelCredentials()));
}

// GetDevicePluginOptions with a 10 s deadline.
grpc::Status CallOptions(const std::string& path, v1beta1::DevicePluginOptions* out) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  return Client(path)->GetDevicePluginOptions(&ctx, v1beta1::Empty(), out);
}

// A unix socket file at `path` that nobody serves: bound, then closed, as a
// dead process leaves it. `listening`: kept open and listening instead;
// the returned fd is then the caller's to close.
int BindSocket(const std::string& path, bool listening) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  if (!listening) {
    ::close(fd);
    return 0;
  }
  ::listen(fd, 4);
  return fd;
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

std::string Message(const absl::Status& s) { return std::string(s.message()); }

bool QueueThreadRuns() {
  const std::vector<std::string> names = gpu_agent::testing::ThreadNames(::getpid());
  return std::find(names.begin(), names.end(), kThread) != names.end();
}

TEST(CqServerTest, ServesAUnaryCallOnASocketOnlyItsOwnerMayUse) {
  TempDir dir;
  const std::string path = dir.Join("a.sock");
  TestServer t;
  ASSERT_TRUE(t.Start(path).ok());
  // Start returns once the socket accepts calls: no wait needed.
  EXPECT_TRUE(SomeoneServes(path));
  EXPECT_EQ(t.server->socket_path(), path);

  v1beta1::DevicePluginOptions out;
  const grpc::Status s = CallOptions(path, &out);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(out.pre_start_required());
  // A second call too: each arrival asks for the next.
  out.Clear();
  ASSERT_TRUE(CallOptions(path, &out).ok());
  EXPECT_TRUE(out.pre_start_required());

  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600u) << std::oct << (st.st_mode & 07777);
  EXPECT_EQ(t.server->socket_inode(), st.st_ino);
  // Both calls were freed once answered.
  EXPECT_TRUE(WaitFor([&] { return t.server->open_calls() == 0; }));
}

TEST(CqServerTest, RunsOnOneThreadOfItsOwnThatEndsWithTheShutdown) {
  TempDir dir;
  const std::string path = dir.Join("a.sock");
  TestServer t;
  ASSERT_TRUE(t.Start(path).ok());
  // The thread names itself once it runs.
  EXPECT_TRUE(WaitFor(QueueThreadRuns));
  t.server->Shutdown(std::chrono::system_clock::now());
  // Shutdown joins it (the kernel may list it a moment longer).
  EXPECT_TRUE(WaitFor([] { return !QueueThreadRuns(); }));
  EXPECT_FALSE(Exists(path));
  // Once only: again, and the destructor, do nothing.
  t.server->Shutdown(std::chrono::system_clock::now());
  EXPECT_FALSE(t.server->StartOp([] { ADD_FAILURE() << "an operation started on a shut queue"; }));
  t.server.reset();
}

TEST(CqServerTest, RefusesAPathTooLongNamingTheSetting) {
  TempDir dir;
  std::string path = dir.Join("");
  path += std::string(kMaxSocketPath + 1 - path.size() - 5, 'x') + ".sock";
  ASSERT_EQ(path.size(), kMaxSocketPath + 1);
  TestServer t;
  const absl::Status s = t.Start(path);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(s), HasSubstr(path));
  EXPECT_THAT(Message(s), HasSubstr(StrCat("at most ", kMaxSocketPath)));
  EXPECT_THAT(Message(s), HasSubstr(kSettings));
  EXPECT_FALSE(Exists(path));
  EXPECT_FALSE(QueueThreadRuns());

  // The longest path it takes is served.
  path.pop_back();
  ASSERT_EQ(path.size(), kMaxSocketPath);
  ASSERT_TRUE(t.Start(path).ok());
  v1beta1::DevicePluginOptions out;
  EXPECT_TRUE(CallOptions(path, &out).ok());
}

// gRPC binds a private name beside the socket, linked to its path; where
// the folder leaves no room for that name, it binds the path itself.
TEST(CqServerTest, ServesAPathWithNoRoomForAPrivateNameBesideIt) {
  TempDir dir;
  const std::string folder = dir.Join(std::string(kMaxSocketPath - dir.path().size() - 1 - 4, 'f'));
  ASSERT_EQ(::mkdir(folder.c_str(), 0700), 0);
  const std::string path = folder + "/a.s";
  ASSERT_EQ(path.size(), kMaxSocketPath);
  TestServer t;
  const absl::Status s = t.Start(path);
  ASSERT_TRUE(s.ok()) << s;
  v1beta1::DevicePluginOptions out;
  EXPECT_TRUE(CallOptions(path, &out).ok());
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  t.server->Shutdown(std::chrono::system_clock::now());
  EXPECT_FALSE(Exists(path));
}

TEST(CqServerTest, RefusesAMissingFolderNamingIt) {
  TempDir dir;
  const std::string folder = dir.Join("kubelet");
  TestServer t;
  const absl::Status s = t.Start(folder + "/a.sock");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(Message(s), HasSubstr(StrCat("\"", folder, "\" does not exist")));
  EXPECT_FALSE(Exists(folder));
}

TEST(CqServerTest, RefusesAFileThatIsNotASocketAndLeavesIt) {
  TempDir dir;
  const std::string path = dir.Write("a.sock", "not a socket");
  TestServer t;
  const absl::Status s = t.Start(path);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(Message(s), HasSubstr("is not a socket"));
  EXPECT_EQ(gpu_agent::testing::ReadFile(path), "not a socket");
}

TEST(CqServerTest, NeverTakesASocketAnotherLiveServerServes) {
  TempDir dir;
  const std::string path = dir.Join("a.sock");
  TestServer first;
  ASSERT_TRUE(first.Start(path).ok());
  const ino_t inode = InodeOf(path);

  TestServer second;
  const absl::Status s = second.Start(path);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(Message(s), HasSubstr(StrCat("socket \"", path, "\"")));
  EXPECT_THAT(Message(s), HasSubstr("served by another live process"));

  // The first server's socket is untouched and still answers.
  EXPECT_EQ(InodeOf(path), inode);
  v1beta1::DevicePluginOptions out;
  EXPECT_TRUE(CallOptions(path, &out).ok());

  // Also a listener that is not gRPC: any live peer counts.
  const std::string other = dir.Join("b.sock");
  const int fd = BindSocket(other, /*listening=*/true);
  ASSERT_GE(fd, 0);
  EXPECT_FALSE(second.Start(other).ok());
  EXPECT_TRUE(Exists(other));
  ::close(fd);
}

TEST(CqServerTest, ReplacesAStaleSocketADeadProcessLeft) {
  TempDir dir;
  const std::string path = dir.Join("a.sock");
  ASSERT_EQ(BindSocket(path, /*listening=*/false), 0);
  ASSERT_TRUE(Exists(path));
  ASSERT_FALSE(SomeoneServes(path));

  TestServer t;
  const absl::Status s = t.Start(path);
  ASSERT_TRUE(s.ok()) << s;
  v1beta1::DevicePluginOptions out;
  EXPECT_TRUE(CallOptions(path, &out).ok());
  EXPECT_EQ(InodeOf(path), t.server->socket_inode());
}

TEST(CqServerTest, ShutdownRemovesTheSocketOnlyWhileItIsStillOurs) {
  TempDir dir;
  const std::string path = dir.Join("a.sock");
  TestServer t;
  ASSERT_TRUE(t.Start(path).ok());
  t.server->Shutdown(std::chrono::system_clock::now());
  EXPECT_FALSE(Exists(path));

  // Another socket moved onto the path while this server runs (a new
  // instance's): it stays.
  TestServer again;
  ASSERT_TRUE(again.Start(path).ok());
  const std::string other = dir.Join("other.sock");
  const int fd = BindSocket(other, /*listening=*/true);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::rename(other.c_str(), path.c_str()), 0);
  const ino_t theirs = InodeOf(path);
  ASSERT_NE(theirs, again.server->socket_inode());
  again.server->Shutdown(std::chrono::system_clock::now());
  EXPECT_EQ(InodeOf(path), theirs);
  EXPECT_TRUE(SomeoneServes(path));
  ::close(fd);
}

TEST(CqServerTest, ShutdownLeavesASocketMadeAnewAtThePath) {
  TempDir dir;
  const std::string path = dir.Join("a.sock");
  TestServer t;
  ASSERT_TRUE(t.Start(path).ok());
  // Removed, and another made at the same path: the file system may give the
  // new file the old one's inode number.
  ASSERT_EQ(::unlink(path.c_str()), 0);
  const int fd = BindSocket(path, /*listening=*/true);
  ASSERT_GE(fd, 0);
  t.server->Shutdown(std::chrono::system_clock::now());
  EXPECT_TRUE(Exists(path));
  EXPECT_TRUE(SomeoneServes(path));
  ::close(fd);
}

TEST(CqServerTest, AnswersACallLaterFromAnotherThread) {
  TempDir dir;
  const std::string path = dir.Join("a.sock");
  TestServer t;
  t.hold = true;
  ASSERT_TRUE(t.Start(path).ok());

  grpc::Status status;
  v1beta1::DevicePluginOptions out;
  std::thread client([&] { status = CallOptions(path, &out); });
  ASSERT_TRUE(WaitFor([&] { return t.held.count() == 1; }));
  EXPECT_EQ(t.server->open_calls(), 1u);

  std::thread answer([call = t.held.Take()] {
    call->response()->set_get_preferred_allocation_available(true);
    call->Finish(grpc::Status::OK);
  });
  answer.join();
  client.join();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(out.get_preferred_allocation_available());
  EXPECT_TRUE(WaitFor([&] { return t.server->open_calls() == 0; }));
}

TEST(CqServerTest, WaitForCallsWakesWhenTheLastCallIsFreed) {
  TempDir dir;
  const std::string path = dir.Join("a.sock");
  TestServer t;
  t.hold = true;
  ASSERT_TRUE(t.Start(path).ok());
  std::thread client([&] {
    v1beta1::DevicePluginOptions out;
    CallOptions(path, &out);
  });
  ASSERT_TRUE(WaitFor([&] { return t.held.count() == 1; }));

  t.server->StopAsking();
  EXPECT_TRUE(t.server->shutting_down());
  // A wait that cannot end in time returns false at its deadline.
  EXPECT_FALSE(t.server->WaitForCalls(Clock::now() + std::chrono::milliseconds(20)));

  // Freed while a long wait runs: the wait returns then, not at its deadline.
  std::mutex mu;
  std::condition_variable cv;
  bool waiting = false;
  bool drained = false;
  Clock::duration took{};
  std::thread waiter([&] {
    {
      std::lock_guard<std::mutex> lock(mu);
      waiting = true;
    }
    cv.notify_all();
    const auto start = Clock::now();
    drained = t.server->WaitForCalls(start + std::chrono::seconds(60));
    took = Clock::now() - start;
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return waiting; });
  }
  t.held.Take()->Finish(grpc::Status::OK);
  waiter.join();
  client.join();
  EXPECT_TRUE(drained);
  EXPECT_LT(took, std::chrono::seconds(10));
  EXPECT_EQ(t.server->open_calls(), 0u);
}

// Opens ListAndWatch and reads until a message with `devices` devices.
bool ReadUntil(grpc::ClientReader<v1beta1::ListAndWatchResponse>* reader, int devices) {
  v1beta1::ListAndWatchResponse msg;
  while (reader->Read(&msg)) {
    if (msg.devices_size() == devices) return true;
  }
  return false;
}

TEST(CqServerTest, AStreamSendsEachNewMessageAndEndsWhenClosed) {
  TempDir dir;
  const std::string path = dir.Join("a.sock");
  TestServer t;
  ASSERT_TRUE(t.Start(path).ok());

  auto stub = Client(path);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  auto reader = stub->ListAndWatch(&ctx, v1beta1::Empty());
  v1beta1::ListAndWatchResponse msg;
  ASSERT_TRUE(reader->Read(&msg));
  EXPECT_EQ(msg.devices_size(), 1);  // the version current when it arrived
  EXPECT_EQ(t.server->open_calls(), 1u);

  t.feed.Publish();
  ASSERT_TRUE(reader->Read(&msg));
  EXPECT_EQ(msg.devices_size(), 2);
  EXPECT_EQ(msg.devices(1).id(), "dev-1");

  // A burst: the newest always arrives (older ones may be coalesced away).
  for (int i = 0; i < 5; ++i) t.feed.Publish();
  EXPECT_TRUE(ReadUntil(reader.get(), 7));

  t.feed.CloseAll();
  EXPECT_FALSE(reader->Read(&msg));
  const grpc::Status s = reader->Finish();
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(WaitFor([&] { return t.feed.ended() == 1; }));
  EXPECT_TRUE(WaitFor([&] { return t.server->open_calls() == 0; }));
}

TEST(CqServerTest, AStreamThePeerCancelsIsFreed) {
  TempDir dir;
  const std::string path = dir.Join("a.sock");
  TestServer t;
  ASSERT_TRUE(t.Start(path).ok());
  auto stub = Client(path);
  grpc::ClientContext ctx;
  auto reader = stub->ListAndWatch(&ctx, v1beta1::Empty());
  v1beta1::ListAndWatchResponse msg;
  ASSERT_TRUE(reader->Read(&msg));
  ctx.TryCancel();
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(WaitFor([&] { return t.feed.ended() == 1; }));
  EXPECT_TRUE(WaitFor([&] { return t.server->open_calls() == 0; }));
  // The server goes on: a new stream is served.
  grpc::ClientContext ctx2;
  auto again = stub->ListAndWatch(&ctx2, v1beta1::Empty());
  EXPECT_TRUE(again->Read(&msg));
  ctx2.TryCancel();
  again->Finish();
}

// A stream nobody closes and the shutdown's deadline: gRPC cancels it at the
// deadline, the stream ends and is freed, and Shutdown returns.
TEST(CqServerTest, ShutdownWithAStreamInFlightReturnsByItsDeadline) {
  TempDir dir;
  const std::string path = dir.Join("a.sock");
  TestServer t;
  ASSERT_TRUE(t.Start(path).ok());
  auto stub = Client(path);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto reader = stub->ListAndWatch(&ctx, v1beta1::Empty());
  v1beta1::ListAndWatchResponse msg;
  ASSERT_TRUE(reader->Read(&msg));
  ASSERT_EQ(t.feed.opened(), 1);

  const auto start = Clock::now();
  t.server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  const auto took = Clock::now() - start;
  EXPECT_LT(took, std::chrono::seconds(5));
  EXPECT_EQ(t.feed.ended(), 1);
  EXPECT_EQ(t.server->open_calls(), 0u);
  EXPECT_TRUE(WaitFor([] { return !QueueThreadRuns(); }));
  EXPECT_FALSE(Exists(path));

  // The client's stream ended too (well before its own 60 s deadline).
  EXPECT_FALSE(reader->Read(&msg));
  EXPECT_FALSE(reader->Finish().ok());
}

// A unary call its handler answers only later: the shutdown cancels it at
// its deadline (the client hears so then, not at its own deadline), and the
// late answer, which can no longer be sent, still frees the call.
TEST(CqServerTest, AUnaryCallAnsweredAfterTheShutdownsDeadlineIsFreed) {
  TempDir dir;
  const std::string path = dir.Join("a.sock");
  TestServer t;
  t.hold = true;
  ASSERT_TRUE(t.Start(path).ok());
  grpc::Status status;
  Clock::duration client_took{};
  std::thread client([&] {
    v1beta1::DevicePluginOptions out;
    const auto start = Clock::now();
    status = CallOptions(path, &out);  // its own deadline: 10 s
    client_took = Clock::now() - start;
  });
  ASSERT_TRUE(WaitFor([&] { return t.held.count() == 1; }));

  std::thread stopper([&] {
    t.server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(100));
  });
  client.join();
  EXPECT_FALSE(status.ok());
  EXPECT_LT(client_took, std::chrono::seconds(5));
  t.held.Take()->Finish(grpc::Status::OK);
  stopper.join();
  EXPECT_EQ(t.server->open_calls(), 0u);
  EXPECT_FALSE(Exists(path));
}

}  // namespace
}  // namespace gpu_agent::grpcserver
