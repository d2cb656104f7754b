// A stand-in for NVIDIA's libnvidia-ml.so.1, driven by a fixture file
// (FAKE_NVML_FIXTURE) and, while running, by text commands written to a FIFO
// (FAKE_NVML_CONTROL). It exports NVML's C symbols with NVIDIA's signatures so
// the agent, or any other NVML client, loads it through the ordinary dlopen
// path. Thread-safe: one mutex guards all state; event waits block outside it.

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "device_answers.h"
#include "fixture.h"
#include "health_answers.h"
#include "nvml/nvml_api.h"

#define NVML_EXPORT extern "C" __attribute__((visibility("default")))

// The opaque handle types NVML hands out.
struct nvmlDevice_st : fake_nvml::DeviceNode<nvmlDevice_st> {};

struct nvmlEventSet_st {
  int efd = -1;
  std::deque<nvmlEventData_t> queue;
  std::vector<std::pair<nvmlDevice_t, unsigned long long>> registrations;
};

namespace {

struct State {
  std::mutex mu;
  int init_count = 0;
  bool loaded = false;
  std::string fixture_path;
  fake_nvml::Fixture fixture;
  std::vector<std::unique_ptr<nvmlDevice_st>> gpus;
  std::vector<nvmlEventSet_st*> sets;
  int control_fd = -1;
  std::string control_path;
  std::string control_buffer;
  int forced_init_error = 0;
  int wait_error = 0;
  int wait_error_count = 0;
  bool hang_wait = false;  // nvmlEventSetWait blocks, timeout or not, until "unhang-wait"
};

State& S() {
  static State* s = new State;  // never destroyed: NVML clients may call during exit
  return *s;
}

void Note(const std::string& msg) {
  std::string line = "fake-nvml: " + msg + "\n";
  (void)!::write(STDERR_FILENO, line.data(), line.size());
}

nvmlDevice_t FindGpu(State& s, const std::string& selector) {
  for (auto& g : s.gpus) {
    if (g->gpu.uuid == selector || std::to_string(g->index) == selector) return g.get();
  }
  return nullptr;
}

void PushEvent(State& s, nvmlDevice_t dev, unsigned long long type, unsigned long long data,
               unsigned gi, unsigned ci) {
  for (nvmlEventSet_st* set : s.sets) {
    for (const auto& [d, mask] : set->registrations) {
      if (d == dev && (mask & type)) {
        nvmlEventData_t ev{};
        ev.device = dev;
        ev.eventType = type;
        ev.eventData = data;
        ev.gpuInstanceId = gi;
        ev.computeInstanceId = ci;
        set->queue.push_back(ev);
        uint64_t one = 1;
        (void)!::write(set->efd, &one, sizeof one);
        break;
      }
    }
  }
}

// Applies one control command. REQUIRES: s.mu held.
void ApplyCommand(State& s, const std::string& line) {
  std::istringstream in(line);
  std::string verb;
  if (!(in >> verb) || verb[0] == '#') return;
  std::string target;
  if (verb == "init-error") {
    in >> s.forced_init_error;
    return;
  }
  if (verb == "wait-error") {
    int count = 1;
    in >> s.wait_error >> count;
    s.wait_error_count = count;
    return;
  }
  if (verb == "hang-wait" || verb == "unhang-wait") {
    s.hang_wait = verb == "hang-wait";
    return;
  }
  in >> target;
  nvmlDevice_t dev = FindGpu(s, target);
  if (dev == nullptr) {
    Note("control: no GPU \"" + target + "\" for command: " + line);
    return;
  }
  if (verb == "xid") {
    unsigned long long xid = 0;
    unsigned gi = NVML_MIG_INSTANCE_ID_NONE, ci = NVML_MIG_INSTANCE_ID_NONE;
    in >> xid;
    in >> gi >> ci;
    // What the hardware is left in, as NVIDIA's XID catalogue and memory
    // error guide describe: off the bus (79) answers nothing; memory errors
    // leave a row remap pending and the driver asking for a reset; NVLink
    // and GSP errors leave the driver asking for a reset. NVML keeps
    // answering in every case but 79.
    fake_nvml::GpuFixture& g = dev->gpu;
    switch (xid) {
      case 79:
        g.lost = true;
        break;
      case 48:
      case 63:
      case 92:
      case 95:
        g.remap_pending = true;
        g.pages_pending = true;
        g.recovery_action = NVML_GPU_RECOVERY_ACTION_GPU_RESET;
        break;
      case 64:
        g.remap_failed = true;
        g.recovery_action = NVML_GPU_RECOVERY_ACTION_GPU_RESET;
        break;
      case 74:
      case 119:
      case 120:
      case 154:
        g.recovery_action = NVML_GPU_RECOVERY_ACTION_GPU_RESET;
        break;
      default:
        break;
    }
    if (xid == 48 || xid == 95) ++g.health.ecc_uncorrected;  // an uncorrectable ECC error
    PushEvent(s, dev, nvmlEventTypeXidCriticalError, xid, gi, ci);
  } else if (verb == "lose") {
    dev->gpu.lost = true;
    PushEvent(s, dev, nvmlEventTypeXidCriticalError, 79, NVML_MIG_INSTANCE_ID_NONE,
              NVML_MIG_INSTANCE_ID_NONE);
  } else if (verb == "vanish") {
    // Off the bus with no XID delivered: the next event wait on a set that
    // has this GPU answers GPU_IS_LOST, as NVML does.
    dev->gpu.lost = true;
    s.wait_error = NVML_ERROR_GPU_IS_LOST;
    s.wait_error_count = 1;
  } else if (verb == "reset") {
    // nvidia-smi -r: back on the bus, nothing pending, nothing asked for.
    // The reset tears down the driver's state for the GPU, event
    // notifiers included: event sets keep no registration for it, and a
    // client that wants its events registers it again.
    fake_nvml::GpuFixture& g = dev->gpu;
    g.lost = g.remap_pending = g.remap_failed = g.pages_pending = false;
    g.recovery_action = NVML_GPU_RECOVERY_ACTION_NONE;
    // The volatile ECC counts start again, and the NVLink links train up.
    g.health.ecc_uncorrected = 0;
    g.health.nvlinks_down.clear();
    for (nvmlEventSet_st* set : s.sets) {
      auto& regs = set->registrations;
      regs.erase(
          std::remove_if(regs.begin(), regs.end(), [&](const auto& r) { return r.first == dev; }),
          regs.end());
    }
  } else if (verb == "restore") {
    // Gone: hardware has no way back from off the bus but a reset.
    Note("control: \"restore\" is gone; a lost GPU comes back with \"reset " + target + "\"");
  } else if (verb == "set") {
    // set <gpu> <field> <value>: a health field, as the fixture names it.
    std::string field, value, error;
    in >> field >> value;
    if (!fake_nvml::SetGpuField(&dev->gpu, field, value, &error)) {
      Note("control: " + error + " in: " + line);
    }
  } else if (verb == "fail") {
    std::string fn;
    int code = 999;
    in >> fn >> code;
    dev->gpu.failures[fn] = code;
  } else if (verb == "unfail") {
    std::string fn;
    in >> fn;
    dev->gpu.failures.erase(fn);
  } else {
    Note("control: unknown command: " + line);
  }
}

// Reads whatever commands are waiting on the control FIFO. REQUIRES: s.mu held.
void DrainControl(State& s) {
  if (s.control_fd < 0) return;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(s.control_fd, buf, sizeof buf);
    if (n <= 0) break;
    s.control_buffer.append(buf, static_cast<size_t>(n));
  }
  size_t pos;
  while ((pos = s.control_buffer.find('\n')) != std::string::npos) {
    std::string line = s.control_buffer.substr(0, pos);
    s.control_buffer.erase(0, pos + 1);
    ApplyCommand(s, line);
  }
}

