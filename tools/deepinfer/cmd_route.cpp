// `deepinfer route --replica URL --replica URL ...`: one OpenAI-compatible endpoint in front of
// several `deepinfer serve` replicas (src/router/): each request goes to the replica whose prefix
// cache most likely holds its prompt, unless the load is imbalanced; unreachable replicas are
// skipped and health-checked back in. SIGTERM / SIGINT stop it.
#include <signal.h>

#include <cstdio>
#include <memory>

#include "commands.h"
#include "router/router.h"
#include "server/auth.h"

namespace deepinfer::cli {
namespace {

struct RouteArgs {
  router::RouterConfig cfg;
  std::string policy = "cache_aware";
  int64_t health_interval_ms = 1000;
  std::string api_key;
};

int run_route(RouteArgs& a) {
  auto policy = router::parse_policy(a.policy);
  if (!policy.is_ok()) {
    std::fprintf(stderr, "deepinfer route: %s\n", policy.status().to_string().c_str());
    return 2;
  }
  a.cfg.picker.policy = *policy;
  a.cfg.health_interval = std::chrono::milliseconds(a.health_interval_ms);
  a.cfg.api_keys = server::api_keys_from(a.api_key, "DEEPINFER_API_KEY");
  if (Status s = a.cfg.validate(); !s.is_ok()) {
    std::fprintf(stderr, "deepinfer route: %s\n", s.to_string().c_str());
    return 2;
  }
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);  // before any thread starts: they inherit the mask
  signal(SIGPIPE, SIG_IGN);
  router::Router r(a.cfg);
  auto port = r.start();
  if (!port.is_ok()) {
    std::fprintf(stderr, "deepinfer route: %s\n", port.status().to_string().c_str());
    return 1;
  }
  std::printf("deepinfer route: listening on http://%s:%d/v1 (%zu replicas, %s)\n", a.cfg.host.c_str(), *port,
              a.cfg.replicas.size(), a.policy.c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&sigs, &sig);
  r.stop();
  return 0;
}

}  // namespace

void register_route_commands(CLI::App& app, Registry& reg) {
  auto a = std::make_shared<RouteArgs>();
  CLI::App* s = app.add_subcommand("route", "one endpoint in front of several `deepinfer serve` replicas (prefix-cache-aware)");
  s->add_option("--replica", a->cfg.replicas, "a replica's address, http://HOST:PORT (repeat for each)")->required();
  s->add_option("--host", a->cfg.host, "address to listen on");
  s->add_option("--port", a->cfg.port, "port (0: any free port)");
  s->add_option("--policy", a->policy, "cache_aware | round_robin | least_load")->capture_default_str();
  s->add_option("--cache-threshold", a->cfg.picker.cache_threshold,
                "cache_aware: the share of a prompt a replica must have been sent before to get it")
      ->capture_default_str();
  s->add_option("--balance-abs", a->cfg.picker.balance_abs,
                "cache_aware: requests in flight between the busiest and idlest replica above which load decides")
      ->capture_default_str();
  s->add_option("--health-interval-ms", a->health_interval_ms, "how often each replica's /health is checked")
      ->capture_default_str();
  s->add_option("--http-threads", a->cfg.http_threads, "concurrent client connections (each stream holds one)");
  s->add_option("--api-key", a->api_key,
                "clients need \"Authorization: Bearer KEY\" (comma-separated: several; default: $DEEPINFER_API_KEY)");
  s->add_option("--replica-api-key", a->cfg.replica_api_key,
                "the key sent to the replicas (default: each client's Authorization header, passed on)");
  reg.add(s, [a] { return run_route(*a); });
}

}  // namespace deepinfer::cli
