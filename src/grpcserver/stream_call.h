// A server-streaming call on a CqServer that sends the newest of a series of
// messages (the device plugin's ListAndWatch, DRA's health stream): one
// write in flight, newer messages coalesced into the next write, Finish
// exactly once (Close, a failed write, or the peer's cancel), and freed once
// gRPC has returned both Finish and the call's end. The server keeps it
// (CqServer::Keep) until then.
#ifndef GPU_AGENT_GRPCSERVER_STREAM_CALL_H_
#define GPU_AGENT_GRPCSERVER_STREAM_CALL_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <mutex>
#include <utility>

#include "grpcserver/cq_server.h"

namespace gpu_agent::grpcserver {

template <class Request, class Response>
class StreamCall : public CqServer::Call {
 public:
  using Writer = grpc::ServerAsyncWriter<Response>;

  explicit StreamCall(CqServer* server) : server_(server) {}

  // Makes a call of type T (constructed from `server` and `args`), kept by
  // the server, and asks gRPC for it.
  template <class T, class... Args>
  static void Next(CqServer* server, Args&&... args) {
    auto call = std::make_shared<T>(server, std::forward<Args>(args)...);
    server->Keep(call);
    if (!static_cast<StreamCall*>(call.get())->AskFor()) server->Forget(call.get());
  }

  // Writes the newest message (Fill) unless a write is in flight, the
  // stream is closing, or that message was sent. From any thread.
  void Pump() {
    bool ended = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (finishing_ || writing_ || closing_ || !Fill(&message_)) return;
      writing_ = server_->StartOp([this] { writer_.Write(message_, &written_); });
      if (!writing_) {  // the queue is shut
        FinishLocked();
        ended = EndDueLocked();
      }
    }
    if (ended) End();
  }

  // Finishes the stream with `status` once no write is in flight, unless it
  // is already closing. From any thread.
  void Close(grpc::Status status) {
    bool ended = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closing_) return;
      closing_ = true;
      status_ = std::move(status);
      if (!writing_) FinishLocked();
      ended = EndDueLocked();
    }
    if (ended) End();
  }

  void Proceed(int step, bool ok) override {
    switch (step) {
      case kArrived:
        if (!ok) {
          // The server shut down before a call came: gRPC returns nothing
          // else for a call that never started.
          server_->Forget(this);
          return;
        }
        counted_ = true;
        server_->CallArrived();
        Arrived();
        Pump();
        return;
      case kWritten:
        Written(ok);
        return;
      case kDone:
        Done();
        return;
      case kFinished: {
        bool ended;
        {
          std::lock_guard<std::mutex> lock(mu_);
          finish_seen_ = true;
          ended = EndDueLocked();
        }
        if (ended) End();
        return;
      }
    }
  }

 protected:
  CqServer* server() const { return server_; }

  // Asks gRPC for the call: the generated service's Request<Method> with
  // these arguments and the server's queue.
  virtual void RequestCall(grpc::ServerContext* ctx, Request* request, Writer* writer,
                           void* tag) = 0;
  // On the queue's thread, when the call arrives (before the first write):
  // ask for the next call, subscribe, or Close.
  virtual void Arrived() = 0;
  // With the stream's lock held: fills `out` with the newest message and
  // returns true, or false when the last one sent is the newest.
  virtual bool Fill(Response* out) = 0;
  // gRPC is done with the call; it is freed right after.
  virtual void Ended() = 0;

 private:
  enum Step { kArrived, kWritten, kFinished, kDone };

  // False when the queue is already shut.
  bool AskFor() {
    ctx_.AsyncNotifyWhenDone(&done_);  // before the call starts, as gRPC requires
    return server_->StartOp([this] { RequestCall(&ctx_, &request_, &writer_, &arrived_); });
  }

  void Written(bool ok) {
    bool ended = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      writing_ = false;
      if (!ok) {
        // The peer went away; nothing more can be written.
        closing_ = true;
        status_ = grpc::Status(grpc::StatusCode::UNAVAILABLE, "stream broken");
      }
      if (closing_) {
        FinishLocked();
        ended = EndDueLocked();
      }
    }
    if (ended) {
      End();
    } else {
      Pump();
    }
  }

  void Done() {
    bool ended;
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_seen_ = true;
      if (!finishing_) {
        // Cancelled by the peer (or the server's shutdown).
        closing_ = true;
        status_ = grpc::Status::CANCELLED;
        if (!writing_) FinishLocked();
      }
      ended = EndDueLocked();
    }
    if (ended) End();
  }

  // REQUIRES: mu_ held. True once, when gRPC has returned both Finish (or
  // it could not be asked) and the call's end: the stream can go.
  bool EndDueLocked() {
    if (ended_ || !finish_seen_ || !done_seen_) return false;
    ended_ = true;
    return true;
  }

  // REQUIRES: mu_ held, no write in flight.
  void FinishLocked() {
    if (finishing_) return;
    finishing_ = true;
    // With the queue shut, Finish cannot be asked; only the call's end
    // (kDone) is still to come, and it frees the stream.
    if (!server_->StartOp([this] { writer_.Finish(status_, &finished_); })) finish_seen_ = true;
  }

  void End() {
    Ended();
    if (counted_) server_->CallFreed();
    server_->Forget(this);  // may free this
  }

  CqServer* const server_;
  grpc::ServerContext ctx_;
  Request request_;
  Writer writer_{&ctx_};
  Tag arrived_{this, kArrived};
  Tag written_{this, kWritten};
  Tag finished_{this, kFinished};
  Tag done_{this, kDone};
  bool counted_ = false;  // arrived: counted in the server's open calls until freed

  std::mutex mu_;
  bool writing_ = false;      // protected by mu_: a Write in flight
  bool closing_ = false;      // protected by mu_: Finish once no write is in flight
  bool finishing_ = false;    // protected by mu_: Finish called
  bool finish_seen_ = false;  // protected by mu_: gRPC returned Finish
  bool done_seen_ = false;    // protected by mu_: gRPC says the call is over
  bool ended_ = false;        // protected by mu_: End() called
  grpc::Status status_;       // protected by mu_: what Finish sends
  Response message_;          // owned by the write in flight
};

}  // namespace gpu_agent::grpcserver

#endif  // GPU_AGENT_GRPCSERVER_STREAM_CALL_H_
