// ClaimPreparer against claims as the API server returns them (a reader
// that answers from a table): the CDI spec written per claim and the ids
// answered, each bad claim its own error, idempotence, unprepare, and the
// checkpoint (kept across a restart; a corrupt one moved aside and rebuilt
// from the specs on disk).
#include "dra/claim_preparer.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <mutex>

#include "base/file_util.h"
#include "support/test_support.h"

namespace gpu_agent::dra {
namespace {

using gpu_agent::testing::ReadFile;
using gpu_agent::testing::TempDir;

constexpr char kDriver[] = "gpu.gpu-agent.github.io";
constexpr char kPool[] = "node-a";

class TableReader : public ClaimReader {
 public:
  absl::StatusOr<Answer> GetClaim(const std::string& ns, const std::string& name) override {
    ++gets;
    if (hold) {
      // Each GET waits (5 s at most) until `hold` are under way at once.
      std::unique_lock<std::mutex> lock(mu);
      max_at_once = std::max(max_at_once, ++at_once);
      cv.notify_all();
      cv.wait_for(lock, std::chrono::seconds(5), [&] { return max_at_once >= hold; });
      --at_once;
    }
    auto it = claims.find(ns + "/" + name);
    if (it == claims.end()) {
      return Answer{404, R"({"kind":"Status","message":"resourceclaims \")" + name +
                             R"(\" not found","code":404})"};
    }
    return it->second;
  }
  std::map<std::string, Answer> claims;  // not changed during a Prepare
  std::atomic<int> gets{0};
  int hold = 0;
  std::mutex mu;
  std::condition_variable cv;
  int at_once = 0, max_at_once = 0;  // protected by mu
};

// A claim allocated `results`: (request, driver, pool, device).
std::string Claim(const std::string& uid, const std::vector<std::array<std::string, 4>>& results) {
  std::string r;
  for (const auto& [req, driver, pool, device] : results) {
    if (!r.empty()) r += ",";
    r += R"({"request":")" + req + R"(","driver":")" + driver + R"(","pool":")" + pool +
         R"(","device":")" + device + R"("})";
  }
  return R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"c","namespace":"ns","uid":")" +
         uid + R"("},"status":{"allocation":{"devices":{"results":[)" + r + "]}}}}";
}

std::shared_ptr<const DeviceCatalog> TwoGpus() {
  auto c = std::make_shared<DeviceCatalog>();
  for (int i = 0; i < 2; ++i) {
    DraDevice d;
    d.name = "gpu-" + std::to_string(i);
    d.uuid = "GPU-" + std::to_string(i);
    c->devices.push_back(d);
    cdi::ContainerEdits e;
    e.device_nodes.push_back({"/dev/nvidia" + std::to_string(i), ""});
    c->node_spec.devices.push_back({d.uuid, e});
    c->node_spec.devices.push_back({std::to_string(i), e});
  }
  c->node_spec.kind = "gpu-agent.github.io/gpu";
  c->node_spec.edits.device_nodes.push_back({"/dev/nvidiactl", ""});
  return c;
}

class ClaimPreparerTest : public ::testing::Test {
 protected:
  ClaimPreparerTest() {
    reader_ = std::make_shared<TableReader>();
    options_ = {kDriver,
                kPool,
                dir_.Join("cdi"),
                "gpu-agent.github.io",
                dir_.Join("plugin/checkpoint.json"),
                [this](const std::string& uuid, const std::string& interval) {
                  std::lock_guard<std::mutex> lock(slices_mu_);
                  slices_set_.push_back(uuid + "=" + interval);
                  return slice_status_;
                }};
    Restart();
  }
  void Restart() {
    auto p = ClaimPreparer::Create(options_, reader_);
    ASSERT_TRUE(p.ok()) << p.status();
    preparer_ = *std::move(p);
    preparer_->SetCatalog(TwoGpus());
  }
  void Put(const std::string& name, std::string json, int status = 200) {
    reader_->claims["ns/" + name] = {status, std::move(json)};
  }
  PrepareOutcome PrepareOne(const std::string& name, const std::string& uid) {
    return preparer_->Prepare({{"ns", uid, name}})[uid];
  }

  std::vector<std::string> SlicesSet() {
    std::lock_guard<std::mutex> lock(slices_mu_);
    return slices_set_;
  }

  TempDir dir_;
  std::shared_ptr<TableReader> reader_;
  std::mutex slices_mu_;
  std::vector<std::string> slices_set_;  // protected by slices_mu_: "uuid=interval"
  absl::Status slice_status_;            // what setting a time slice answers
  PreparerOptions options_;
  std::unique_ptr<ClaimPreparer> preparer_;
};