// (Re)opens the control FIFO at `path`, creating it. REQUIRES: s.mu held.
void OpenControl(State& s, const char* path) {
  if (s.control_fd >= 0) ::close(s.control_fd);
  s.control_fd = -1;
  s.control_path = path;
  if (::mkfifo(path, 0600) != 0 && errno != EEXIST) {
    Note(std::string("cannot create control FIFO ") + path + ": " + std::strerror(errno));
  }
  // O_RDWR keeps the FIFO open for writing too, so it never reports EOF
  // (and poll never spins on POLLHUP) when the last writer leaves.
  s.control_fd = ::open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (s.control_fd < 0) Note(std::string("cannot open control FIFO ") + path);
}

nvmlReturn_t DoInit() {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  // The fixture is (re)read on the first init after load or after a full
  // shutdown, so one process can move between fixtures like a driver reload.
  const char* env_path = std::getenv("FAKE_NVML_FIXTURE");
  if (s.loaded && s.init_count == 0 && (env_path == nullptr || s.fixture_path != env_path)) {
    s.loaded = false;
  }
  if (!s.loaded) {
    const char* path = env_path;
    if (path == nullptr || *path == '\0') {
      Note("FAKE_NVML_FIXTURE is not set; behaving like a host without a loaded driver");
      return NVML_ERROR_DRIVER_NOT_LOADED;
    }
    std::string error;
    if (!fake_nvml::LoadFixture(path, &s.fixture, &error)) {
      Note("bad fixture: " + error);
      return NVML_ERROR_UNKNOWN;
    }
    s.fixture_path = path;
    // What the control FIFO injected goes with the fixture it was injected
    // into, as a driver reload ends it.
    s.forced_init_error = 0;
    s.wait_error = 0;
    s.wait_error_count = 0;
    s.hang_wait = false;
    s.gpus = fake_nvml::BuildDeviceTree<nvmlDevice_st>(s.fixture);
    if (const char* ctl = std::getenv("FAKE_NVML_CONTROL"); ctl && *ctl) {
      OpenControl(s, ctl);
    }
    s.loaded = true;
  }
  // A later client may name another control FIFO (tests in one process).
  if (const char* ctl = std::getenv("FAKE_NVML_CONTROL");
      ctl && *ctl && s.loaded && s.control_path != ctl) {
    OpenControl(s, ctl);
  }
  DrainControl(s);
  const int err = s.forced_init_error ? s.forced_init_error : s.fixture.init_error;
  if (err != 0) return static_cast<nvmlReturn_t>(err);
  ++s.init_count;
  return NVML_SUCCESS;
}

