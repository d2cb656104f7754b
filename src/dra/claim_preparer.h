// Prepares and unprepares ResourceClaims for the DRA service: for each claim
// the kubelet names, reads the claim from the API server (through a
// ClaimReader), checks its UID, takes this driver's results for this node's
// pool, writes one CDI spec for the claim and answers with the CDI ids of
// its devices; or answers that claim's own error. What is prepared is kept
// in a checkpoint file, so a restarted agent answers again and unprepares
// what it prepared before.
//
// The claim's CDI spec: kind "<cdi vendor>/claim", one device per allocated
// device named "<claim UID>-<device>" ("<claim UID>-<device>_<shareID>" for
// a share of a shared device: ClaimCdiName), with that device's edits from the
// node's CDI spec and the node spec's common edits; the file is
// "<vendor>-claim_<claim UID>.json" in the CDI folder, written atomically.
#ifndef GPU_AGENT_DRA_CLAIM_PREPARER_H_
#define GPU_AGENT_DRA_CLAIM_PREPARER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "base/file_lock.h"
#include "base/slotted_file.h"
#include "cdi/spec.h"
#include "dra/claim_allocation.h"
#include "dra/claim_checkpoint.h"
#include "dra/claim_handler.h"
#include "dra/claim_ref.h"
#include "dra/device_taint.h"
#include "dra/dra_device.h"

namespace gpu_agent::dra {

// How a claim is read: the API server's answer to its GET (any HTTP code),
// or a transport error. Thread-safe: a batch's claims are read up to
// kConcurrentReads at a time.
class ClaimReader {
 public:
  virtual ~ClaimReader() = default;
  struct Answer {
    int status = 0;
    std::string body;
  };
  virtual absl::StatusOr<Answer> GetClaim(const std::string& name_space,
                                          const std::string& name) = 0;
};

// The devices claims can be given, and the node's CDI spec their edits come
// from (devices named by UUID there). Replaced whole on a reload.
struct DeviceCatalog {
  std::vector<DraDevice> devices;
  cdi::Spec node_spec;
};

inline constexpr size_t kConcurrentReads = 4;

// A claim's device's name in the claim's CDI spec: "<claim UID>-<device>",
// with "_<shareID>" for a share (a device name has no '_', so the spec
// read back tells the device and the share apart).
std::string ClaimCdiName(const std::string& uid, const std::string& device,
                         const std::string& share_id);

struct PreparerOptions {
  std::string driver;      // results of other drivers are not ours
  std::string pool;        // this node's pool (the node name)
  std::string cdi_dir;     // where the claims' specs go
  std::string cdi_vendor;  // the claims' CDI kind is "<vendor>/claim"
  std::string checkpoint;  // the checkpoint file
  // Sets a whole GPU's compute time slice ("Default", "Short", "Medium",
  // "Long"), as a claim's GpuConfig asks; null: a claim that asks is
  // refused, saying so. Called before the claim's spec is written, from a
  // batch's reading threads.
  std::function<absl::Status(const std::string& uuid, const std::string& interval)> set_time_slice;
  // Held (flock) for each prepare and unprepare call and while the
  // checkpoint is loaded, so instances on one node (a rolling update's
  // old and new) share the checkpoint: each call reads it again when
  // another has written it since. Empty: no lock.
  std::string lock_file;
};

class ClaimPreparer : public ClaimHandler {
 public:
  // Loads the checkpoint. A checkpoint that cannot be parsed is named in an
  // error log line, moved aside (<file>.corrupt) and rebuilt from the
  // claims' specs in the CDI folder. Then the two are made to agree, as a
  // crash between a prepare's steps can leave them (see Prepare): a spec
  // the checkpoint lacks is taken in, a spec that cannot be parsed is
  // removed, an entry whose spec is missing is kept (unprepare needs no
  // spec; the next prepare writes it again). Errors: the CDI folder or the
  // checkpoint's folder cannot be created.
  static absl::StatusOr<std::unique_ptr<ClaimPreparer>> Create(PreparerOptions options,
                                                               std::shared_ptr<ClaimReader> reader);

  void SetCatalog(std::shared_ptr<const DeviceCatalog> catalog);
  // The taints of devices (by name) that are unhealthy or degraded now:
  // prepare refuses a device whose NoSchedule or NoExecute taint the
  // claim's result does not tolerate, unless the result asks for admin
  // access.
  void SetTaints(std::map<std::string, DeviceTaint> taints);
  // Physical GPUs (by UUID) that something other than this driver holds,
  // each with who ("device-plugin pods ml/a, ml/b"): prepare refuses a
  // claim any of whose devices is on one, admin access or not, naming the
  // holder. A node moving from the device plugin to DRA has them until the
  // pods that hold them end.
  void SetWithheld(std::map<std::string, std::string> holders);

  // Durability: each claim's spec is renamed into place without waiting
  // for the disk; then the checkpoint, once for the batch, is written in
  // place and flushed (base/slotted_file: fdatasync, no rename) before the
  // kubelet is answered. What a crash leaves is put
  // right by Create: a spec without its checkpoint entry (the kubelet was
  // not answered) is taken in; after a crash of the machine, an entry whose
  // spec did not reach the disk (missing, or cut: removed) is prepared
  // again when the kubelet asks, as it does before it starts the claim's
  // containers again. A claim prepared before whose spec is in place is
  // answered without reading it or writing anything. The others of a batch
  // are read and written up to kConcurrentReads at a time.
  std::map<std::string, PrepareOutcome> Prepare(const std::vector<ClaimRef>& claims) override;
  std::map<std::string, std::string> Unprepare(const std::vector<ClaimRef>& claims) override;

