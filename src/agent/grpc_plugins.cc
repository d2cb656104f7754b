// gRPC's plugin table for the agent: what a unix-socket server and client use.
//
// gRPC 1.51 builds its registry of filters, handshakers, resolvers and
// load-balancing policies in grpc_core::BuildCoreConfiguration
// (src/core/plugin_registry/grpc_plugin_registry.cc), which calls every
// built-in plugin's registration, so the linker pulls them all in: RLS,
// grpclb, ring_hash, outlier_detection, priority and weighted_target (each
// chosen only by a service config or an xDS control plane), the fault
// injection filter (xDS only), the fake resolver (gRPC's own tests) and the
// c-ares DNS resolver with c-ares itself.
// The agent speaks gRPC only over unix sockets ("unix:" targets: the
// sockaddr resolver, pick_first, no service config), so none of them can
// ever be chosen; they were about 0.6 MB of code and read-only data, most
// of it mapped at start-up by fault-around (bench/RESULTS.md, "Footprint").
// The same function, which gRPC runs once on its first use, installs the
// agent's EventEngine (agent/grpc_event_engine.h).
//
// So the gpu-agent executable defines that function, as grpc_sizing.cc
// defines gpr_cpu_num_cores: the registrations below are gRPC's own, in its
// order (the handshakers' order matters), less the ones named above.
// gRPC is linked from Debian's static archives (gpu_agent_deps), where
// grpc_plugin_registry.cc.o defines this function and nothing else, so
// with it defined here that member and the policies only it refers to stay
// out. Should a later gRPC add a symbol to that member that something needs,
// the link fails with a duplicate definition; should it rename a
// registration, the link fails with an undefined one. Every test binary links
// this file too, so the tests run the table users get.
//
// Kept, and why: the event engine's channel argument; HTTP CONNECT and TCP
// connect handshakers and the HTTP proxy mapper (a proxy from the
// environment is honoured, or skipped for unix sockets, as before); the
// client channel; the security handshakers and filters (insecure
// credentials run through them); client authority, idle, HTTP, deadline,
// message size and service config filters; the resource quota; pick_first
// and round_robin (the two policies a plain service config may name); the
// sockaddr resolver ("unix:") and gRPC's native DNS resolver (getaddrinfo,
// what GRPC_DNS_RESOLVER=native selects), so that a "dns:" target would
// still resolve; the built-in channel types.
//
// c-ares: grpc_init and grpc_shutdown call the two functions below, which
// start c-ares and make it gRPC's resolver for every DNS lookup.
// dns_resolver_ares.cc.o defines them and RegisterAresDnsResolver and
// nothing else, and only it refers to c-ares, so with the three gone c-ares
// is not linked; gRPC's lookups use the native resolver, as they do in any
// gRPC built without c-ares.

#include "agent/grpc_event_engine.h"

// gRPC's internal names, declared as its sources name them (its headers are
// not installed): only the names matter to the link, since the agent passes
// the builder's pointer through and never looks into it.
namespace grpc_core {
class CoreConfiguration {
 public:
  class Builder;
};
using Builder = CoreConfiguration::Builder;
void RegisterHttpConnectHandshaker(Builder* builder);
void RegisterTCPConnectHandshaker(Builder* builder);
void RegisterPickFirstLbPolicy(Builder* builder);
void RegisterRoundRobinLbPolicy(Builder* builder);
void BuildClientChannelConfiguration(Builder* builder);
void SecurityRegisterHandshakerFactories(Builder* builder);
void RegisterClientAuthorityFilter(Builder* builder);
void RegisterChannelIdleFilters(Builder* builder);
void RegisterHttpFilters(Builder* builder);
void RegisterDeadlineFilter(Builder* builder);
void RegisterMessageSizeFilter(Builder* builder);
void RegisterServiceConfigChannelArgFilter(Builder* builder);
void RegisterResourceQuota(Builder* builder);
void RegisterNativeDnsResolver(Builder* builder);
void RegisterSockaddrResolver(Builder* builder);
void RegisterHttpProxyMapper(Builder* builder);
void RegisterSecurityFilters(Builder* builder);
void RegisterBuiltins(Builder* builder);
void BuildCoreConfiguration(Builder* builder);
}  // namespace grpc_core

void grpc_resolver_dns_ares_init();
void grpc_resolver_dns_ares_shutdown();

namespace grpc_event_engine::experimental {
void RegisterEventEngineChannelArgPreconditioning(grpc_core::Builder* builder);
}  // namespace grpc_event_engine::experimental

// gRPC 1.51's BuildCoreConfiguration in its order, less the registrations
// the agent cannot use (see the top of this file).
void grpc_core::BuildCoreConfiguration(Builder* builder) {
  // gRPC builds its configuration once, on its first use and before it makes
  // its EventEngine: the agent's engine from here on. A mode that never uses
  // gRPC (static) never runs this, and so never touches gRPC's code.
  gpu_agent::InstallGrpcEventEngine();
  grpc_event_engine::experimental::RegisterEventEngineChannelArgPreconditioning(builder);
  // gRPC's order: TCP connect last, so that it runs first.
  RegisterHttpConnectHandshaker(builder);
  RegisterTCPConnectHandshaker(builder);
  RegisterPickFirstLbPolicy(builder);
  RegisterRoundRobinLbPolicy(builder);
  BuildClientChannelConfiguration(builder);
  SecurityRegisterHandshakerFactories(builder);
  RegisterClientAuthorityFilter(builder);
  RegisterChannelIdleFilters(builder);
  RegisterHttpFilters(builder);
  RegisterDeadlineFilter(builder);
  RegisterMessageSizeFilter(builder);
  RegisterServiceConfigChannelArgFilter(builder);
  RegisterResourceQuota(builder);
  RegisterNativeDnsResolver(builder);
  RegisterSockaddrResolver(builder);
  RegisterHttpProxyMapper(builder);
  RegisterSecurityFilters(builder);
  RegisterBuiltins(builder);
}

// c-ares is not linked (see the top of this file): nothing to start or stop.
void grpc_resolver_dns_ares_init() {}
void grpc_resolver_dns_ares_shutdown() {}
