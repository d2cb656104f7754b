// A unary call on a CqServer: asked for, handed to its handler when it
// arrives, answered (Finish) by the handler at once or later from any
// thread, and freed once the answer is sent.
#ifndef GPU_AGENT_GRPCSERVER_UNARY_CALL_H_
#define GPU_AGENT_GRPCSERVER_UNARY_CALL_H_

#include <grpcpp/grpcpp.h>

#include <functional>

#include "grpcserver/cq_server.h"

namespace gpu_agent::grpcserver {

template <class Service, class Request, class Response>
class UnaryCall final : public CqServer::Call {
 public:
  // The generated service's Request<Method>.
  using Ask = void (Service::*)(grpc::ServerContext*, Request*,
                                grpc::ServerAsyncResponseWriter<Response>*, grpc::CompletionQueue*,
                                grpc::ServerCompletionQueue*, void*);
  // Runs on the queue's thread when a call arrives; calls Finish once, now
  // or from any thread later.
  using Handle = std::function<void(UnaryCall&)>;

  // Asks gRPC for the next call of this method; the call frees itself.
  static void Next(CqServer* server, Service* service, Ask ask, Handle handle) {
    auto* call = new UnaryCall(server, service, ask, std::move(handle));
    if (!server->StartOp([&] {
          (service->*ask)(&call->ctx_, &call->request_, &call->responder_, server->cq(),
                          server->cq(), &call->arrived_);
        })) {
      delete call;
    }
  }

  const Request& request() const { return request_; }
  Response* response() { return &response_; }

  // Sends the response with `status` (only the status when it is not OK).
  void Finish(const grpc::Status& status) {
    if (!server_->StartOp([&] { responder_.Finish(response_, status, &finished_); })) {
      delete this;  // the queue is shut: gRPC returns nothing more for this call
    }
  }

  void Proceed(int step, bool ok) override {
    if (step != kArrived || !ok) {
      // Answer sent, or the server shut down before a call came.
      delete this;
      return;
    }
    counted_ = true;
    server_->CallArrived();
    if (!server_->shutting_down()) Next(server_, service_, ask_, handle_);
    handle_(*this);
  }

 private:
  enum Step { kArrived, kFinished };

  UnaryCall(CqServer* server, Service* service, Ask ask, Handle handle)
      : server_(server), service_(service), ask_(ask), handle_(std::move(handle)) {}
  ~UnaryCall() override {
    if (counted_) server_->CallFreed();
  }

  CqServer* const server_;
  Service* const service_;
  const Ask ask_;
  const Handle handle_;
  grpc::ServerContext ctx_;
  Request request_;
  Response response_;
  grpc::ServerAsyncResponseWriter<Response> responder_{&ctx_};
  Tag arrived_{this, kArrived};
  Tag finished_{this, kFinished};
  bool counted_ = false;  // arrived: counted in the server's open calls until freed
};

}  // namespace gpu_agent::grpcserver

#endif  // GPU_AGENT_GRPCSERVER_UNARY_CALL_H_