// Common prologue of every device query: initialised, handle valid, GPU not
// lost, no injected failure. REQUIRES: s.mu held.
nvmlReturn_t CheckDevice(State& s, nvmlDevice_t dev, const char* fn) {
  if (s.init_count == 0) return NVML_ERROR_UNINITIALIZED;
  DrainControl(s);
  if (dev == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  nvmlDevice_t gpu = dev->is_mig ? dev->parent : dev;
  bool known = false;
  for (auto& g : s.gpus) known |= g.get() == gpu;
  if (!known) return NVML_ERROR_INVALID_ARGUMENT;
  if (gpu->gpu.lost) return NVML_ERROR_GPU_IS_LOST;
  auto it = gpu->gpu.failures.find(fn);
  if (it != gpu->gpu.failures.end()) return static_cast<nvmlReturn_t>(it->second);
  return NVML_SUCCESS;
}

#define DEVICE_PROLOGUE(dev)              \
  State& s = S();                         \
  std::lock_guard<std::mutex> lock(s.mu); \
  if (nvmlReturn_t r_ = CheckDevice(s, dev, __func__); r_ != NVML_SUCCESS) return r_

#define SYSTEM_PROLOGUE()                                 \
  State& s = S();                                         \
  std::lock_guard<std::mutex> lock(s.mu);                 \
  if (s.init_count == 0) return NVML_ERROR_UNINITIALIZED; \
  DrainControl(s)

nvmlReturn_t CopyString(const std::string& value, char* out, unsigned length) {
  if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (value.size() + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(out, value.c_str(), value.size() + 1);
  return NVML_SUCCESS;
}

std::string Lower(std::string v) {
  for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return v;
}

}  // namespace

NVML_EXPORT nvmlReturn_t nvmlInit_v2(void) { return DoInit(); }
NVML_EXPORT nvmlReturn_t nvmlInit(void) { return DoInit(); }
NVML_EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int) { return DoInit(); }

NVML_EXPORT nvmlReturn_t nvmlShutdown(void) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.init_count == 0) return NVML_ERROR_UNINITIALIZED;
  --s.init_count;
  return NVML_SUCCESS;
}

NVML_EXPORT const char* nvmlErrorString(nvmlReturn_t r) { return fake_nvml::ErrorText(r); }

