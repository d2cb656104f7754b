// metrics.address: the forms accepted, where the port begins, and what is
// refused (the port is always required).
#include "base/listen_address.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpu_agent {
namespace {

TEST(ListenAddressTest, Accepted) {
  struct Case {
    std::string address, host;
    int port;
  };
  for (const Case& c : std::vector<Case>{
           {"0.0.0.0:9400", "0.0.0.0", 9400},
           {"127.0.0.1:0", "127.0.0.1", 0},
           {":9400", "0.0.0.0", 9400},
           {"localhost:9400", "localhost", 9400},
           {"[::1]:9400", "::1", 9400},
           {"[fd00::5]:9400", "fd00::5", 9400},
           {"[::]:9400", "::", 9400},
           // A manifest's "$(POD_IP):9400" on a single-stack IPv6 pod.
           {"fd00:10:244:1::7:9400", "fd00:10:244:1::7", 9400},
           {"2001:db8::1:65535", "2001:db8::1", 65535},
           {"::1:9400", "::1", 9400},
           {":::9400", "::", 9400},
           {"::ffff:10.0.0.1:9400", "::ffff:10.0.0.1", 9400},
           {"1:2:3:4:5:6:7:8:9400", "1:2:3:4:5:6:7:8", 9400},
       }) {
    absl::StatusOr<HostPort> hp = ParseListenAddress(c.address);
    ASSERT_TRUE(hp.ok()) << c.address << ": " << hp.status();
    EXPECT_EQ(hp->host, c.host) << c.address;
    EXPECT_EQ(hp->port, c.port) << c.address;
  }
}

TEST(ListenAddressTest, RefusedWithTheReason) {
  struct Case {
    std::string address, why;
  };
  for (const Case& c : std::vector<Case>{
           {"9400", "missing :port"},
           {"", "missing :port"},
           {"host:port", "invalid port \"port\""},
           {"127.0.0.1:99999", "invalid port"},
           {"127.0.0.1:-1", "invalid port"},
           {"127.0.0.1:", "invalid port"},
           {"[::1:9400", "unclosed '['"},
           {"[::1]", "missing :port"},
           {"[::1]9400", "missing :port"},
           // IPv6 without a port: the last group is not taken for one.
           {"fd00::5", "an IPv6 address needs its port"},
           {"::1", "an IPv6 address needs its port"},
           {"::", "an IPv6 address needs its port"},
           {"1:2:3:4:5:6:7:8", "an IPv6 address needs its port"},
           {"a:b:9400", "an IPv6 address needs its port"},
           {"fd00::5:port", "invalid port"},
       }) {
    absl::StatusOr<HostPort> hp = ParseListenAddress(c.address);
    ASSERT_FALSE(hp.ok()) << c.address << " parsed as " << hp->host << " " << hp->port;
    const std::string message(hp.status().message());
    EXPECT_NE(message.find("metrics.address \"" + c.address + "\""), std::string::npos) << message;
    EXPECT_NE(message.find(c.why), std::string::npos) << c.address << ": " << message;
    EXPECT_FALSE(ValidateListenAddress(c.address).ok()) << c.address;
  }
}

TEST(ListenAddressTest, FormatBracketsIpv6) {
  EXPECT_EQ(FormatHostPort("127.0.0.1", 9400), "127.0.0.1:9400");
  EXPECT_EQ(FormatHostPort("fd00::5", 9400), "[fd00::5]:9400");
  EXPECT_EQ(FormatHostPort("localhost", 0), "localhost:0");
}

}  // namespace
}  // namespace gpu_agent