TEST_F(ClaimPreparerTest, AClaimGetsItsOwnSpecAndTheCdiIdsOfItsDevices) {
  Put("one", Claim("u1", {{"gpus", kDriver, kPool, "gpu-1"}, {"gpus", kDriver, kPool, "gpu-0"}}));
  const PrepareOutcome o = PrepareOne("one", "u1");
  ASSERT_EQ(o.error, "");
  ASSERT_EQ(o.devices.size(), 2u);
  EXPECT_EQ(o.devices[0].device, "gpu-1");
  EXPECT_EQ(o.devices[0].pool, kPool);
  EXPECT_EQ(o.devices[0].request_names, std::vector<std::string>{"gpus"});
  EXPECT_EQ(o.devices[0].cdi_ids, std::vector<std::string>{"gpu-agent.github.io/claim=u1-gpu-1"});
  const std::string path = dir_.Join("cdi/gpu-agent.github.io-claim_u1.json");
  EXPECT_EQ(preparer_->SpecPath("u1"), path);
  rapidjson::Document spec;
  spec.Parse(ReadFile(path).c_str());
  ASSERT_FALSE(spec.HasParseError());
  EXPECT_STREQ(spec["kind"].GetString(), "gpu-agent.github.io/claim");
  ASSERT_EQ(spec["devices"].Size(), 2u);
  EXPECT_STREQ(spec["devices"][0]["name"].GetString(), "u1-gpu-1");
  EXPECT_STREQ(spec["devices"][0]["containerEdits"]["deviceNodes"][0]["path"].GetString(),
               "/dev/nvidia1");
  EXPECT_STREQ(spec["containerEdits"]["deviceNodes"][0]["path"].GetString(), "/dev/nvidiactl");
}

TEST_F(ClaimPreparerTest, PrepareIsIdempotentAndSurvivesARestart) {
  Put("one", Claim("u1", {{"gpus", kDriver, kPool, "gpu-0"}}));
  const PrepareOutcome first = PrepareOne("one", "u1");
  ASSERT_EQ(first.error, "");
  const PrepareOutcome again = PrepareOne("one", "u1");
  EXPECT_EQ(again.devices.size(), 1u);
  EXPECT_EQ(again.devices[0].cdi_ids, first.devices[0].cdi_ids);
  EXPECT_EQ(reader_->gets, 1);  // answered from what was prepared
  Restart();
  EXPECT_EQ(preparer_->Prepared().count("u1"), 1u);
  EXPECT_EQ(PrepareOne("one", "u1").devices[0].cdi_ids, first.devices[0].cdi_ids);
  EXPECT_EQ(reader_->gets, 1);
}

TEST_F(ClaimPreparerTest, EachBadClaimGetsItsOwnErrorAndTheGoodOneIsPrepared) {
  Put("good", Claim("u-good", {{"r", kDriver, kPool, "gpu-0"}}));
  Put("mismatch", Claim("u-other", {{"r", kDriver, kPool, "gpu-0"}}));
  Put("unallocated",
      R"({"metadata":{"name":"unallocated","namespace":"ns","uid":"u-un"},"status":{}})");
  Put("foreign", Claim("u-foreign", {{"r", "other.example.com", kPool, "gpu-0"},
                                     {"r", kDriver, "node-b", "gpu-0"}}));
  Put("unknown", Claim("u-unknown", {{"r", kDriver, kPool, "gpu-9"}}));
  Put("forbidden", R"({"kind":"Status","message":"resourceclaims is forbidden","code":403})", 403);
  std::map<std::string, PrepareOutcome> out = preparer_->Prepare({{"ns", "u-good", "good"},
                                                                  {"ns", "u-mismatch", "mismatch"},
                                                                  {"ns", "u-un", "unallocated"},
                                                                  {"ns", "u-foreign", "foreign"},
                                                                  {"ns", "u-unknown", "unknown"},
                                                                  {"ns", "u-gone", "gone"},
                                                                  {"ns", "u-403", "forbidden"}});
  ASSERT_EQ(out.size(), 7u);
  EXPECT_EQ(out["u-good"].error, "");
  EXPECT_EQ(out["u-good"].devices.size(), 1u);
  auto has = [&](const std::string& uid, const std::string& text) {
    EXPECT_NE(out[uid].error.find(text), std::string::npos) << uid << ": " << out[uid].error;
    EXPECT_TRUE(out[uid].devices.empty()) << uid;
    EXPECT_FALSE(PathExists(preparer_->SpecPath(uid))) << uid;
  };
  has("u-mismatch", "claim ns/mismatch: UID mismatch: the kubelet asked for u-mismatch");
  has("u-un", "claim ns/unallocated has no allocation");
  has("u-foreign",
      "no device of driver gpu.gpu-agent.github.io in pool node-a allocated (it has "
      "other.example.com/node-a/gpu-0, gpu.gpu-agent.github.io/node-b/gpu-0)");
  has("u-unknown", "device \"gpu-9\" is not one of this node's");
  has("u-gone", "claim ns/gone (u-gone) is gone from the API server");
  has("u-403", "the API server answered 403: resourceclaims is forbidden");
}

// Our GpuConfig asking time-slicing at `interval`: the opaque parameters.
std::string GpuConfig(const std::string& interval) {
  return std::string(R"({"apiVersion":")") + kDriver +
         R"(/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicing":{"interval":")" +
         interval + R"("}}})";
}

// A claim of gpu-0 with `params` as its allocation's opaque parameters for
// this driver (and one for another driver, which is not ours to read).
std::string ClaimWithConfig(const std::string& uid, const std::string& params) {
  std::string json = Claim(uid, {{"r", kDriver, kPool, "gpu-0"}});
  const std::string results = R"("results":[)";
  const size_t at = json.find(results);
  return json.insert(
      at,
      R"("config":[{"source":"FromClaim","requests":["r"],"opaque":{"driver":"other.example.com","parameters":{"kind":"Whatever"}}},{"source":"FromClaim","requests":["r"],"opaque":{"driver":")" +
          std::string(kDriver) + R"(","parameters":)" + params + "}}],");
}

