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

}  // namespace
}  // namespace gpu_agent::dra
