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
#include <map>
#include <mutex>
#include <thread>

#include "base/file_lock.h"
#include "base/file_util.h"
#include "base/slotted_file.h"
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

// A claim allocated `results`: (request, driver, pool, device). Its
// spec.devices.requests are the results' requests, a "<request>/<sub>"
// making <request> a prioritized list (firstAvailable) with <sub> in it.
std::string Claim(const std::string& uid, const std::vector<std::array<std::string, 4>>& results) {
  std::string r;
  std::map<std::string, std::vector<std::string>> requests;
  for (const auto& [req, driver, pool, device] : results) {
    if (!r.empty()) r += ",";
    r += R"({"request":")" + req + R"(","driver":")" + driver + R"(","pool":")" + pool +
         R"(","device":")" + device + R"("})";
    const size_t slash = req.find('/');
    std::vector<std::string>& subs = requests[req.substr(0, slash)];
    if (slash != std::string::npos) subs.push_back(req.substr(slash + 1));
  }
  std::string spec;
  for (const auto& [name, subs] : requests) {
    if (!spec.empty()) spec += ",";
    spec += R"({"name":")" + name + R"(")";
    if (subs.empty()) {
      spec += R"(,"exactly":{"deviceClassName":"gpu.gpu-agent.github.io"}})";
      continue;
    }
    spec += R"(,"firstAvailable":[)";
    for (size_t i = 0; i < subs.size(); ++i) {
      spec += std::string(i ? "," : "") + R"({"name":")" + subs[i] +
              R"(","deviceClassName":"gpu.gpu-agent.github.io"})";
    }
    spec += "]}";
  }
  return R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"c","namespace":"ns","uid":")" +
         uid + R"("},"spec":{"devices":{"requests":[)" + spec +
         R"(]}},"status":{"allocation":{"devices":{"results":[)" + r + "]}}}}";
}

// `json` with `fields` (JSON members) added to its result for `device`.
std::string WithResultFields(std::string json, const std::string& device,
                             const std::string& fields) {
  const std::string end = R"("device":")" + device + R"("})";
  return json.replace(json.find(end), end.size(),
                      R"("device":")" + device + R"(",)" + fields + "}");
}

std::shared_ptr<const DeviceCatalog> Gpus(int n) {
  auto c = std::make_shared<DeviceCatalog>();
  for (int i = 0; i < n; ++i) {
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

std::shared_ptr<const DeviceCatalog> TwoGpus() { return Gpus(2); }

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
                },
                ""};
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

// A config for this driver: GpuConfig asking `interval` for `requests`
// (a JSON list's items, "" for none).
std::string ConfigFor(const std::string& requests, const std::string& interval) {
  return R"({"source":"FromClaim","requests":[)" + requests + R"(],"opaque":{"driver":")" +
         kDriver + R"(","parameters":)" + GpuConfig(interval) + "}}";
}

// `json` with `configs` (JSON objects, comma-separated) as its allocation's
// config list.
std::string WithConfigs(std::string json, const std::string& configs) {
  return json.insert(json.find(R"("results":[)"), R"("config":[)" + configs + "],");
}

// Prioritized lists (firstAvailable): the scheduler's result names
// "<request>/<subrequest>"; the kubelet matches a container's request (a
// main one) against the answer's request names exactly, so the answer
// names the main request; a GpuConfig naming the main request applies to
// the subrequest's device, one naming the subrequest too.
TEST_F(ClaimPreparerTest, AFirstAvailableResultIsAnsweredUnderItsMainRequestWithItsConfig) {
  // No config: the main request's name, nothing set.
  Put("plain", Claim("u-plain", {{"gpu/small", kDriver, kPool, "gpu-0"}}));
  const PrepareOutcome plain = PrepareOne("plain", "u-plain");
  ASSERT_EQ(plain.error, "");
  ASSERT_EQ(plain.devices.size(), 1u);
  EXPECT_EQ(plain.devices[0].request_names, std::vector<std::string>{"gpu"});
  EXPECT_TRUE(SlicesSet().empty());
  ASSERT_EQ(preparer_->Unprepare({{"ns", "u-plain", "plain"}})["u-plain"], "");

  // A config for the main request reaches its subrequest's device; one for
  // the other request's subrequest by its full name reaches that one.
  Put("configured",
      WithConfigs(Claim("u-conf", {{"gpu/small", kDriver, kPool, "gpu-0"},
                                   {"spare/any", kDriver, kPool, "gpu-1"}}),
                  ConfigFor(R"("gpu")", "Long") + "," + ConfigFor(R"("spare/any")", "Short")));
  const PrepareOutcome conf = PrepareOne("configured", "u-conf");
  ASSERT_EQ(conf.error, "");
  ASSERT_EQ(conf.devices.size(), 2u);
  EXPECT_EQ(conf.devices[0].request_names, std::vector<std::string>{"gpu"});
  EXPECT_EQ(conf.devices[1].request_names, std::vector<std::string>{"spare"});
  EXPECT_EQ(SlicesSet(), (std::vector<std::string>{"GPU-0=Long", "GPU-1=Short"}));
  // The checkpoint answers the same after a restart.
  Restart();
  EXPECT_EQ(PrepareOne("configured", "u-conf").devices[0].request_names,
            std::vector<std::string>{"gpu"});
}