TEST_F(ClaimPreparerTest, OpaqueConfigIsOurGpuConfigOrTheClaimIsRefusedNamingIt) {
  const std::string v = std::string(R"("apiVersion":")") + kDriver + R"(/v1alpha1")";
  Put("ok",
      ClaimWithConfig(
          "u-ok",
          "{" + v +
              R"(,"kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicing":{"interval":"Long"}}})"));
  Put("kind", ClaimWithConfig("u-kind", "{" + v + R"(,"kind":"MpsConfig"})"));
  Put("interval",
      ClaimWithConfig(
          "u-int",
          "{" + v +
              R"(,"kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicing":{"interval":"Forever"}}})"));
  Put("field", ClaimWithConfig("u-field", "{" + v + R"(,"kind":"GpuConfig","replicas":3})"));
  std::map<std::string, PrepareOutcome> out = preparer_->Prepare({{"ns", "u-ok", "ok"},
                                                                  {"ns", "u-kind", "kind"},
                                                                  {"ns", "u-int", "interval"},
                                                                  {"ns", "u-field", "field"}});
  EXPECT_EQ(out["u-ok"].error, "");
  EXPECT_EQ(out["u-kind"].error,
            "claim ns/kind: opaque config kind \"MpsConfig\" is not one gpu.gpu-agent.github.io "
            "knows (it knows GpuConfig)");
  EXPECT_NE(out["u-int"].error.find("interval \"Forever\" is not one of Default, Short"),
            std::string::npos)
      << out["u-int"].error;
  EXPECT_NE(out["u-field"].error.find("unknown field \"replicas\""), std::string::npos)
      << out["u-field"].error;
}

// A GpuConfig's interval is set on the GPU of each request it names (none:
// every request), the class's first and the claim's over it, before the
// spec is written; a refusal is the claim's error and writes nothing; a
// MIG device is refused by name.
TEST_F(ClaimPreparerTest, AGpuConfigsTimeSliceIsSetOnItsRequestsGpusBeforeTheSpec) {
  auto config = [&](const std::string& source, const std::string& requests,
                    const std::string& interval) {
    return R"({"source":")" + source + R"(","requests":[)" + requests +
           R"(],"opaque":{"driver":")" + kDriver + R"(","parameters":)" + GpuConfig(interval) +
           "}}";
  };
  std::string json = Claim("u1", {{"a", kDriver, kPool, "gpu-0"}, {"b", kDriver, kPool, "gpu-1"}});
  // The claim's config (listed first) overrides its class's for "a"; the
  // class's alone applies to "b".
  json.insert(json.find(R"("results":[)"), R"("config":[)" +
                                               config("FromClaim", R"("a")", "Short") + "," +
                                               config("FromClass", "", "Long") + "],");
  Put("one", json);
  ASSERT_EQ(PrepareOne("one", "u1").error, "");
  EXPECT_EQ(SlicesSet(), (std::vector<std::string>{"GPU-0=Short", "GPU-1=Long"}));

  // The tool refuses: the claim's own error, naming device and interval;
  // no spec written.
  slice_status_ = absl::FailedPreconditionError("nvidia-smi compute-policy failed (exit code 3)");
  Put("two", ClaimWithConfig("u2", GpuConfig("Medium")));
  const std::string error = PrepareOne("two", "u2").error;
  EXPECT_EQ(error,
            "claim ns/two: cannot set the time slice of device \"gpu-0\" (GPU-0) to Medium: "
            "nvidia-smi compute-policy failed (exit code 3)");
  EXPECT_FALSE(PathExists(preparer_->SpecPath("u2")));

  // A MIG device: refused by name, nothing asked of the tool (which is
  // there, and would answer with its own failure).
  auto catalog = std::make_shared<DeviceCatalog>(*TwoGpus());
  catalog->devices[0].attributes["type"] = AttributeValue::String("mig");
  preparer_->SetCatalog(catalog);
  const size_t asked = SlicesSet().size();
  EXPECT_EQ(PrepareOne("two", "u2").error,
            "claim ns/two: device \"gpu-0\" is a mig device; GpuConfig time-slicing applies to "
            "whole GPUs");
  EXPECT_EQ(SlicesSet().size(), asked);

  // No way to set it on this node: refused, saying so.
  options_.set_time_slice = nullptr;
  Restart();
  EXPECT_EQ(PrepareOne("two", "u2").error,
            "claim ns/two: GpuConfig time-slicing (Medium) cannot be set on this node");
}

// A claim's time slice is set back to Default when the last claim that set
// it on that GPU is unprepared, also after a restart (the checkpoint keeps
// which GPUs a claim set); a claim that asked Default leaves nothing to set
// back; a failure to set it back is logged and the unprepare succeeds.
TEST_F(ClaimPreparerTest, AClaimsTimeSliceIsSetBackToDefaultWhenTheLastClaimSettingItIsUnprepared) {
  Put("one", ClaimWithConfig("u1", GpuConfig("Long")));
  Put("two", ClaimWithConfig("u2", GpuConfig("Long")));
  Put("plain", ClaimWithConfig("u3", GpuConfig("Default")));
  ASSERT_EQ(PrepareOne("one", "u1").error, "");
  ASSERT_EQ(PrepareOne("two", "u2").error, "");
  ASSERT_EQ(PrepareOne("plain", "u3").error, "");
  EXPECT_EQ(SlicesSet(), (std::vector<std::string>{"GPU-0=Long", "GPU-0=Long", "GPU-0=Default"}));
  Restart();
  // u2 still holds GPU-0's Long: nothing set.
  EXPECT_EQ(preparer_->Unprepare({{"ns", "u1", "one"}})["u1"], "");
  EXPECT_EQ(SlicesSet().size(), 3u);
  // The claim that asked Default set nothing to set back.
  EXPECT_EQ(preparer_->Unprepare({{"ns", "u3", "plain"}})["u3"], "");
  EXPECT_EQ(SlicesSet().size(), 3u);
  // The last one: Default again.
  EXPECT_EQ(preparer_->Unprepare({{"ns", "u2", "two"}})["u2"], "");
  EXPECT_EQ(SlicesSet().back(), "GPU-0=Default");
  EXPECT_EQ(SlicesSet().size(), 4u);
  // An unprepare asked again, or of a claim never prepared: nothing set.
  EXPECT_EQ(preparer_->Unprepare({{"ns", "u2", "two"}})["u2"], "");
  EXPECT_EQ(SlicesSet().size(), 4u);

  // Setting it back fails: logged, the unprepare answered without error.
  ASSERT_EQ(PrepareOne("one", "u1").error, "");
  slice_status_ = absl::FailedPreconditionError("nvidia-smi compute-policy failed (exit code 3)");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(preparer_->Unprepare({{"ns", "u1", "one"}})["u1"], "");
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("cannot set a GPU's time slice back to Default"), std::string::npos) << log;
  EXPECT_NE(log.find("exit code 3"), std::string::npos) << log;
  EXPECT_TRUE(preparer_->Prepared().empty());
}