  // Prepared claims by UID, as the checkpoint holds them.
  std::map<std::string, PrepareOutcome> Prepared() const;
  // The same, whole: each claim's name and devices.
  PreparedClaims PreparedEntries() const;
  // The claim's CDI spec file.
  std::string SpecPath(const std::string& uid) const;
  std::string CdiKind() const { return options_.cdi_vendor + "/claim"; }

 private:
  using Entry = PreparedClaim;
  static std::vector<PreparedDevice> AnswerOf(const Entry& e);
  // One info line per claim of `uids` newly prepared: its devices and
  // shares.
  void LogPrepared(const std::vector<std::string>& uids) const;
  // REQUIRES: mu_ held. Why the prepared claim `e` cannot be answered as
  // it was: a device of it whose name the node now gives a GPU or MIG
  // device of another UUID; empty when none.
  std::string MovedLocked(const ClaimRef& c, const Entry& e) const;
  // Who else has a device, without admin access: prepared for, or held for
  // in this batch, by claims other than `uid`, each "claim <ns>/<name>
  // (<uid>)".
  struct Use {
    std::string whole;                 // a claim that has it whole; "" when none
    int64_t shares = 0;                // shares claims hold of it
    std::vector<std::string> sharers;  // ... those claims
  };
  // REQUIRES: mu_ held.
  Use UseLocked(const DraDevice& device, const std::string& uid) const;
  // REQUIRES: mu_ held. Devices of prepared claims that carry no UUID (a
  // checkpoint an earlier version wrote, whose devices were named after
  // NVML's index) matched to the catalog's by the device nodes their CDI
  // spec gives, so UseLocked sees them under today's names.
  void ResolveLegacyDevicesLocked();
  ClaimPreparer(PreparerOptions options, std::shared_ptr<ClaimReader> reader);
  void Load();
  // REQUIRES: `hold` holds lock_ (or failed to). Reads the checkpoint
  // again when someone else wrote it since this process last did.
  void CatchUpLocked(const FileLockHolder& hold);
  // The claims' specs in the CDI folder, by UID, as entries; a spec that
  // cannot be parsed is removed, named in a warning.
  std::map<std::string, Entry> ReadSpecs() const;
  absl::Status Save();
  // One claim; an error message, or empty with `*entry` filled.
  std::string PrepareOne(const ClaimRef& claim, Entry* entry);
  // The claim's allocation as the API server has it; errors name the claim.
  absl::StatusOr<std::vector<AllocatedDevice>> ReadAllocation(const ClaimRef& claim);
  // A result's device and its entry in the node's CDI spec.
  struct Found {
    const DraDevice* device = nullptr;
    const cdi::Device* edits = nullptr;
  };
  // Each result's device, checked: on this node, in the node's CDI spec,
  // not withheld, not tainted against the claim. An error message, or empty.
  struct Keep {
    std::map<std::string, DeviceTaint> taints;    // taints_ when the claim was read
    std::map<std::string, std::string> withheld;  // withheld_ then
  };
  std::string FindDevices(const ClaimRef& claim, const std::vector<AllocatedDevice>& allocated,
                          const DeviceCatalog& catalog, const Keep& keep,
                          std::vector<Found>* found) const;
  // Holds the claim's devices (but admin access's) for the batch, unless
  // another claim holds or has one prepared: an error message, or empty.
  std::string Hold(const ClaimRef& claim, const std::vector<AllocatedDevice>& allocated,
                   const std::vector<Found>& found);
  // The time slice a claim's GpuConfig asks of `device` ("": none); an
  // error message, or empty.
  std::string SetTimeSlice(const DraDevice& device, const std::string& interval);
  // Sets each GPU's time slice back to Default unless a claim still
  // prepared set it too; a failure is logged, never the unprepare's error.
  void ResetTimeSlices(const std::vector<std::string>& uuids);

  const PreparerOptions options_;
  const std::shared_ptr<ClaimReader> reader_;

  mutable std::mutex mu_;
  std::shared_ptr<const DeviceCatalog> catalog_;  // protected by mu_
  std::map<std::string, DeviceTaint> taints_;     // protected by mu_: by device name
  std::map<std::string, std::string> withheld_;   // protected by mu_: GPU UUID -> holder
  // Devices (by UUID) of the batch's claims prepared so far, without admin
  // access, until the batch ends: two claims of one batch cannot both
  // take one.
  struct Held {
    ClaimRef claim;
    int64_t shares = 0;  // 0: whole
  };
  std::multimap<std::string, Held> held_;  // protected by mu_
  std::map<std::string, Entry> prepared_;  // protected by mu_: by claim UID

  std::unique_ptr<FileLock> lock_;   // null without options_.lock_file
  SlottedStamp stamp_;               // protected by mu_: the checkpoint as last read or written
  std::mutex save_mu_;               // one Save at a time; taken before mu_
  SlottedWriter checkpoint_writer_;  // protected by save_mu_
};

}  // namespace gpu_agent::dra

#endif  // GPU_AGENT_DRA_CLAIM_PREPARER_H_