// What a claim's allocation may not name: each its own error naming the
// claim and why, and the good claim of the same call prepared.
TEST_F(ClaimPreparerTest, AResultOrConfigNamingWhatTheClaimLacksIsThatClaimsError) {
  Put("good", Claim("u-good", {{"gpu/small", kDriver, kPool, "gpu-0"}}));
  // The spec's "gpu" lists only "small".
  std::string sub = Claim("u-sub", {{"gpu/small", kDriver, kPool, "gpu-1"}});
  sub.replace(sub.find(R"("request":"gpu/small")"), 21, R"("request":"gpu/huge")");
  Put("sub", sub);
  std::string ghost = Claim("u-ghost", {{"gpu", kDriver, kPool, "gpu-1"}});
  ghost.replace(ghost.find(R"("request":"gpu")"), 15, R"("request":"ghost")");
  Put("ghost", ghost);
  Put("config", WithConfigs(Claim("u-config", {{"gpu", kDriver, kPool, "gpu-1"}}),
                            ConfigFor(R"("nope")", "Long")));
  Put("pool",
      Claim("u-pool", {{"gpu", kDriver, kPool, "gpu-1"}, {"gpu", kDriver, "node-b", "gpu-0"}}));
  std::map<std::string, PrepareOutcome> out = preparer_->Prepare({{"ns", "u-good", "good"},
                                                                  {"ns", "u-sub", "sub"},
                                                                  {"ns", "u-ghost", "ghost"},
                                                                  {"ns", "u-config", "config"},
                                                                  {"ns", "u-pool", "pool"}});
  EXPECT_EQ(out["u-good"].error, "");
  EXPECT_EQ(out["u-good"].devices.size(), 1u);
  EXPECT_EQ(out["u-sub"].error,
            "claim ns/sub: its allocation's result for device \"gpu-1\" names subrequest "
            "\"gpu/huge\", which request \"gpu\" does not list (firstAvailable: small)");
  EXPECT_EQ(out["u-ghost"].error,
            "claim ns/ghost: its allocation's result for device \"gpu-1\" names request "
            "\"ghost\", which the claim does not have (it has gpu)");
  EXPECT_EQ(out["u-config"].error,
            "claim ns/config: a config for gpu.gpu-agent.github.io names request \"nope\", "
            "which the claim does not have (it has gpu)");
  EXPECT_EQ(out["u-pool"].error,
            "claim ns/pool is allocated gpu.gpu-agent.github.io/node-b/gpu-0, a device of "
            "another node's pool (this node's is node-a)");
  for (const char* uid : {"u-sub", "u-ghost", "u-config", "u-pool"}) {
    EXPECT_TRUE(out[uid].devices.empty()) << uid;
    EXPECT_FALSE(PathExists(preparer_->SpecPath(uid))) << uid;
  }
  EXPECT_TRUE(SlicesSet().empty());
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
  ASSERT_EQ(preparer_->Unprepare({{"ns", "u1", "one"}})["u1"], "");  // gpu-0 free again

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
  // gpu-0 shared: the two others with admin access.
  const std::string admin = R"("adminAccess":true)";
  Put("one", ClaimWithConfig("u1", GpuConfig("Long")));
  Put("two", WithResultFields(ClaimWithConfig("u2", GpuConfig("Long")), "gpu-0", admin));
  Put("plain", WithResultFields(ClaimWithConfig("u3", GpuConfig("Default")), "gpu-0", admin));
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
  // gpu-1 is a MIG device, which takes no time slice: refused after
  // gpu-0's was set.
  auto catalog = std::make_shared<DeviceCatalog>(*TwoGpus());
  catalog->devices[1].attributes["type"] = AttributeValue::String("mig");
  preparer_->SetCatalog(catalog);
  EXPECT_EQ(PrepareOne("one", "u1").error,
            "claim ns/one: device \"gpu-1\" is a mig device; GpuConfig time-slicing applies to "
            "whole GPUs");
  EXPECT_EQ(SlicesSet(), (std::vector<std::string>{"GPU-0=Long", "GPU-0=Default"}));

  // Prepared, but its checkpoint cannot be written.
  preparer_->SetCatalog(TwoGpus());
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

// An unhealthy device stays in the slices with a taint, and the scheduler
// may allocate it to a claim that tolerates the taint or asks for admin
// access (a diagnostic pod): prepare gives it to those, and refuses it by
// name, with its taint, to any other.
TEST_F(ClaimPreparerTest, AnUnhealthyDeviceGoesOnlyToAClaimThatToleratesItsTaintOrIsAdmin) {
  const std::string key = std::string(kDriver) + "/unhealthy";
  preparer_->SetTaints({{"gpu-1", {key, "XID-79", TaintEffect::kNoSchedule}}});
  auto claim = [&](const std::string& uid, const std::string& fields) {
    const std::string json = Claim(uid, {{"r", kDriver, kPool, "gpu-1"}});
    return fields.empty() ? json : WithResultFields(json, "gpu-1", fields);
  };
  Put("plain", claim("u-plain", ""));
  Put("exists", claim("u-exists", R"("tolerations":[{"key":")" + key +
                                      R"(","operator":"Exists","effect":"NoSchedule"}])"));
  Put("equal", claim("u-equal", R"("tolerations":[{"key":")" + key +
                                    R"(","operator":"Equal","value":"XID-79"}])"));
  Put("everything", claim("u-all", R"("tolerations":[{"operator":"Exists"}])"));
  Put("other-value", claim("u-value", R"("tolerations":[{"key":")" + key +
                                          R"(","operator":"Equal","value":"XID-48"}])"));
  Put("other-effect", claim("u-effect", R"("tolerations":[{"key":")" + key +
                                            R"(","operator":"Exists","effect":"NoExecute"}])"));
  Put("admin", claim("u-admin", R"("adminAccess":true)"));
  // One claim at a time: each given the device is unprepared before the
  // next is asked.
  for (const auto& [name, uid] :
       std::vector<std::pair<std::string, std::string>>{{"exists", "u-exists"},
                                                        {"equal", "u-equal"},
                                                        {"everything", "u-all"},
                                                        {"admin", "u-admin"}}) {
    SCOPED_TRACE(name);
    EXPECT_EQ(PrepareOne(name, uid).error, "");
    EXPECT_EQ(preparer_->Unprepare({{"ns", uid, name}})[uid], "");
  }
  const std::string refusal =
      ": device \"gpu-1\" is unhealthy (taint gpu.gpu-agent.github.io/unhealthy=XID-79:NoSchedule, "
      "which the claim does not tolerate; admin access would take it)";
  EXPECT_EQ(PrepareOne("plain", "u-plain").error, "claim ns/plain" + refusal);
  EXPECT_EQ(PrepareOne("other-value", "u-value").error, "claim ns/other-value" + refusal);
  EXPECT_EQ(PrepareOne("other-effect", "u-effect").error, "claim ns/other-effect" + refusal);
  // A None taint (degraded) keeps no claim away; healthy again, all may.
  preparer_->SetTaints({{"gpu-1", {key, "temperature", TaintEffect::kNone}}});
  EXPECT_EQ(PrepareOne("plain", "u-plain").error, "");
  EXPECT_EQ(preparer_->Unprepare({{"ns", "u-plain", "plain"}})["u-plain"], "");
  preparer_->SetTaints({});
  EXPECT_EQ(PrepareOne("other-value", "u-value").error, "");
}