// A claim that set a time slice and is then not prepared (a later device of
// it unhealthy, or its checkpoint unwritable) sets it back: the kubelet may
// never unprepare a claim it was never told is prepared.
TEST_F(ClaimPreparerTest, ATimeSliceSetByAClaimThatIsNotPreparedIsSetBack) {
  std::string json = Claim("u1", {{"a", kDriver, kPool, "gpu-0"}, {"b", kDriver, kPool, "gpu-1"}});
  json.insert(json.find(R"("results":[)"),
              R"("config":[{"source":"FromClaim","opaque":{"driver":")" + std::string(kDriver) +
                  R"(","parameters":)" + GpuConfig("Long") + "}}],");
  Put("one", json);
  preparer_->SetUnhealthy({"gpu-1"});
  EXPECT_EQ(PrepareOne("one", "u1").error, "claim ns/one: device \"gpu-1\" is unhealthy");
  EXPECT_EQ(SlicesSet(), (std::vector<std::string>{"GPU-0=Long", "GPU-0=Default"}));

  // Prepared, but its checkpoint cannot be written.
  preparer_->SetUnhealthy({});
  const std::string checkpoint = dir_.Join("plugin/checkpoint.json");
  std::filesystem::remove(checkpoint);
  std::filesystem::create_directories(checkpoint + "/in-the-way");
  EXPECT_EQ(PrepareOne("one", "u1").error.rfind("prepared, but ", 0), 0u);
  EXPECT_EQ(SlicesSet(),
            (std::vector<std::string>{"GPU-0=Long", "GPU-0=Default", "GPU-0=Long", "GPU-1=Long",
                                      "GPU-0=Default", "GPU-1=Default"}));
}

// An unprepare whose checkpoint cannot be written keeps the claim prepared
// (and its GPUs' time slices), so the kubelet's retry writes the checkpoint;
// otherwise the checkpoint on disk would hold the claim for good.
TEST_F(ClaimPreparerTest, AnUnprepareWhoseCheckpointCannotBeWrittenIsDoneAgainOnTheRetry) {
  Put("one", ClaimWithConfig("u1", GpuConfig("Long")));
  ASSERT_EQ(PrepareOne("one", "u1").error, "");
  const std::string checkpoint = dir_.Join("plugin/checkpoint.json");
  std::filesystem::remove(checkpoint);
  std::filesystem::create_directories(checkpoint + "/in-the-way");
  const std::string failed = preparer_->Unprepare({{"ns", "u1", "one"}})["u1"];
  EXPECT_EQ(failed.rfind("unprepared, but ", 0), 0u) << failed;
  EXPECT_EQ(preparer_->Prepared().count("u1"), 1u);
  EXPECT_EQ(SlicesSet(), std::vector<std::string>{"GPU-0=Long"});  // not set back yet
  std::filesystem::remove_all(checkpoint);
  EXPECT_EQ(preparer_->Unprepare({{"ns", "u1", "one"}})["u1"], "");
  EXPECT_EQ(SlicesSet(), (std::vector<std::string>{"GPU-0=Long", "GPU-0=Default"}));
  Restart();
  EXPECT_TRUE(preparer_->Prepared().empty());
}

