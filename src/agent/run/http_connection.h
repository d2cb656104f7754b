// One connection of the metrics endpoint's HTTP server (http_server.h): its
// state, what it has read and what it still has to write. Private to the
// server's two files: http_server.cc (listening, the poll loop, admission,
// eviction) and http_connection.cc (reading requests and writing answers).
#ifndef GPU_AGENT_AGENT_RUN_HTTP_CONNECTION_H_
#define GPU_AGENT_AGENT_RUN_HTTP_CONNECTION_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "agent/run/http_request_reader.h"
#include "agent/run/http_server.h"

namespace gpu_agent {

struct HttpServer::Connection {
  enum class State {
    kReading,   // waiting for (the rest of) a request head
    kHandling,  // a request is with its endpoint's worker
    kWriting,   // an answer is being written
    kClosing,   // the last answer is written: dropping what the client still sends
  };

  Connection(uint64_t id_in, int fd_in, const HttpRequestReader::Limits& limits,
             std::chrono::steady_clock::time_point now)
      : id(id_in), fd(fd_in), reader(limits), since(now) {}

  const uint64_t id;
  int fd;
  bool dead = false;  // closed; erased at the end of the loop's turn
  State state = State::kReading;
  HttpRequestReader reader;
  // When the current state's clock started: the accept or the previous
  // answer (kReading), the dispatch (kHandling), the answer (kWriting), the
  // close (kClosing).
  std::chrono::steady_clock::time_point since;
  bool answered_once = false;
  size_t route = 0;  // kHandling: the route asked
  HttpRequest request;
  // The answer being written: its head, then its body unless a HEAD.
  std::string head;
  std::shared_ptr<const std::string> body;
  size_t sent = 0;  // of head, then body
  bool close_after = false;
  size_t dropped = 0;  // kClosing: bytes read and dropped

  size_t Unsent() const {
    const size_t total = head.size() + (body ? body->size() : 0);
    return total - std::min(sent, total);
  }
};

}  // namespace gpu_agent

#endif  // GPU_AGENT_AGENT_RUN_HTTP_CONNECTION_H_