// The kubelet plugin helper's last line of defence: a device prepared for
// one claim is refused to another (naming both), in one call or across
// calls and restarts, until the first is unprepared; a claim with admin
// access shares it by design.
TEST_F(ClaimPreparerTest, ADeviceIsPreparedForOneClaimAtATimeAdminAccessExcepted) {
  Put("a", Claim("u-a", {{"r", kDriver, kPool, "gpu-0"}}));
  Put("b", Claim("u-b", {{"r", kDriver, kPool, "gpu-0"}}));
  Put("c", Claim("u-c", {{"r", kDriver, kPool, "gpu-1"}}));
  Put("d", Claim("u-d", {{"r", kDriver, kPool, "gpu-1"}}));
  Put("admin", WithResultFields(Claim("u-admin", {{"r", kDriver, kPool, "gpu-0"}}), "gpu-0",
                                R"("adminAccess":true)"));
  ASSERT_EQ(PrepareOne("a", "u-a").error, "");
  std::map<std::string, PrepareOutcome> out = preparer_->Prepare(
      {{"ns", "u-b", "b"}, {"ns", "u-c", "c"}, {"ns", "u-d", "d"}, {"ns", "u-admin", "admin"}});
  EXPECT_EQ(out["u-b"].error,
            "claim ns/b: device \"gpu-0\" (GPU-0) is already prepared for claim ns/a (u-a); a "
            "device serves one claim at a time (admin access excepted)");
  EXPECT_TRUE(out["u-b"].devices.empty());
  EXPECT_FALSE(PathExists(preparer_->SpecPath("u-b")));
  // c and d of one call: one of them gets gpu-1, the other is told which.
  const bool c_first = out["u-c"].error.empty();
  const std::string loser = c_first ? "u-d" : "u-c";
  EXPECT_NE(out[c_first ? "u-c" : "u-d"].devices.size(), 0u);
  EXPECT_EQ(out[loser].error, "claim ns/" + std::string(c_first ? "d" : "c") +
                                  ": device \"gpu-1\" (GPU-1) is already prepared for claim ns/" +
                                  (c_first ? "c (u-c)" : "d (u-d)") +
                                  "; a device serves one claim at a time (admin access excepted)");
  EXPECT_EQ(out["u-admin"].error, "");
  // The checkpoint keeps who holds what.
  Restart();
  EXPECT_NE(PrepareOne("b", "u-b").error.find("is already prepared for claim ns/a (u-a)"),
            std::string::npos);
  EXPECT_EQ(preparer_->Unprepare({{"ns", "u-a", "a"}})["u-a"], "");
  EXPECT_EQ(PrepareOne("b", "u-b").error, "");  // the admin claim still has it too
}