// The checkpoint cannot be written: the claim is answered with that error
// and not kept as prepared, so the kubelet's retry prepares it again and is
// answered only once the checkpoint holds it.
TEST_F(ClaimPreparerTest, AClaimWhoseCheckpointCannotBeWrittenIsPreparedAgainOnTheRetry) {
  Put("one", Claim("u1", {{"r", kDriver, kPool, "gpu-0"}}));
  const std::string checkpoint = dir_.Join("plugin/checkpoint.json");
  std::filesystem::remove(checkpoint);
  std::filesystem::create_directories(checkpoint + "/in-the-way");  // rename cannot replace it
  const PrepareOutcome failed = PrepareOne("one", "u1");
  EXPECT_EQ(failed.error.rfind("prepared, but ", 0), 0u) << failed.error;
  EXPECT_TRUE(failed.devices.empty());
  EXPECT_TRUE(preparer_->Prepared().empty());
  std::filesystem::remove_all(checkpoint);
  const int gets = reader_->gets;
  ASSERT_EQ(PrepareOne("one", "u1").error, "");
  EXPECT_EQ(reader_->gets, gets + 1);  // read again, not answered from memory
  EXPECT_NE(ReadFile(checkpoint).find("u1"), std::string::npos);
}

TEST_F(ClaimPreparerTest, AnUnhealthyDeviceIsRefusedByName) {
  Put("one", Claim("u1", {{"r", kDriver, kPool, "gpu-1"}}));
  preparer_->SetUnhealthy({"gpu-1"});
  EXPECT_EQ(PrepareOne("one", "u1").error, "claim ns/one: device \"gpu-1\" is unhealthy");
  preparer_->SetUnhealthy({});
  EXPECT_EQ(PrepareOne("one", "u1").error, "");
}

TEST_F(ClaimPreparerTest, UnprepareRemovesTheSpecAndAnUnknownClaimSucceeds) {
  Put("one", Claim("u1", {{"r", kDriver, kPool, "gpu-0"}}));
  ASSERT_EQ(PrepareOne("one", "u1").error, "");
  ASSERT_TRUE(PathExists(preparer_->SpecPath("u1")));
  std::map<std::string, std::string> out =
      preparer_->Unprepare({{"ns", "u1", "one"}, {"ns", "never", "x"}});
  EXPECT_EQ(out, (std::map<std::string, std::string>{{"u1", ""}, {"never", ""}}));
  EXPECT_FALSE(PathExists(preparer_->SpecPath("u1")));
  Restart();
  EXPECT_TRUE(preparer_->Prepared().empty());
}

TEST_F(ClaimPreparerTest, ACorruptCheckpointIsMovedAsideAndRebuiltFromTheSpecs) {
  Put("one", Claim("u1", {{"r", kDriver, kPool, "gpu-0"}}));
  ASSERT_EQ(PrepareOne("one", "u1").error, "");
  dir_.Write("plugin/checkpoint.json", "{\"version\":1,\"claims\":[tru");
  Restart();
  EXPECT_EQ(ReadFile(dir_.Join("plugin/checkpoint.json.corrupt")),
            "{\"version\":1,\"claims\":[tru");
  std::map<std::string, PrepareOutcome> prepared = preparer_->Prepared();
  ASSERT_EQ(prepared.count("u1"), 1u);
  ASSERT_EQ(prepared["u1"].devices.size(), 1u);
  EXPECT_EQ(prepared["u1"].devices[0].device, "gpu-0");
  EXPECT_EQ(prepared["u1"].devices[0].cdi_ids,
            std::vector<std::string>{"gpu-agent.github.io/claim=u1-gpu-0"});
  // The rebuilt checkpoint is written: a further restart has the claim
  // without the specs being read again, and unprepare removes the spec.
  Restart();
  EXPECT_EQ(preparer_->Prepared().count("u1"), 1u);
  EXPECT_EQ(preparer_->Unprepare({{"", "u1", ""}})["u1"], "");
  EXPECT_FALSE(PathExists(preparer_->SpecPath("u1")));
}

TEST_F(ClaimPreparerTest, APreparedClaimAskedAgainIsAnsweredWithoutWritingAnything) {
  Put("one", Claim("u1", {{"r", kDriver, kPool, "gpu-0"}}));
  ASSERT_EQ(PrepareOne("one", "u1").error, "");
  // A spec is replaced by a rename (a new inode); the checkpoint is
  // written in place with a new sequence number in its slot's header.
  const ino_t spec = InodeOf(preparer_->SpecPath("u1"));
  const std::string checkpoint = ReadFile(options_.checkpoint);
  ASSERT_NE(spec, 0u);
  ASSERT_NE(checkpoint, "");
  EXPECT_EQ(PrepareOne("one", "u1").devices.size(), 1u);
  EXPECT_EQ(InodeOf(preparer_->SpecPath("u1")), spec);
  EXPECT_EQ(ReadFile(options_.checkpoint), checkpoint);
}

