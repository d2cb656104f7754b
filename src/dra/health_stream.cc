#include "dra/health_stream.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include "base/strings.h"
#include "base/text.h"

namespace gpu_agent::dra {
namespace {

using HealthResponse = ::v1alpha1::NodeWatchResourcesResponse;
using HealthRequest = ::v1alpha1::NodeWatchResourcesRequest;

// The kubelet keeps at most this much of a device's health message.
constexpr size_t kHealthMessageMax = 1024;

// One NodeWatchResources stream of the package `Service` belongs to.
template <class Service>
class HealthStream final : public HealthBoard::Stream {
 public:
  HealthStream(grpcserver::CqServer* server, Service* async, HealthBoard* board)
      : HealthBoard::Stream(server), async_(async), board_(board) {}

 private:
  void RequestCall(grpc::ServerContext* ctx, HealthRequest* request, Writer* writer,
                   void* tag) override {
    async_->RequestNodeWatchResources(ctx, request, writer, server()->cq(), server()->cq(), tag);
  }

  void Arrived() override {
    if (!server()->shutting_down()) Next<HealthStream>(server(), async_, board_);
    grpc::Status refused =
        board_->Opened(std::static_pointer_cast<HealthStream>(server()->Kept(this)));
    if (!refused.ok()) Close(std::move(refused));
  }

  bool Fill(HealthResponse* out) override { return board_->Fill(&sent_version_, out); }
  void Ended() override { board_->Ended(this); }

  Service* const async_;
  HealthBoard* const board_;
  uint64_t sent_version_ = 0;  // protected by the stream's lock (Fill)
};

}  // namespace

HealthBoard::HealthBoard(std::string driver_name, std::chrono::milliseconds resend)
    : driver_name_(std::move(driver_name)), resend_(resend) {
  // Failing, -1: poll passes it over, and a stream opened while no other
  // was is first sent again at the guard's next wake-up.
  opened_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

HealthBoard::~HealthBoard() {
  if (opened_fd_ >= 0) ::close(opened_fd_);
}

void HealthBoard::Ask(grpcserver::CqServer& server, HealthServices& services) {
  Stream::Next<HealthStream<::v1::DRAResourceHealth::AsyncService>>(&server, &services.v1, this);
  Stream::Next<HealthStream<::v1beta1::DRAResourceHealth::AsyncService>>(&server, &services.v1beta1,
                                                                         this);
  Stream::Next<HealthStream<::v1alpha1::DRAResourceHealth::AsyncService>>(&server,
                                                                          &services.v1alpha1, this);
}

grpc::Status HealthBoard::Opened(const std::shared_ptr<Stream>& stream) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "shutting down");
  if (!serving_) return NotServing();
  // The first stream starts the heartbeat's clock.
  if (streams_.empty()) published_ = std::chrono::steady_clock::now();
  streams_.emplace(stream.get(), stream);
  const uint64_t one = 1;
  if (opened_fd_ >= 0) (void)!::write(opened_fd_, &one, sizeof one);
  return grpc::Status::OK;
}

bool HealthBoard::Fill(uint64_t* sent, HealthResponse* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (*sent == version_) return false;
  out->Clear();
  const int64_t updated =
      std::chrono::duration_cast<std::chrono::seconds>(updated_.time_since_epoch()).count();
  for (const DeviceHealthRecord& d : health_) {
    auto* h = out->add_devices();
    h->mutable_device()->set_pool_name(d.pool);
    h->mutable_device()->set_device_name(d.device);
    h->set_health(d.healthy ? ::v1alpha1::HEALTHY : ::v1alpha1::UNHEALTHY);
    h->set_last_updated_time(updated);
    // A proto3 string must be UTF-8 (the kubelet's decoder refuses the
    // whole message otherwise): a reason's stray bytes become U+FFFD, and
    // the cut falls between characters.
    if (!d.message.empty()) h->set_message(Utf8Clip(d.message, kHealthMessageMax));
  }
  *sent = version_;
  return true;
}

void HealthBoard::Ended(Stream* stream) {
  std::shared_ptr<Stream> last;  // freed outside the lock
  std::lock_guard<std::mutex> lock(mu_);
  auto it = streams_.find(stream);
  if (it == streams_.end()) return;
  last = std::move(it->second);
  streams_.erase(it);
}

grpc::Status HealthBoard::NotServing() const {
  return grpc::Status(
      grpc::StatusCode::UNAVAILABLE,
      StrCat("another instance of ", driver_name_, " on this node serves its devices' health"));
}

std::vector<std::shared_ptr<HealthBoard::Stream>> HealthBoard::PublishLocked() {
  updated_ = std::chrono::system_clock::now();
  published_ = std::chrono::steady_clock::now();
  ++version_;
  std::vector<std::shared_ptr<Stream>> out;
  for (const auto& [raw, s] : streams_) out.push_back(s);
  return out;
}

std::vector<std::shared_ptr<HealthBoard::Stream>> HealthBoard::TakeAllLocked() {
  std::vector<std::shared_ptr<Stream>> out;
  for (auto& [raw, s] : streams_) out.push_back(std::move(s));
  streams_.clear();
  return out;
}

void HealthBoard::Set(std::vector<DeviceHealthRecord> devices) {
  std::vector<std::shared_ptr<Stream>> due;
  {
    std::lock_guard<std::mutex> lock(mu_);
    health_ = std::move(devices);
    due = PublishLocked();
  }
  for (const auto& s : due) s->Pump();
}

void HealthBoard::SetServing(bool serving) {
  std::vector<std::shared_ptr<Stream>> end;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (serving_ == serving) return;
    serving_ = serving;
    if (!serving) end = TakeAllLocked();
  }
  for (const auto& s : end) s->Close(NotServing());
}

void HealthBoard::CloseAll() {
  std::vector<std::shared_ptr<Stream>> end;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    end = TakeAllLocked();
  }
  for (const auto& s : end) s->Close(grpc::Status::OK);
}

// The kubelet takes a device it has heard nothing of for 30 s as of unknown
// health (healthinfo.go, healthTimeout), whatever it was: while a stream is
// open, the list goes out again resend_ after the last.
std::chrono::steady_clock::time_point HealthBoard::ResendIfDue() {
  std::vector<std::shared_ptr<Stream>> due;
  std::chrono::steady_clock::time_point next;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (streams_.empty()) return std::chrono::steady_clock::time_point::max();
    if (std::chrono::steady_clock::now() >= published_ + resend_) {
      due = PublishLocked();
      ++resends_;
    }
    next = published_ + resend_;
  }
  for (const auto& s : due) s->Pump();
  return next;
}

size_t HealthBoard::streams() const {
  std::lock_guard<std::mutex> lock(mu_);
  return streams_.size();
}

uint64_t HealthBoard::resends() const {
  std::lock_guard<std::mutex> lock(mu_);
  return resends_;
}

}  // namespace gpu_agent::dra