// A catalog of two GPUs, gpu-0 shared by `shares` claims (each taking at
// most `most`), gpu-1 whole.
std::shared_ptr<const DeviceCatalog> OneShared(int shares, int most) {
  auto c = std::make_shared<DeviceCatalog>(*TwoGpus());
  c->devices[0].sharing.shares = shares;
  c->devices[0].sharing.most_per_claim = most;
  return c;
}

// `json`'s result for `device` as a share: shareID `id`, consuming
// `shares`.
std::string AsShare(std::string json, const std::string& device, const std::string& id,
                    const std::string& shares = "1") {
  return WithResultFields(
      std::move(json), device,
      R"("shareID":")" + id + R"(","consumedCapacity":{"shares":")" + shares + R"("})");
}

// A shared device (time-sliced, published with consumable capacity) is
// prepared for as many claims as it has shares, each answered with its
// shareID under a CDI name of its own; one more is refused naming the
// holders, and gets it once one is unprepared. The checkpoint keeps the
// shares across a restart.
TEST_F(ClaimPreparerTest, ASharedDeviceServesClaimsUpToItsShares) {
  preparer_->SetCatalog(OneShared(3, 3));
  Put("a", AsShare(Claim("u-a", {{"r", kDriver, kPool, "gpu-0"}}), "gpu-0", "s-a"));
  Put("b", AsShare(Claim("u-b", {{"r", kDriver, kPool, "gpu-0"}}), "gpu-0", "s-b", "2"));
  Put("c", AsShare(Claim("u-c", {{"r", kDriver, kPool, "gpu-0"}}), "gpu-0", "s-c"));
  std::map<std::string, PrepareOutcome> out =
      preparer_->Prepare({{"ns", "u-a", "a"}, {"ns", "u-b", "b"}});
  ASSERT_EQ(out["u-a"].error, "");
  ASSERT_EQ(out["u-b"].error, "");
  ASSERT_EQ(out["u-a"].devices.size(), 1u);
  EXPECT_EQ(out["u-a"].devices[0].share_id, "s-a");
  EXPECT_EQ(out["u-a"].devices[0].cdi_ids,
            std::vector<std::string>{"gpu-agent.github.io/claim=u-a-gpu-0_s-a"});
  EXPECT_EQ(out["u-b"].devices[0].share_id, "s-b");
  const std::string refused =
      "claim ns/c: device \"gpu-0\" (GPU-0) has 3 shares; claim ns/a (u-a), claim ns/b (u-b) hold "
      "3, this claim asks 1";
  EXPECT_EQ(PrepareOne("c", "u-c").error, refused);
  Restart();
  preparer_->SetCatalog(OneShared(3, 3));
  EXPECT_EQ(preparer_->Prepared()["u-a"].devices[0].share_id, "s-a");
  EXPECT_EQ(PrepareOne("c", "u-c").error, refused);
  EXPECT_EQ(preparer_->Unprepare({{"ns", "u-a", "a"}})["u-a"], "");
  const PrepareOutcome c = PrepareOne("c", "u-c");
  ASSERT_EQ(c.error, "");
  EXPECT_EQ(c.devices[0].share_id, "s-c");
  // A claim holding two shares of the device (two requests) is named once.
  EXPECT_EQ(preparer_->Unprepare({{"ns", "u-b", "b"}, {"ns", "u-c", "c"}})["u-b"], "");
  std::string two =
      Claim("u-d", {{"r1", kDriver, kPool, "gpu-0"}, {"r2", kDriver, kPool, "gpu-0"}});
  two = WithResultFields(std::move(two), "gpu-0", R"("shareID":"s-d1")");
  Put("d", AsShare(std::move(two), "gpu-0", "s-d2"));
  const PrepareOutcome d = PrepareOne("d", "u-d");
  ASSERT_EQ(d.error, "");
  EXPECT_EQ(d.devices.size(), 2u);
  Put("e", AsShare(Claim("u-e", {{"r", kDriver, kPool, "gpu-0"}}), "gpu-0", "s-e", "2"));
  EXPECT_EQ(PrepareOne("e", "u-e").error,
            "claim ns/e: device \"gpu-0\" (GPU-0) has 3 shares; claim ns/d (u-d) holds 2, this "
            "claim asks 2");
}