// What an older version wrote (the checkpoint as plain JSON) is loaded, and
// the next save writes it in slots, in place from then on.
TEST_F(ClaimPreparerTest, AnOlderVersionsPlainCheckpointIsLoadedAndThenKeptInSlots) {
  dir_.Write("plugin/checkpoint.json",
             R"({"version":1,"claims":{"u1":{"namespace":"ns","name":"one","devices":[)"
             R"({"requests":["r"],"pool":"node-a","device":"gpu-0",)"
             R"("cdiIds":["gpu-agent.github.io/claim=u1-gpu-0"]}]}}})");
  Restart();
  std::map<std::string, PrepareOutcome> prepared = preparer_->Prepared();
  ASSERT_EQ(prepared.count("u1"), 1u);
  EXPECT_EQ(prepared["u1"].devices[0].request_names, std::vector<std::string>{"r"});
  Put("two", Claim("u2", {{"r", kDriver, kPool, "gpu-1"}}));
  ASSERT_EQ(PrepareOne("two", "u2").error, "");
  EXPECT_EQ(ReadFile(options_.checkpoint).rfind("{\"slot\":", 0), 0u);
  const ino_t inode = InodeOf(options_.checkpoint);
  EXPECT_EQ(preparer_->Unprepare({{"ns", "u1", "one"}})["u1"], "");
  EXPECT_EQ(InodeOf(options_.checkpoint), inode);
  Restart();
  EXPECT_EQ(preparer_->Prepared().count("u1"), 0u);
  EXPECT_EQ(preparer_->Prepared().count("u2"), 1u);
}

// A crash of the machine in the middle of a checkpoint write: that slot is
// spoilt, the one before it holds. Both spoilt: named, moved aside and
// rebuilt from the specs.
TEST_F(ClaimPreparerTest, ACheckpointWriteCutShortLeavesTheOneBeforeIt) {
  Put("one", Claim("u1", {{"r", kDriver, kPool, "gpu-0"}}));
  Put("two", Claim("u2", {{"r", kDriver, kPool, "gpu-1"}}));
  ASSERT_EQ(PrepareOne("one", "u1").error, "");
  ASSERT_EQ(PrepareOne("two", "u2").error, "");
  // The newest record (the one that names u2 in its claims) loses bytes.
  std::string text = ReadFile(options_.checkpoint);
  const size_t at = text.rfind("\"u2\":{");
  ASSERT_NE(at, std::string::npos);
  text[at + 1] = 'X';
  dir_.Write("plugin/checkpoint.json", text);
  Restart();
  // u1 from the record before; u2 from its spec (the kubelet was not
  // answered for it), so read again when asked.
  std::map<std::string, PrepareOutcome> prepared = preparer_->Prepared();
  ASSERT_EQ(prepared.count("u1"), 1u);
  EXPECT_EQ(prepared["u1"].devices[0].request_names, std::vector<std::string>{"r"});
  ASSERT_EQ(prepared.count("u2"), 1u);
  EXPECT_TRUE(prepared["u2"].devices[0].request_names.empty());
  EXPECT_FALSE(PathExists(options_.checkpoint + ".corrupt"));
  // Both slots spoilt.
  text = ReadFile(options_.checkpoint);
  for (size_t i = 0; i < text.size(); i += text.size() / 2) text[i] = 'X';
  dir_.Write("plugin/checkpoint.json", text);
  ::testing::internal::CaptureStderr();
  Restart();
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(PathExists(options_.checkpoint + ".corrupt"));
  // Each slot's fault named (slot 1 of the file the restart made was never
  // written).
  EXPECT_NE(log.find("problem=\"slot 0: a header that cannot be read; slot 1: no header line\""),
            std::string::npos)
      << log;
  EXPECT_EQ(preparer_->Prepared().size(), 2u);  // from the specs
}

// A crash after a claim's spec was renamed into place and before the
// checkpoint was: the kubelet had no answer. The spec is taken in, so an
// unprepare finds the claim; a prepare reads the claim again (the spec
// holds no request names) and answers in full.
TEST_F(ClaimPreparerTest, ASpecTheCheckpointLacksIsTakenIn) {
  Put("one", Claim("u1", {{"r", kDriver, kPool, "gpu-0"}}));
  Put("two", Claim("u2", {{"gpus", kDriver, kPool, "gpu-1"}}));
  ASSERT_EQ(PrepareOne("one", "u1").error, "");
  const std::string before = ReadFile(options_.checkpoint);
  ASSERT_EQ(PrepareOne("two", "u2").error, "");
  dir_.Write("plugin/checkpoint.json", before);  // as if the crash came first
  Restart();
  std::map<std::string, PrepareOutcome> prepared = preparer_->Prepared();
  ASSERT_EQ(prepared.count("u2"), 1u);
  ASSERT_EQ(prepared["u2"].devices.size(), 1u);
  EXPECT_EQ(prepared["u2"].devices[0].cdi_ids,
            std::vector<std::string>{"gpu-agent.github.io/claim=u2-gpu-1"});
  const int gets = reader_->gets;
  const PrepareOutcome again = PrepareOne("two", "u2");
  EXPECT_EQ(reader_->gets, gets + 1);
  ASSERT_EQ(again.devices.size(), 1u);
  EXPECT_EQ(again.devices[0].request_names, std::vector<std::string>{"gpus"});
  // Taken in before the checkpoint existed at all, and unprepared from it.
  std::filesystem::remove(options_.checkpoint);
  Restart();
  EXPECT_EQ(preparer_->Prepared().size(), 2u);
  EXPECT_EQ(preparer_->Unprepare({{"ns", "u1", "one"}})["u1"], "");
  EXPECT_FALSE(PathExists(preparer_->SpecPath("u1")));
  Restart();
  EXPECT_EQ(preparer_->Prepared().count("u1"), 0u);
  EXPECT_EQ(preparer_->Prepared().count("u2"), 1u);
}

