// Router: one OpenAI-compatible endpoint in front of several `deepinfer serve` replicas
// (`deepinfer route`). Each generation request goes to the replica ReplicaPicker chooses (by
// default the one whose prefix cache most likely holds the prompt's start, unless the load is
// imbalanced) and is relayed as it comes: a stream chunk by chunk, a whole body once it is done.
// A replica that refuses the connection is marked down and the request goes to the next one;
// a health check (GET /health of each replica) marks replicas down and up again. A client that
// goes away closes the upstream connection, so the replica cancels the generation. The replica
// that served a request is named in the `x-deepinfer-replica` header. GET /v1/models is a
// healthy replica's; /health is 200 while one replica is healthy; /metrics has the router's
// counters by replica.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "router/replica_picker.h"

namespace deepinfer::router {

struct ReplicaAddress {
  std::string host;
  int port = 0;
  std::string url;  // as given: http://host:port
};
/// "http://host:port" (a trailing "/" or "/v1" is dropped).
Result<ReplicaAddress> parse_replica_url(const std::string& url);

struct RouterConfig {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: any free port
  std::vector<std::string> replicas;
  PickerOptions picker;
  std::chrono::milliseconds health_interval{1000};
  std::chrono::milliseconds connect_timeout{2000};
  std::chrono::seconds upstream_timeout{3600};  // a replica's answer may take this long
  /// A non-streaming answer not back after this long is relayed as the server does it
  /// (status first, then leading spaces while it waits) so a client that went away is seen.
  std::chrono::milliseconds disconnect_probe{500};
  int http_threads = 256;
  std::vector<std::string> api_keys;  // non-empty: clients need "Authorization: Bearer <key>"
  /// Sent to the replicas as "Authorization: Bearer <key>" ("" : the client's header, as it came).
  std::string replica_api_key;
  size_t max_body_bytes = size_t{32} << 20;
  Status validate() const;
};

class Router {
 public:
  explicit Router(RouterConfig cfg);
  ~Router();
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  /// Binds, starts serving and health-checking; returns the bound port.
  Result<int> start();
  void stop();
  const ReplicaPicker& picker() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace deepinfer::router