// Shares and whole devices do not mix: a claim given a shared device whole
// (allocated while the server published it whole) keeps others off it, a
// share keeps a whole claim off, a share of a device this node does not
// share is refused, and a share's shareID and consumed shares must be what
// the scheduler writes. Each error names the claim and what is wrong.
TEST_F(ClaimPreparerTest, SharesAndWholeDevicesDoNotMixAndBadSharesAreRefused) {
  preparer_->SetCatalog(OneShared(4, 4));
  Put("whole", Claim("u-w", {{"r", kDriver, kPool, "gpu-0"}}));
  Put("share", AsShare(Claim("u-s", {{"r", kDriver, kPool, "gpu-0"}}), "gpu-0", "s-1"));
  ASSERT_EQ(PrepareOne("whole", "u-w").error, "");
  EXPECT_EQ(PrepareOne("share", "u-s").error,
            "claim ns/share: device \"gpu-0\" (GPU-0) is already prepared whole for claim "
            "ns/whole (u-w)");
  EXPECT_EQ(preparer_->Unprepare({{"ns", "u-w", "whole"}})["u-w"], "");
  ASSERT_EQ(PrepareOne("share", "u-s").error, "");
  EXPECT_EQ(PrepareOne("whole", "u-w").error,
            "claim ns/whole: device \"gpu-0\" (GPU-0) is already prepared for claim ns/share "
            "(u-s); a device serves one claim at a time (admin access excepted)");
  Put("not-shared", AsShare(Claim("u-n", {{"r", kDriver, kPool, "gpu-1"}}), "gpu-1", "s-2"));
  EXPECT_EQ(PrepareOne("not-shared", "u-n").error,
            "claim ns/not-shared: device \"gpu-1\" (GPU-1) is allocated as a share (shareID s-2), "
            "but this node does not share it (sharing.timeSlicing does not name it)");
  Put("bad-id", AsShare(Claim("u-b1", {{"r", kDriver, kPool, "gpu-0"}}), "gpu-0", "../x"));
  EXPECT_EQ(PrepareOne("bad-id", "u-b1").error,
            "claim ns/bad-id: its result for device \"gpu-0\": shareID: UID \"../x\" has a "
            "character other than a letter, a digit or '-'");
  Put("bad-count",
      AsShare(Claim("u-b2", {{"r", kDriver, kPool, "gpu-0"}}), "gpu-0", "s-3", "500m"));
  EXPECT_EQ(PrepareOne("bad-count", "u-b2").error,
            "claim ns/bad-count: its result for device \"gpu-0\": consumedCapacity.shares "
            "\"500m\" is not a whole number of shares from 1 to 1024");
  // Past any device's shares (and an overflow of the sums, were it taken):
  // refused at once; "1k" is a quantity the scheduler could write.
  Put("huge", AsShare(Claim("u-b4", {{"r", kDriver, kPool, "gpu-0"}}), "gpu-0", "s-5",
                      "4611686018427387904"));
  EXPECT_NE(PrepareOne("huge", "u-b4").error.find("is not a whole number of shares from 1 to 1024"),
            std::string::npos);
  Put("kilo", AsShare(Claim("u-b5", {{"r", kDriver, kPool, "gpu-0"}}), "gpu-0", "s-6", "1k"));
  EXPECT_EQ(PrepareOne("kilo", "u-b5").error,
            "claim ns/kilo: device \"gpu-0\" (GPU-0) is allocated 1000 of its shares; a claim may "
            "take at most 4");
  Put("too-many", AsShare(Claim("u-b3", {{"r", kDriver, kPool, "gpu-0"}}), "gpu-0", "s-4", "4"));
  EXPECT_EQ(PrepareOne("too-many", "u-b3").error,
            "claim ns/too-many: device \"gpu-0\" (GPU-0) has 4 shares; claim ns/share (u-s) holds "
            "1, this claim asks 4");
  EXPECT_FALSE(PathExists(preparer_->SpecPath("u-b3")));
}

