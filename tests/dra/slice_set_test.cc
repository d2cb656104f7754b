// The publisher's record of the node's slices: an event the watch brings
// late, of a write of its own that a newer one overtook, is told from
// someone else's change.
#include "dra/slice_set.h"

#include <gtest/gtest.h>

#include <string>

namespace gpu_agent::dra {
namespace {

std::string Slice(const std::string& rv, int devices) {
  std::string d;
  for (int i = 0; i < devices; ++i) {
    d += (i ? "," : "") + std::string(R"({"name":"gpu-)") + std::to_string(i) + R"("})";
  }
  return R"({"metadata":{"name":"s","resourceVersion":")" + rv + R"("},"spec":{"devices":[)" + d +
         "]}}";
}

TEST(SliceSetTest, AnEchoOfAnOwnWriteAnotherOvertookIsStale) {
  SliceSet s;
  s.have["s"] = Slice("100", 6);
  s.Wrote("s", "100");
  s.have["s"] = Slice("101", 8);  // the desired slices changed: written again
  s.Wrote("s", "101");
  EXPECT_TRUE(s.StaleEcho("s", "100")) << "the create's event, after the update";
  EXPECT_FALSE(s.StaleEcho("s", "101")) << "the update's own event";
  EXPECT_FALSE(s.StaleEcho("s", "102")) << "someone else's change";
  EXPECT_FALSE(s.StaleEcho("s", "")) << "no version: not known to be ours";
  EXPECT_FALSE(s.StaleEcho("other", "100"));
}

TEST(SliceSetTest, AfterSomeoneElsesChangeNoEchoIsStale) {
  SliceSet s;
  s.have["s"] = Slice("100", 6);
  s.Wrote("s", "100");
  s.have["s"] = Slice("150", 2);  // another writer's, seen by the watch
  EXPECT_FALSE(s.StaleEcho("s", "100"));
}

TEST(SliceSetTest, AnEchoOfAnOwnWriteOfASliceDeletedSinceIsStale) {
  SliceSet s;
  s.have["s"] = Slice("100", 6);
  s.Wrote("s", "100");
  s.have.erase("s");  // no longer wanted: deleted
  EXPECT_TRUE(s.StaleEcho("s", "100")) << "the create's event, after the delete";
  EXPECT_FALSE(s.StaleEcho("s", "200")) << "made again by someone else";
}

TEST(SliceSetTest, OnlyTheLastFewWritesAreKept) {
  SliceSet s;
  for (int rv = 1; rv <= 20; ++rv) {
    s.have["s"] = Slice(std::to_string(rv), 1);
    s.Wrote("s", std::to_string(rv));
  }
  EXPECT_EQ(s.written["s"].size(), 8u);
  EXPECT_TRUE(s.StaleEcho("s", "19"));
  EXPECT_FALSE(s.StaleEcho("s", "2")) << "forgotten: taken for a change, and repaired";
}

// A slice whose one device has `device` (JSON members after its name).
std::string WithDevice(const std::string& device) {
  return R"({"metadata":{"name":"s"},"spec":{"devices":[{"name":"gpu-0")" +
         (device.empty() ? "" : "," + device) + "}]}}";
}

// What the agent stopped writing and the stored slice still has (sharing
// turned off, a taint gone, an attribute or capacity no longer known, in
// v1 and under v1beta1's basic) is not as wanted; what the server adds
// (a taint's timeAdded) still is.
TEST(SliceSetTest, WhatTheAgentStoppedWritingIsNotAsWanted) {
  const std::string memory = R"("capacity":{"memory":{"value":"80Gi"}})";
  const std::string shared =
      R"("capacity":{"memory":{"value":"80Gi","requestPolicy":{"default":"20Gi"}},)"
      R"("shares":{"value":"4"}},"allowMultipleAllocations":true)";
  struct Case {
    const char* name;
    std::string have, want;
    bool matches;
  };
  for (const Case& c : {
           Case{"same", memory, memory, true},
           Case{"sharing off", shared, memory, false},
           Case{"request policy left",
                R"("capacity":{"memory":{"value":"80Gi","requestPolicy":{}}})", memory, false},
           Case{"taint gone", memory + R"(,"taints":[{"key":"k","effect":"NoSchedule"}])", memory,
                false},
           Case{"attribute gone", R"("attributes":{"a":{"int":1}},)" + memory, memory, false},
           Case{"capacity gone", memory, R"("capacity":{})", false},
           Case{"timeAdded by the server",
                R"("taints":[{"key":"k","effect":"NoSchedule","timeAdded":"t"}])",
                R"("taints":[{"key":"k","effect":"NoSchedule"}])", true},
           Case{"v1beta1 sharing off", R"("basic":{)" + shared + "}", R"("basic":{)" + memory + "}",
                false},
           Case{"v1beta1 same", R"("basic":{)" + memory + "}", R"("basic":{)" + memory + "}", true},
       }) {
    SCOPED_TRACE(c.name);
    SliceSet s;
    s.have["s"] = WithDevice(c.have);
    s.Want({WithDevice(c.want)});
    EXPECT_EQ(s.Matches("s"), c.matches);
  }
}

}  // namespace
}  // namespace gpu_agent::dra
