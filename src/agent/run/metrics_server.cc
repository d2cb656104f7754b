#include "agent/run/metrics_server.h"

#include <utility>

#include "base/listen_address.h"
#include "base/log.h"
#include "base/prom_text.h"
#include "base/strings.h"

namespace gpu_agent {
namespace {

EndpointAnswer Probe(const std::function<bool(std::string*)>& check, const char* failing) {
  std::string why;
  EndpointAnswer a;
  if (!check || check(&why)) {
    // A probe that passes may still say something ("ok: <note>").
    a.body = std::make_shared<const std::string>(why.empty() ? "ok\n" : StrCat("ok: ", why, "\n"));
  } else {
    a.status = 503;
    a.body = std::make_shared<const std::string>(StrCat(failing, why, "\n"));
  }
  return a;
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& address,
                                                                    Handlers handlers) {
  return Start(address, std::move(handlers), Limits());
}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& address,
                                                                    Handlers handlers,
                                                                    const Limits& limits) {
  absl::StatusOr<HostPort> hp = ParseListenAddress(address);
  if (!hp.ok()) return hp.status();
  std::unique_ptr<MetricsServer> m(new MetricsServer);
  MetricsServer* self = m.get();
  auto h = std::make_shared<Handlers>(std::move(handlers));
  std::vector<HttpServer::Route> routes;
  routes.push_back({"/metrics", "metrics-scrape", [h, self] {
                      PromText own;
                      RenderMetricsServerStats(self->stats(), &own);
                      EndpointAnswer a;
                      a.content_type = "text/plain; version=0.0.4; charset=utf-8";
                      a.body = std::make_shared<const std::string>(
                          (h->metrics ? h->metrics() : std::string()) + own.str());
                      return a;
                    }});
  routes.push_back({"/healthz", "metrics-healthz", [h] { return Probe(h->alive, "not alive: "); }});
  routes.push_back({"/readyz", "metrics-readyz", [h] { return Probe(h->ready, "not ready: "); }});
  absl::StatusOr<std::unique_ptr<HttpServer>> server =
      HttpServer::Listen(*hp, std::move(routes), limits);
  if (!server.ok()) {
    return absl::FailedPreconditionError(
        StrCat("metrics.address \"", address, "\": cannot listen (", server.status().message(),
               "); is the port in use, or the address not on this host?"));
  }
  m->server_ = *std::move(server);
  m->server_->Serve();
  LogInfo("metrics endpoint listening", {{"address", FormatHostPort(hp->host, m->port())},
                                         {"paths", "/metrics /healthz /readyz"}});
  return m;
}

MetricsServer::~MetricsServer() { Stop(); }

void MetricsServer::Stop() {
  if (server_) server_->Stop();
}

MetricsServer::Stats MetricsServer::stats() const { return server_ ? server_->stats() : Stats(); }

void RenderMetricsServerStats(const MetricsServer::Stats& s, PromText* p) {
  auto one = [p](const char* name, const char* type, const char* help, uint64_t v) {
    p->Family(name, type, help);
    p->Sample(name, {}, static_cast<double>(v));
  };
  one("gpu_agent_metrics_connections_accepted_total", "counter",
      "Connections the metrics endpoint accepted.", s.connections_accepted);
  one("gpu_agent_metrics_connections_open", "gauge", "Connections open to the metrics endpoint.",
      s.connections_open);
  one("gpu_agent_metrics_connections_evicted_total", "counter",
      "Connections closed at the connection cap to let a new one in.", s.connections_evicted);
  one("gpu_agent_metrics_connections_timed_out_total", "counter",
      "Connections closed for not sending a whole request, or not reading an answer, in time.",
      s.connections_timed_out);
  one("gpu_agent_metrics_requests_total", "counter",
      "Requests the metrics endpoint answered (refusals aside).", s.requests_answered);
  p->Family("gpu_agent_metrics_requests_refused_total", "counter",
            "Requests refused, by the HTTP status answered.");
  for (const auto& [code, n] : s.requests_refused) {
    p->Sample("gpu_agent_metrics_requests_refused_total", {{"code", StrCat(code)}},
              static_cast<double>(n));
  }
  one("gpu_agent_metrics_buffered_bytes", "gauge",
      "Request bytes and unsent answers the metrics endpoint holds.", s.buffered_bytes);
}

absl::StatusOr<std::unique_ptr<MetricsServer>> StartMetricsIfConfigured(
    const Config& config, MetricsServer::Handlers handlers) {
  if (config.metrics.address.empty()) return std::unique_ptr<MetricsServer>();
  absl::StatusOr<std::unique_ptr<MetricsServer>> m =
      MetricsServer::Start(config.metrics.address, std::move(handlers));
  if (!m.ok()) {
    LogError("cannot start the metrics endpoint", {{"error", std::string(m.status().message())}});
  }
  return m;
}

}  // namespace gpu_agent