// One claim may take a shared device's shares up to its per-claim most
// (1 under failRequestsGreaterThanOne), counted over all its results, and
// never the device both whole and as a share.
TEST_F(ClaimPreparerTest, AClaimTakesAtMostItsShareOfADeviceAndNotItWholeBeside) {
  preparer_->SetCatalog(OneShared(4, 1));
  std::string two =
      Claim("u-2", {{"r1", kDriver, kPool, "gpu-0"}, {"r2", kDriver, kPool, "gpu-0"}});
  two = WithResultFields(std::move(two), "gpu-0", R"("shareID":"s-1")");
  Put("two", AsShare(std::move(two), "gpu-0", "s-2"));
  EXPECT_EQ(PrepareOne("two", "u-2").error,
            "claim ns/two: device \"gpu-0\" (GPU-0) is allocated 2 of its shares; a claim may take "
            "at most 1 (failRequestsGreaterThanOne)");
  std::string mixed =
      Claim("u-m", {{"r1", kDriver, kPool, "gpu-0"}, {"r2", kDriver, kPool, "gpu-0"}});
  Put("mixed", AsShare(std::move(mixed), "gpu-0", "s-3"));
  EXPECT_EQ(
      PrepareOne("mixed", "u-m").error,
      "claim ns/mixed: device \"gpu-0\" (GPU-0) is allocated to it both whole and as a share");
  EXPECT_TRUE(preparer_->Prepared().empty());
}

// A checkpoint lost: the claims are taken back from their specs on disk,
// a share by its CDI name ("<uid>-<device>_<shareID>"), so the device it
// names is still held (as one share) and not handed whole to another.
TEST_F(ClaimPreparerTest, ASharedClaimIsTakenBackFromItsSpecWhenTheCheckpointIsLost) {
  preparer_->SetCatalog(OneShared(2, 2));
  Put("share", AsShare(Claim("u-s", {{"r", kDriver, kPool, "gpu-0"}}), "gpu-0", "s-1"));
  ASSERT_EQ(PrepareOne("share", "u-s").error, "");
  ASSERT_EQ(::unlink(options_.checkpoint.c_str()), 0);
  Restart();
  preparer_->SetCatalog(OneShared(2, 2));
  const PreparedClaims entries = preparer_->PreparedEntries();
  ASSERT_EQ(entries.count("u-s"), 1u);
  ASSERT_EQ(entries.at("u-s").devices.size(), 1u);
  EXPECT_EQ(entries.at("u-s").devices[0].answer.device, "gpu-0");
  EXPECT_EQ(entries.at("u-s").devices[0].answer.share_id, "s-1");
  EXPECT_EQ(entries.at("u-s").devices[0].shares, 1);
  Put("whole", Claim("u-w", {{"r", kDriver, kPool, "gpu-0"}}));
  EXPECT_NE(PrepareOne("whole", "u-w").error.find("is already prepared for claim / (u-s)"),
            std::string::npos);
}