// A crash of the machine after the checkpoint reached the disk and before
// a spec did (specs are not flushed): the spec is missing or empty. The
// empty one is removed (no runtime can use it); the entry stays, so the
// kubelet's unprepare after a reboot finds it, and its prepare writes the
// spec again.
TEST_F(ClaimPreparerTest, ACheckpointEntryWhoseSpecIsMissingOrCutIsPreparedAgain) {
  Put("one", Claim("u1", {{"r", kDriver, kPool, "gpu-0"}}));
  Put("two", Claim("u2", {{"r", kDriver, kPool, "gpu-1"}}));
  ASSERT_EQ(preparer_->Prepare({{"ns", "u1", "one"}, {"ns", "u2", "two"}})["u2"].error, "");
  const std::string spec = ReadFile(preparer_->SpecPath("u1"));
  std::filesystem::remove(preparer_->SpecPath("u1"));
  dir_.Write("cdi/gpu-agent.github.io-claim_u2.json", "");
  Restart();
  EXPECT_FALSE(PathExists(preparer_->SpecPath("u2")));
  EXPECT_EQ(preparer_->Prepared().size(), 2u);
  const int gets = reader_->gets;
  const PrepareOutcome again = PrepareOne("one", "u1");
  EXPECT_EQ(reader_->gets, gets + 1);
  EXPECT_EQ(again.error, "");
  EXPECT_EQ(ReadFile(preparer_->SpecPath("u1")), spec);
  EXPECT_EQ(preparer_->Unprepare({{"ns", "u2", "two"}})["u2"], "");
  Restart();
  EXPECT_EQ(preparer_->Prepared().count("u2"), 0u);
  EXPECT_EQ(preparer_->Prepared().count("u1"), 1u);
}

// Names from the kubelet go into the claim's URL and its UID into a file
// name: anything Kubernetes itself would refuse is the claim's own error,
// with no GET and no file touched, and the other claims are prepared.
TEST_F(ClaimPreparerTest, AClaimNamedAsKubernetesAllowsNoneIsRefusedWithoutAGet) {
  Put("good", Claim("u-good", {{"r", kDriver, kPool, "gpu-0"}}));
  const std::string victim = dir_.Write("victim.json", "keep");
  const int gets = reader_->gets;
  std::map<std::string, PrepareOutcome> out =
      preparer_->Prepare({{"ns", "u-good", "good"},
                          {"default/../../../api/v1/secrets?x=", "u-path", "c"},
                          {"ns", "u-name", "../../../api/v1/secrets"},
                          {"ns", "../victim", "c"},
                          {"ns", "u/1", "c"},
                          {"ns", "", "c"},
                          {"ns", std::string(200, 'a'), "c"},
                          {"Upper", "u-upper", "c"}});
  EXPECT_EQ(out["u-good"].error, "");
  EXPECT_EQ(reader_->gets, gets + 1);  // the good one's alone
  EXPECT_EQ(out["u-path"].error,
            "claim default/../../../api/v1/secrets?x=/c cannot be a ResourceClaim: its "
            "namespace is not a DNS subdomain (lowercase letters, digits, '-' and '.', each part "
            "starting and ending with a letter or digit)");
  EXPECT_EQ(out["u-name"].error,
            "claim ns/../../../api/v1/secrets cannot be a ResourceClaim: its name is not a DNS "
            "subdomain (lowercase letters, digits, '-' and '.', each part starting and ending "
            "with a letter or digit)");
  EXPECT_EQ(out["../victim"].error,
            "claim ns/c cannot be a ResourceClaim: UID \"../victim\" has a character other than "
            "a letter, a digit or '-'");
  EXPECT_NE(out["u/1"].error.find("has a character other than"), std::string::npos);
  EXPECT_EQ(out[""].error, "claim ns/c cannot be a ResourceClaim: no UID");
  EXPECT_NE(out[std::string(200, 'a')].error.find("UID of 200 characters, over 128"),
            std::string::npos);
  EXPECT_NE(out["u-upper"].error.find("its namespace is not a DNS subdomain"), std::string::npos)
      << out["u-upper"].error;
  EXPECT_EQ(preparer_->Prepare({{"a.b", "u-dot", "c"}})["u-dot"].error,
            "claim a.b/c cannot be a ResourceClaim: its namespace is not a DNS label (at most 63 "
            "characters, no '.')");
  // Unprepare of such a UID touches no file either.
  EXPECT_EQ(preparer_->Unprepare({{"ns", "../victim", "c"}})["../victim"], "");
  EXPECT_EQ(ReadFile(victim), "keep");
}

