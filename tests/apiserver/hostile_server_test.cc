// An API server that is compromised or broken, against the REST client and
// the Node watch: answers that never end (to a PUT), a watch that drips a
// byte at a time past its timeout, a bookmark then 410 on every watch.
// Nothing may crash the agent, grow it past its caps, or turn into a
// request storm. (The ResourceSlice publisher's: tests/dra.)
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "api_server_stub.h"
#include "apiserver/node_watch.h"
#include "apiserver/rest_client.h"
#include "support/proxy_connection.h"
#include "support/test_support.h"

namespace gpu_agent::apiserver {
namespace {

using gpu_agent::testing::ApiServerStub;
using gpu_agent::testing::WaitFor;
using Ms = std::chrono::milliseconds;

constexpr char kNode[] = "node-a";

TEST(EscapePathSegmentTest, OutsideNamesStayOneSegment) {
  EXPECT_EQ(EscapePathSegment("claim-0.a_b~c"), "claim-0.a_b~c");
  EXPECT_EQ(EscapePathSegment("../../../api/v1/secrets?x="),
            "..%2F..%2F..%2Fapi%2Fv1%2Fsecrets%3Fx%3D");
  EXPECT_EQ(EscapePathSegment(".."), "%2E%2E");
  EXPECT_EQ(EscapePathSegment("."), "%2E");
  EXPECT_EQ(EscapePathSegment(std::string("a\0b\n", 4)), "a%00b%0A");
}

// A token file that never ends (/dev/zero) or never opens (a FIFO) is an
// error at once: --token-file /dev/zero took the agent to 4.2 GB.
TEST(TokenSourceHostileTest, ATokenFileThatIsNoRegularFileIsRefusedAtOnce) {
  gpu_agent::testing::TempDir dir;
  const std::string fifo = dir.Join("token");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {std::string("/dev/zero"), fifo}) {
    absl::StatusOr<std::string> t = TokenSource::FromFile(path)->Token();
    ASSERT_FALSE(t.ok()) << path;
    EXPECT_NE(t.status().message().find("token file: cannot read \"" + path + "\": it is a"),
              std::string::npos)
        << t.status();
  }
  const std::string big = dir.Write("big", std::string(100 << 10, 'a'));
  EXPECT_NE(TokenSource::FromFile(big)->Token().status().message().find("over the 65536-byte"),
            std::string::npos);
}

// TLS verification turned off is said at each start, with the server.
TEST(ConnectionHostileTest, TlsVerificationOffIsAWarning) {
  ConnectionOptions o;
  o.server = "https://api.example.com:6443";
  o.insecure_skip_tls_verify = true;
  ::testing::internal::CaptureStderr();
  absl::StatusOr<Connection> c =
      ResolveConnection(o, [](const std::string&) { return std::optional<std::string>(); });
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_NE(log.find("TLS verification of the API server is off (insecure-skip-tls-verify)"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("api.example.com"), std::string::npos) << log;
  o.insecure_skip_tls_verify = false;
  ::testing::internal::CaptureStderr();
  (void)ResolveConnection(o, [](const std::string&) { return std::optional<std::string>(); });
  EXPECT_EQ(::testing::internal::GetCapturedStderr().find("TLS verification"), std::string::npos);
}

std::unique_ptr<RestClient> Client(const ApiServerStub& api, RestOptions o = {}) {
  absl::StatusOr<Connection> conn = gpu_agent::testing::ProxyConnection(api.url());
  EXPECT_TRUE(conn.ok()) << conn.status();
  absl::StatusOr<std::unique_ptr<RestClient>> c = RestClient::Create(*conn, o);
  EXPECT_TRUE(c.ok()) << c.status();
  return *std::move(c);
}

// Every method's answer is capped as it arrives: a PUT answered with a body
// that never ends is cut off at max_body_bytes (it was buffered whole
// first: a 700 MB PATCH answer took the agent to 1.3 GB).
TEST(RestClientHostileTest, AnAnswerPastTheCapIsCutOffForEveryMethod) {
  ApiServerStub api;
  RestOptions o;
  o.max_body_bytes = 1 << 20;
  std::unique_ptr<RestClient> rest = Client(api, o);
  const std::string chunk(64 << 10, 'x');
  for (const char* call : {"update resourceslices", "create resourceslices",
                           "delete resourceslices", "patch nodes/status", "get nodes"}) {
    api.AnswerWith(call, chunk, /*forever=*/true);
  }
  const std::string slice = "/apis/resource.k8s.io/v1/resourceslices";
  std::vector<absl::StatusOr<HttpResponse>> answers;
  answers.push_back(rest->Put(slice + "/x", "{}"));
  answers.push_back(rest->Post(slice, "{}"));
  answers.push_back(rest->Delete(slice + "/x"));
  answers.push_back(rest->Patch("/api/v1/nodes/n/status", "[]", "application/json-patch+json"));
  answers.push_back(rest->Get("/api/v1/nodes/n"));
  for (const auto& a : answers) {
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.status().code(), absl::StatusCode::kResourceExhausted) << a.status();
    EXPECT_NE(a.status().message().find("is over 1048576 bytes; refused"), std::string::npos)
        << a.status();
  }
  for (const char* call : {"update resourceslices", "create resourceslices",
                           "delete resourceslices", "patch nodes/status", "get nodes"}) {
    api.AnswerNormally(call);
  }
}

// A watch that drips a byte now and then never trips the read timeout; the
// client ends it a read timeout after the time it asked the server for.
TEST(RestClientHostileTest, AWatchDrippingPastItsTimeoutIsCutOff) {
  ApiServerStub api;
  RestOptions o;
  o.stream_grace = Ms(500);
  std::unique_ptr<RestClient> rest = Client(api, o);
  api.AnswerWith("watch nodes", " ", /*forever=*/true, Ms(100));
  const auto started = std::chrono::steady_clock::now();
  size_t received = 0;
  absl::StatusOr<int> r = rest->Stream("/api/v1/nodes?watch=1&timeoutSeconds=1",
                                       std::chrono::seconds(1), [&](std::string_view chunk) {
                                         received += chunk.size();
                                         return true;
                                       });
  const auto took = std::chrono::steady_clock::now() - started;
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_NE(r.status().message().find("kept the watch open past the 1 s it was asked for"),
            std::string::npos)
      << r.status();
  EXPECT_GT(received, 0u);  // it did drip
  EXPECT_LT(took, std::chrono::seconds(10));
  api.AnswerNormally("watch nodes");
}

// The Node watch, static mode's: a bookmark and then 410 on every watch
// relisted at once each time (the bookmark counted as a good watch).
TEST(NodeWatchHostileTest, ABookmarkThen410OnEveryWatchIsNotARequestStorm) {
  ApiServerStub api;
  api.AddNode("n1");
  absl::StatusOr<Connection> conn = gpu_agent::testing::ProxyConnection(api.url());
  ASSERT_TRUE(conn.ok());
  absl::StatusOr<NodeWatchClients> clients =
      CreateNodeWatchClients(*conn, RestOptions{}, std::chrono::seconds(30));
  ASSERT_TRUE(clients.ok());
  api.AnswerWith(
      "watch nodes",
      R"({"type":"BOOKMARK","object":{"kind":"Node","metadata":{"resourceVersion":"5"}}})"
      "\n"
      R"({"type":"ERROR","object":{"kind":"Status","code":410,"message":"too old"}})"
      "\n");
  NodeWatchOptions o;
  o.node = "n1";
  o.watch_timeout = std::chrono::seconds(30);
  o.backoff_initial = Ms(100);
  o.backoff_max = Ms(10000);
  NodeWatchStats stats;
  NodeWatch watch(o, clients->rest.get(), clients->watch.get(), {}, &stats);
  // Counted by the server: the watch counts a list before it is sent, and
  // Stop() ends one in flight.
  std::vector<ApiServerStub::Request> lists;
  auto served_lists = [&] {
    lists.clear();
    for (const ApiServerStub::Request& r : api.requests()) {
      if (r.call == "list nodes") lists.push_back(r);
    }
    return lists.size() >= 6;
  };
  ASSERT_TRUE(WaitFor(served_lists, std::chrono::seconds(20))) << lists.size();
  watch.Stop();
  const double last_gap =
      std::chrono::duration<double, std::milli>(lists[5].at - lists[4].at).count();
  EXPECT_GT(last_gap, 500) << "a bookmark before each 410 keeps the relists at once";
}

}  // namespace
}  // namespace gpu_agent::apiserver
