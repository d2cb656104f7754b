// AllocateText against the full runtime's own ShortDebugString(): this test
// alone is built with the full Protobuf runtime (tests/CMakeLists.txt), so
// the text the other tests and the kubelet simulator compare and log is the
// text the protobuf library would write.
#include "allocate_text.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace gpu_agent::testing {
namespace {

// Random strings with what the text format escapes: quotes, backslashes,
// control characters and bytes past ASCII.
class Strings {
 public:
  std::string Next(int max_len) {
    std::string s;
    const int n = static_cast<int>(rng_() % static_cast<unsigned>(max_len + 1));
    for (int i = 0; i < n; ++i) {
      const unsigned k = rng_() % 10;
      if (k < 6) {
        s += static_cast<char>('a' + rng_() % 26);
      } else if (k < 7) {
        s += "\n\t\r\"'\\"[rng_() % 6];
      } else if (k < 8) {
        s += static_cast<char>(rng_() % 256);
      } else {
        s += k == 8 ? '/' : ' ';
      }
    }
    return s;
  }
  unsigned Small(unsigned n) { return rng_() % n; }

 private:
  std::mt19937 rng_{20261128};
};

TEST(AllocateTextTest, IsTheFullRuntimesShortDebugString) {
  Strings r;
  for (int round = 0; round < 5000; ++round) {
    v1beta1::AllocateResponse resp;
    for (unsigned c = r.Small(3); c > 0; --c) {
      auto* cr = resp.add_container_responses();
      for (unsigned i = r.Small(4); i > 0; --i) (*cr->mutable_envs())[r.Next(6)] = r.Next(8);
      for (unsigned i = r.Small(3); i > 0; --i) {
        auto* m = cr->add_mounts();
        m->set_container_path(r.Next(5));
        m->set_host_path(r.Next(5));
        m->set_read_only(r.Small(2) == 1);
      }
      for (unsigned i = r.Small(3); i > 0; --i) {
        auto* d = cr->add_devices();
        d->set_container_path(r.Next(5));
        d->set_host_path(r.Next(5));
        d->set_permissions(r.Next(3));
      }
      for (unsigned i = r.Small(3); i > 0; --i) {
        (*cr->mutable_annotations())[r.Next(6)] = r.Next(8);
      }
      for (unsigned i = r.Small(3); i > 0; --i) cr->add_cdi_devices()->set_name(r.Next(6));
    }
    ASSERT_EQ(AllocateText(resp), resp.ShortDebugString()) << "round " << round;
    for (const auto& c : resp.container_responses()) {
      ASSERT_EQ(AllocateText(c), c.ShortDebugString()) << "round " << round;
    }
  }
}

}  // namespace
}  // namespace gpu_agent::testing