// An API server answer nested 200,000 deep overflowed the recursive
// parser's stack (SIGSEGV): now the claim's error.
TEST_F(ClaimPreparerTest, AClaimNestedPastTheLimitIsTheClaimsErrorNotACrash) {
  Put("deep", std::string(200000, '[') + std::string(200000, ']'));
  std::string config = Claim("u-cfg", {{"r", kDriver, kPool, "gpu-0"}});
  config.insert(config.find(R"("results":[)"),
                R"("config":[{"source":"FromClaim","opaque":{"driver":")" + std::string(kDriver) +
                    R"(","parameters":)" + std::string(1000, '[') + std::string(1000, ']') +
                    "}}],");
  Put("cfg", config);
  std::map<std::string, PrepareOutcome> out =
      preparer_->Prepare({{"ns", "u-deep", "deep"}, {"ns", "u-cfg", "cfg"}});
  EXPECT_EQ(out["u-deep"].error,
            "claim ns/deep: the API server's answer nests arrays and objects deeper than 128 "
            "levels");
  EXPECT_EQ(out["u-cfg"].error,
            "claim ns/cfg: the API server's answer nests arrays and objects deeper than 128 "
            "levels");
}

// Files planted in the CDI spec folder under the agent's names (a pod with
// a hostPath can): a deep one crashed every start, a link was followed, a
// FIFO would block. Each is removed (the link itself, not what it names)
// and the agent starts.
TEST_F(ClaimPreparerTest, FilesPlantedInTheSpecFolderNeitherCrashNorAreFollowed) {
  Put("one", Claim("u1", {{"r", kDriver, kPool, "gpu-0"}}));
  ASSERT_EQ(PrepareOne("one", "u1").error, "");
  const std::string prefix = dir_.Join("cdi/gpu-agent.github.io-claim_");
  dir_.Write("cdi/gpu-agent.github.io-claim_deep.json",
             std::string(300000, '[') + std::string(300000, ']'));
  const std::string victim = dir_.Write("victim.json", R"({"devices":[]})");
  ASSERT_EQ(::symlink(victim.c_str(), (prefix + "link.json").c_str()), 0);
  ASSERT_EQ(::mkfifo((prefix + "fifo.json").c_str(), 0600), 0);
  dir_.Write("cdi/gpu-agent.github.io-claim_bad..uid.json", R"({"devices":[]})");
  Restart();  // Load reads the folder
  EXPECT_EQ(preparer_->Prepared().count("u1"), 1u);
  for (const char* name : {"deep", "link", "fifo", "bad..uid"}) {
    EXPECT_FALSE(std::filesystem::exists(std::filesystem::symlink_status(prefix + name + ".json")))
        << name;
  }
  EXPECT_EQ(ReadFile(victim), R"({"devices":[]})");
  EXPECT_EQ(preparer_->Prepared().size(), 1u);
}

// A link planted at the checkpoint's name is not read (it is reported and
// moved aside) and never written through.
TEST_F(ClaimPreparerTest, ALinkAtTheCheckpointIsNeitherReadNorWrittenThrough) {
  const std::string victim = dir_.Write("victim", "precious");
  ::chmod(victim.c_str(), 0600);
  std::filesystem::remove(options_.checkpoint);
  ASSERT_EQ(::symlink(victim.c_str(), options_.checkpoint.c_str()), 0);
  Restart();
  Put("one", Claim("u1", {{"r", kDriver, kPool, "gpu-0"}}));
  ASSERT_EQ(PrepareOne("one", "u1").error, "");
  EXPECT_EQ(ReadFile(victim), "precious");
  struct stat st;
  ASSERT_EQ(::lstat(options_.checkpoint.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

// The folders it writes in are made with their modes, and one another user
// can write is refused at the start, naming the setting.
TEST_F(ClaimPreparerTest, FoldersOthersCanWriteAreRefused) {
  struct stat st;
  ASSERT_EQ(::stat(options_.cdi_dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  ASSERT_EQ(::stat(dir_.Join("plugin").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0750u);
  ASSERT_EQ(::chmod(options_.cdi_dir.c_str(), 0777), 0);
  auto p = ClaimPreparer::Create(options_, reader_);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("cdi.specDir: the folder \"" + options_.cdi_dir +
                                      "\" (mode 0777) can be written by other users"),
            std::string::npos)
      << p.status();
}

// A batch's claims are read several at a time (the reader holds each GET
// until kConcurrentReads are under way; one at a time, each would wait out
// its 5 s), and every claim is answered and checkpointed.
TEST_F(ClaimPreparerTest, ABatchReadsItsClaimsConcurrently) {
  std::vector<ClaimRef> batch;
  for (int i = 0; i < 6; ++i) {
    const std::string n = std::to_string(i);
    Put("c" + n, Claim("u" + n, {{"r", kDriver, kPool, "gpu-" + std::to_string(i % 2)}}));
    batch.push_back({"ns", "u" + n, "c" + n});
  }
  batch.push_back(batch[0]);  // asked twice: prepared once
  reader_->hold = static_cast<int>(kConcurrentReads);
  const auto start = std::chrono::steady_clock::now();
  std::map<std::string, PrepareOutcome> out = preparer_->Prepare(batch);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));
  EXPECT_EQ(reader_->max_at_once, static_cast<int>(kConcurrentReads));
  EXPECT_EQ(reader_->gets, 6);
  ASSERT_EQ(out.size(), 6u);
  for (const auto& [uid, o] : out) {
    EXPECT_EQ(o.error, "") << uid;
    EXPECT_EQ(o.devices.size(), 1u) << uid;
  }
  Restart();
  EXPECT_EQ(preparer_->Prepared().size(), 6u);
}

}  // namespace
}  // namespace gpu_agent::dra