NVML_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  SYSTEM_PROLOGUE();
  return CopyString(s.fixture.driver_version, version, length);
}

NVML_EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char* version, unsigned int length) {
  SYSTEM_PROLOGUE();
  return CopyString(s.fixture.nvml_version, version, length);
}

NVML_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* version) {
  // Documented to work without nvmlInit.
  if (version == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  *version = s.fixture.cuda_driver_version;
  return NVML_SUCCESS;
}
NVML_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* version) {
  return nvmlSystemGetCudaDriverVersion(version);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  SYSTEM_PROLOGUE();
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *count = static_cast<unsigned>(s.gpus.size());
  return NVML_SUCCESS;
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int* count) {
  return nvmlDeviceGetCount_v2(count);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  SYSTEM_PROLOGUE();
  if (device == nullptr || index >= s.gpus.size()) return NVML_ERROR_INVALID_ARGUMENT;
  nvmlDevice_t dev = s.gpus[index].get();
  auto it = dev->gpu.failures.find("nvmlDeviceGetHandleByIndex");
  if (it != dev->gpu.failures.end()) return static_cast<nvmlReturn_t>(it->second);
  if (dev->gpu.lost) return NVML_ERROR_GPU_IS_LOST;
  *device = dev;
  return NVML_SUCCESS;
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device) {
  return nvmlDeviceGetHandleByIndex_v2(index, device);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  SYSTEM_PROLOGUE();
  if (uuid == nullptr || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  return fake_nvml::FindByUuid(s.gpus, uuid, device);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char* bus_id,
                                                          nvmlDevice_t* device) {
  SYSTEM_PROLOGUE();
  if (bus_id == nullptr || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  std::string wanted = Lower(bus_id);
  for (auto& g : s.gpus) {
    const std::string have = Lower(g->gpu.pci_bus_id);
    if (have == wanted || have.substr(4) == wanted) {
      if (g->gpu.lost) return NVML_ERROR_GPU_IS_LOST;
      *device = g.get();
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char* bus_id, nvmlDevice_t* device) {
  return nvmlDeviceGetHandleByPciBusId_v2(bus_id, device);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* index) {
  DEVICE_PROLOGUE(device);
  if (index == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *index = device->is_mig ? device->parent->index : device->index;
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  DEVICE_PROLOGUE(device);
  return CopyString(fake_nvml::DeviceName(*device), name, length);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  DEVICE_PROLOGUE(device);
  return CopyString(device->is_mig ? device->mig.uuid : device->gpu.uuid, uuid, length);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int* minor) {
  DEVICE_PROLOGUE(device);
  if (minor == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (device->is_mig) return NVML_ERROR_NOT_SUPPORTED;
  *minor = device->gpu.minor;
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  DEVICE_PROLOGUE(device);
  if (pci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  fake_nvml::FillPci(fake_nvml::PhysicalGpu(*device).gpu, pci);
  return NVML_SUCCESS;
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return nvmlDeviceGetPciInfo_v3(device, pci);
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return nvmlDeviceGetPciInfo_v3(device, pci);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  DEVICE_PROLOGUE(device);
  return fake_nvml::AnswerMemoryInfo(*device, s.fixture.privileged, memory);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t device, nvmlBrandType_t* type) {
  DEVICE_PROLOGUE(device);
  if (type == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *type = static_cast<nvmlBrandType_t>((device->is_mig ? device->parent : device)->gpu.brand);
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device,
                                                   nvmlDeviceArchitecture_t* arch) {
  DEVICE_PROLOGUE(device);
  if (arch == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *arch = (device->is_mig ? device->parent : device)->gpu.architecture;
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int* major,
                                                            int* minor) {
  DEVICE_PROLOGUE(device);
  return fake_nvml::AnswerComputeCapability(*device, major, minor);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b,
                                                             nvmlGpuTopologyLevel_t* level) {
  DEVICE_PROLOGUE(a);
  if (nvmlReturn_t r = CheckDevice(s, b, __func__); r != NVML_SUCCESS) return r;
  return fake_nvml::AnswerCommonAncestor(*a, *b, level);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int count,
                                                  nvmlFieldValue_t* values) {
  DEVICE_PROLOGUE(device);
  const nvmlDevice_st& gpu = device->is_mig ? *device->parent : *device;
  return fake_nvml::AnswerFieldValues(gpu.gpu, gpu.link_peer, count, values);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int* corr,
                                                   unsigned int* unc, unsigned int* pending,
                                                   unsigned int* failed) {
  DEVICE_PROLOGUE(device);
  if (corr == nullptr || unc == nullptr || pending == nullptr || failed == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (device->is_mig || !device->gpu.health.row_remapping) return NVML_ERROR_NOT_SUPPORTED;
  *corr = 0;
  *unc = device->gpu.remap_pending ? 1 : 0;
  *pending = device->gpu.remap_pending ? 1 : 0;
  *failed = device->gpu.remap_failed ? 1 : 0;
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device,
                                                                nvmlEnableState_t* pending) {
  DEVICE_PROLOGUE(device);
  if (pending == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (device->is_mig) return NVML_ERROR_NOT_SUPPORTED;
  *pending = device->gpu.pages_pending ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                                  nvmlEnableState_t* active) {
  DEVICE_PROLOGUE(device);
  return fake_nvml::AnswerNvLinkState(*device, link, active);
}

// The health checks' queries; on a MIG device handle NVML answers for the
// GPU it is part of, as here.
#define GPU_OF(dev) ((dev)->is_mig ? (dev)->parent->gpu : (dev)->gpu)

NVML_EXPORT nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, nvmlEnableState_t* current,
                                              nvmlEnableState_t* pending) {
  DEVICE_PROLOGUE(device);
  return fake_nvml::AnswerEccMode(GPU_OF(device), current, pending);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device,
                                                     nvmlMemoryErrorType_t type,
                                                     nvmlEccCounterType_t counter,
                                                     unsigned long long* count) {
  DEVICE_PROLOGUE(device);
  return fake_nvml::AnswerTotalEccErrors(GPU_OF(device), type, counter, count);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device,
                                                  nvmlTemperatureSensors_t sensor,
                                                  unsigned int* temp) {
  DEVICE_PROLOGUE(device);
  return fake_nvml::AnswerTemperature(GPU_OF(device), sensor, temp);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t device,
                                                           nvmlTemperatureThresholds_t which,
                                                           unsigned int* temp) {
  DEVICE_PROLOGUE(device);
  return fake_nvml::AnswerTemperatureThreshold(GPU_OF(device), which, temp);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                                unsigned long long* reasons) {
  DEVICE_PROLOGUE(device);
  return fake_nvml::AnswerClocksEventReasons(GPU_OF(device), reasons);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                                   unsigned long long* reasons) {
  DEVICE_PROLOGUE(device);
  return fake_nvml::AnswerClocksEventReasons(GPU_OF(device), reasons);
}

#define PCIE_QUERY(name, field)                                                            \
  NVML_EXPORT nvmlReturn_t name(nvmlDevice_t device, unsigned int* value) {                \
    DEVICE_PROLOGUE(device);                                                               \
    return fake_nvml::AnswerPcie(GPU_OF(device), &fake_nvml::HealthFixture::field, value); \
  }
PCIE_QUERY(nvmlDeviceGetCurrPcieLinkWidth, pcie_width)
PCIE_QUERY(nvmlDeviceGetCurrPcieLinkGeneration, pcie_generation)
PCIE_QUERY(nvmlDeviceGetMaxPcieLinkWidth, pcie_max_width)
PCIE_QUERY(nvmlDeviceGetMaxPcieLinkGeneration, pcie_max_generation)
PCIE_QUERY(nvmlDeviceGetPcieReplayCounter, pcie_replays)
#undef PCIE_QUERY

NVML_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
                                                             nvmlPciInfo_t* pci) {
  DEVICE_PROLOGUE(device);
  if (pci == nullptr || device->is_mig || link >= device->link_peer.size()) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  const int peer = device->link_peer[link];
  if (peer < 0) return NVML_ERROR_NOT_SUPPORTED;
  fake_nvml::FillPci(s.gpus[static_cast<size_t>(peer)]->gpu, pci);
  return NVML_SUCCESS;
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo(nvmlDevice_t device, unsigned int link,
                                                          nvmlPciInfo_t* pci) {
  return nvmlDeviceGetNvLinkRemotePciInfo_v2(device, link, pci);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* current,
                                              unsigned int* pending) {
  DEVICE_PROLOGUE(device);
  if (current == nullptr || pending == nullptr || device->is_mig) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (device->gpu.cc_major < 8) return NVML_ERROR_NOT_SUPPORTED;
  *current = *pending = device->gpu.mig_enabled ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int* count) {
  DEVICE_PROLOGUE(device);
  if (count == nullptr || device->is_mig) return NVML_ERROR_INVALID_ARGUMENT;
  *count = device->gpu.mig_enabled ? device->gpu.max_mig_devices : 0;
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device,
                                                             unsigned int index,
                                                             nvmlDevice_t* mig) {
  DEVICE_PROLOGUE(device);
  if (mig == nullptr || device->is_mig) return NVML_ERROR_INVALID_ARGUMENT;
  if (!device->gpu.mig_enabled) return NVML_ERROR_INVALID_ARGUMENT;
  if (index >= device->gpu.max_mig_devices) return NVML_ERROR_INVALID_ARGUMENT;
  if (index >= device->mig_children.size()) return NVML_ERROR_NOT_FOUND;
  *mig = device->mig_children[index].get();
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t mig,
                                                                      nvmlDevice_t* device) {
  DEVICE_PROLOGUE(mig);
  if (device == nullptr || !mig->is_mig) return NVML_ERROR_INVALID_ARGUMENT;
  *device = mig->parent;
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int* is_mig) {
  DEVICE_PROLOGUE(device);
  if (is_mig == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *is_mig = device->is_mig ? 1 : 0;
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int* id) {
  DEVICE_PROLOGUE(device);
  if (id == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!device->is_mig) return NVML_ERROR_NOT_SUPPORTED;
  *id = device->mig.gpu_instance_id;
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int* id) {
  DEVICE_PROLOGUE(device);
  if (id == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!device->is_mig) return NVML_ERROR_NOT_SUPPORTED;
  *id = device->mig.compute_instance_id;
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device,
                                                    nvmlDeviceAttributes_t* attrs) {
  DEVICE_PROLOGUE(device);
  return fake_nvml::AnswerAttributes(*device, attrs);
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetAttributes(nvmlDevice_t device,
                                                 nvmlDeviceAttributes_t* attrs) {
  return nvmlDeviceGetAttributes_v2(device, attrs);
}

namespace {

// The profile at NVML_GPU_INSTANCE_PROFILE_* index `profile`, or why not.
}  // namespace

NVML_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t device,
                                                             unsigned int profile,
                                                             nvmlGpuInstanceProfileInfo_t* info) {
  DEVICE_PROLOGUE(device);
  if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const fake_nvml::ProfileFixture* p = nullptr;
  if (nvmlReturn_t r = fake_nvml::FindProfile(*device, profile, &p); r != NVML_SUCCESS) return r;
  std::memset(info, 0, sizeof *info);
  fake_nvml::FillProfile(*p, info);
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(
    nvmlDevice_t device, unsigned int profile, nvmlGpuInstanceProfileInfo_v2_t* info) {
  DEVICE_PROLOGUE(device);
  if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (info->version != nvmlGpuInstanceProfileInfo_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  const fake_nvml::ProfileFixture* p = nullptr;
  if (nvmlReturn_t r = fake_nvml::FindProfile(*device, profile, &p); r != NVML_SUCCESS) return r;
  std::memset(info, 0, sizeof *info);
  info->version = nvmlGpuInstanceProfileInfo_v2;
  fake_nvml::FillProfile(*p, info);
  std::snprintf(info->name, sizeof info->name, "%s", p->name.c_str());
  return NVML_SUCCESS;
}

template <typename Info>
void FillFabric(const fake_nvml::FabricFixture& f, Info* info) {
  std::memcpy(info->clusterUuid, f.cluster_uuid, sizeof info->clusterUuid);
  info->cliqueId = f.clique_id;
  info->state = static_cast<nvmlGpuFabricState_t>(f.state);
  info->status = static_cast<nvmlReturn_t>(f.status);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetGpuFabricInfo(nvmlDevice_t device,
                                                    nvmlGpuFabricInfo_t* info) {
  DEVICE_PROLOGUE(device);
  if (info == nullptr || device->is_mig) return NVML_ERROR_INVALID_ARGUMENT;
  if (!device->gpu.has_fabric) return NVML_ERROR_NOT_SUPPORTED;
  std::memset(info, 0, sizeof *info);
  FillFabric(device->gpu.fabric, info);
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device,
                                                     nvmlGpuFabricInfoV_t* info) {
  DEVICE_PROLOGUE(device);
  if (info == nullptr || device->is_mig) return NVML_ERROR_INVALID_ARGUMENT;
  if (info->version != nvmlGpuFabricInfo_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  if (!device->gpu.has_fabric) return NVML_ERROR_NOT_SUPPORTED;
  std::memset(info, 0, sizeof *info);
  info->version = nvmlGpuFabricInfo_v2;
  FillFabric(device->gpu.fabric, info);
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device,
                                                          unsigned long long* types) {
  DEVICE_PROLOGUE(device);
  if (types == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *types = nvmlEventTypeXidCriticalError | nvmlEventTypeSingleBitEccError |
           nvmlEventTypeDoubleBitEccError | nvmlEventTypePState | nvmlEventTypeClock |
           nvmlEventMigConfigChange;
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  SYSTEM_PROLOGUE();
  if (set == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  auto* es = new nvmlEventSet_st;
  es->efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (es->efd < 0) {
    delete es;
    return NVML_ERROR_MEMORY;
  }
  s.sets.push_back(es);
  *set = es;
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long types,
                                                  nvmlEventSet_t set) {
  DEVICE_PROLOGUE(device);
  if (set == nullptr || device->is_mig) return NVML_ERROR_INVALID_ARGUMENT;
  if (std::find(s.sets.begin(), s.sets.end(), set) == s.sets.end()) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  set->registrations.emplace_back(device, types);
  return NVML_SUCCESS;
}

namespace {

// Waits for an event on `set`. `full` selects the v2 struct (with the MIG
// instance ids); v1 callers pass the 24-byte struct and get only that.
nvmlReturn_t WaitForEvent(nvmlEventSet_t set, void* data, unsigned int timeout_ms, bool full) {
  State& s = S();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    int control_fd;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      if (s.init_count == 0) return NVML_ERROR_UNINITIALIZED;
      if (std::find(s.sets.begin(), s.sets.end(), set) == s.sets.end()) {
        return NVML_ERROR_INVALID_ARGUMENT;
      }
      DrainControl(s);
      if (s.wait_error_count > 0) {
        --s.wait_error_count;
        return static_cast<nvmlReturn_t>(s.wait_error);
      }
      if (s.hang_wait && s.control_fd >= 0) {
        // A driver call that hangs: only the next control line frees it.
        pollfd fd = {s.control_fd, POLLIN, 0};
        s.mu.unlock();
        (void)::poll(&fd, 1, -1);
        s.mu.lock();
        continue;
      }
      if (!set->queue.empty()) {
        nvmlEventData_t ev = set->queue.front();
        set->queue.pop_front();
        std::memcpy(data, &ev, full ? sizeof ev : offsetof(nvmlEventData_t, gpuInstanceId));
        if (set->queue.empty()) {
          uint64_t drained;
          (void)!::read(set->efd, &drained, sizeof drained);
        }
        return NVML_SUCCESS;
      }
      control_fd = s.control_fd;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return NVML_ERROR_TIMEOUT;
    const int wait_ms =
        static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count());
    pollfd fds[2] = {{set->efd, POLLIN, 0}, {control_fd, POLLIN, 0}};
    const int nfds = control_fd >= 0 ? 2 : 1;
    int rc = ::poll(fds, static_cast<nfds_t>(nfds), wait_ms);
    if (rc < 0 && errno != EINTR) return NVML_ERROR_UNKNOWN;
  }
}

}  // namespace

NVML_EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data,
                                             unsigned int timeout_ms) {
  if (data == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  return WaitForEvent(set, data, timeout_ms, true);
}

NVML_EXPORT nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t* data,
                                          unsigned int timeout_ms) {
  if (data == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  return WaitForEvent(set, data, timeout_ms, false);
}

NVML_EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = std::find(s.sets.begin(), s.sets.end(), set);
  if (it == s.sets.end()) return NVML_ERROR_INVALID_ARGUMENT;
  s.sets.erase(it);
  ::close(set->efd);
  delete set;
  return NVML_SUCCESS;
}