// Two instances on one node, as a rolling update's old and new pods: one
// checkpoint, shared under its lock, each call reading what the other
// wrote since: a claim one prepared the other answers, unprepares and
// counts as holding its device; a call waits while the other holds the
// lock.
TEST_F(ClaimPreparerTest, TwoInstancesShareTheCheckpointUnderItsLock) {
  options_.lock_file = dir_.Join("plugin/serialize.lock");
  Restart();
  absl::StatusOr<std::unique_ptr<ClaimPreparer>> made = ClaimPreparer::Create(options_, reader_);
  ASSERT_TRUE(made.ok()) << made.status();
  std::unique_ptr<ClaimPreparer> other = *std::move(made);
  other->SetCatalog(TwoGpus());
  Put("one", Claim("u1", {{"r", kDriver, kPool, "gpu-0"}}));
  Put("two", Claim("u2", {{"r", kDriver, kPool, "gpu-1"}}));
  Put("three", Claim("u3", {{"r", kDriver, kPool, "gpu-0"}}));
  ASSERT_EQ(PrepareOne("one", "u1").error, "");
  ASSERT_EQ(other->Prepare({{"ns", "u2", "two"}})["u2"].error, "");
  // The other knows u1 holds gpu-0; this one answers u2 from the
  // checkpoint (no GET).
  EXPECT_EQ(other->Prepare({{"ns", "u3", "three"}})["u3"].error,
            "claim ns/three: device \"gpu-0\" (GPU-0) is already prepared for claim ns/one (u1); a "
            "device serves one claim at a time (admin access excepted)");
  const int gets = reader_->gets;
  EXPECT_EQ(PrepareOne("two", "u2").error, "");
  EXPECT_EQ(reader_->gets, gets);
  // What one prepared the other unprepares; the first then sees gpu-0 free.
  EXPECT_EQ(other->Unprepare({{"ns", "u1", "one"}})["u1"], "");
  EXPECT_FALSE(PathExists(preparer_->SpecPath("u1")));
  EXPECT_EQ(PrepareOne("three", "u3").error, "");
  EXPECT_EQ(preparer_->Prepared().count("u1"), 0u);

  // A call waits for the lock the other instance holds.
  absl::StatusOr<std::unique_ptr<FileLock>> held = FileLock::Open(options_.lock_file);
  ASSERT_TRUE(held.ok());
  ASSERT_TRUE((*held)->Lock().ok());
  std::atomic<bool> done{false};
  std::thread call([&] {
    other->Unprepare({{"ns", "u3", "three"}});
    done = true;
  });
  // Blocked on the lock (the kernel lists its request behind ours), not
  // merely not yet done.
  EXPECT_TRUE(gpu_agent::testing::WaitFor(
      [&] { return gpu_agent::testing::SomeoneWaitsForLock(options_.lock_file); }));
  EXPECT_FALSE(done);
  EXPECT_TRUE(PathExists(preparer_->SpecPath("u3")));
  (*held)->Unlock();
  call.join();
  EXPECT_FALSE(PathExists(preparer_->SpecPath("u3")));
  Restart();
  EXPECT_EQ(preparer_->Prepared().size(), 1u);  // u2
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

// Devices were named after NVML's index before (gpu-1); a claim prepared
// then keeps that name in the checkpoint, with no UUID. Its GPU is found
// by the device nodes of its CDI spec, so a claim of that GPU under
// today's name is refused while the old claim holds it: the GPU is never
// prepared for two claims across the upgrade.
TEST_F(ClaimPreparerTest, AClaimAnEarlierVersionPreparedStillHoldsItsGpuUnderTheNewName) {
  dir_.Write("plugin/checkpoint.json",
             R"({"version":1,"claims":{"u1":{"namespace":"ns","name":"old","devices":[)"
             R"({"requests":["r"],"pool":"node-a","device":"gpu-index-1",)"
             R"("cdiIds":["gpu-agent.github.io/claim=u1-gpu-index-1"]}]}}})");
  dir_.Write("cdi/gpu-agent.github.io-claim_u1.json",
             R"({"cdiVersion":"0.6.0","kind":"gpu-agent.github.io/claim","devices":[)"
             R"({"name":"u1-gpu-index-1","containerEdits":{"deviceNodes":[)"
             R"({"path":"/dev/nvidia1"}]}}],"containerEdits":{}})");
  Restart();
  ASSERT_EQ(preparer_->Prepared().count("u1"), 1u);
  Put("new", Claim("u2", {{"r", kDriver, kPool, "gpu-1"}}));
  const std::string error = PrepareOne("new", "u2").error;
  EXPECT_NE(error.find("device \"gpu-1\" (GPU-1) is already prepared for claim ns/old (u1)"),
            std::string::npos)
      << error;
  Put("other", Claim("u3", {{"r", kDriver, kPool, "gpu-0"}}));
  EXPECT_EQ(PrepareOne("other", "u3").error, "");
  // Once the old claim is unprepared, its GPU is free.
  EXPECT_EQ(preparer_->Unprepare({{"ns", "u1", "old"}})["u1"], "");
  EXPECT_EQ(PrepareOne("new", "u2").error, "");
}

// The checkpoint keeps each prepared device's UUID. After a restart that
// finds a device's name on another GPU (the card in that slot replaced, or
// a name that moved), the claim is refused, naming the claim and both
// UUIDs, and its spec is left as it was; the other claims of the call are
// answered. A version 1 checkpoint (no UUIDs) still loads, its claims
// answered as before.
TEST_F(ClaimPreparerTest, APreparedClaimWhoseDeviceNowHasAnotherUuidIsRefused) {
  Put("one", Claim("u1", {{"r", kDriver, kPool, "gpu-1"}}));
  Put("two", Claim("u2", {{"r", kDriver, kPool, "gpu-0"}}));
  ASSERT_EQ(PrepareOne("one", "u1").error, "");
  ASSERT_EQ(PrepareOne("two", "u2").error, "");
  EXPECT_NE(
      ReadSlotted(options_.checkpoint)
          .record.find(
              R"("device":"gpu-1","cdiIds":["gpu-agent.github.io/claim=u1-gpu-1"],"uuid":"GPU-1")"),
      std::string::npos)
      << ReadSlotted(options_.checkpoint).record;
  const std::string spec = ReadFile(preparer_->SpecPath("u1"));
  Restart();
  auto swapped = std::make_shared<DeviceCatalog>(*TwoGpus());
  swapped->devices[1].uuid = "GPU-1-replacement";
  swapped->node_spec.devices.push_back({"GPU-1-replacement", {}});
  preparer_->SetCatalog(swapped);
  std::map<std::string, PrepareOutcome> out =
      preparer_->Prepare({{"ns", "u1", "one"}, {"ns", "u2", "two"}});
  EXPECT_EQ(out["u1"].error,
            "claim ns/one: device \"gpu-1\" was prepared as GPU-1 and is now GPU-1-replacement "
            "(the GPU was replaced or moved since); its containers would get another device than "
            "the one prepared, so the claim is refused and its CDI spec left as it was");
  EXPECT_TRUE(out["u1"].devices.empty());
  EXPECT_EQ(ReadFile(preparer_->SpecPath("u1")), spec);
  EXPECT_EQ(out["u2"].error, "");
  EXPECT_EQ(out["u2"].devices.size(), 1u);
  // Unprepare needs no device: it succeeds.
  EXPECT_EQ(preparer_->Unprepare({{"ns", "u1", "one"}})["u1"], "");
  EXPECT_FALSE(PathExists(preparer_->SpecPath("u1")));

  // A version 1 checkpoint: no UUID to compare, answered as it was.
  dir_.Write("plugin/checkpoint.json",
             R"({"version":1,"claims":{"u3":{"namespace":"ns","name":"three","devices":[)"
             R"({"requests":["r"],"pool":"node-a","device":"gpu-1",)"
             R"("cdiIds":["gpu-agent.github.io/claim=u3-gpu-1"]}]}}})");
  dir_.Write(
      "cdi/gpu-agent.github.io-claim_u3.json",
      R"({"cdiVersion":"0.5.0","kind":"gpu-agent.github.io/claim","devices":[{"name":"u3-gpu-1","containerEdits":{}}]})");
  Restart();
  preparer_->SetCatalog(swapped);
  EXPECT_EQ(PrepareOne("three", "u3").error, "");
  EXPECT_EQ(reader_->gets, 2);  // answered from the checkpoint
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
    Put("c" + n, Claim("u" + n, {{"r", kDriver, kPool, "gpu-" + n}}));
    batch.push_back({"ns", "u" + n, "c" + n});
  }
  preparer_->SetCatalog(Gpus(6));
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
