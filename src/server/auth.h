// API keys (vLLM's --api-key): with keys configured, the API routes answer 401 unless the request
// carries "Authorization: Bearer <one of the keys>"; /health and /metrics stay open (probes and
// scrapers). Shared by `deepinfer serve` and `deepinfer route`.
#pragma once

#include <string>
#include <vector>

#include "server/http_server.h"

namespace deepinfer::server {

/// True when `keys` is empty or the request's bearer token is one of them (compared without
/// early exit, so the time does not tell how much of a key matched).
bool authorized(const HttpRequest& req, const std::vector<std::string>& keys);
/// The 401 an unauthorized request gets (an OpenAI error object, code "invalid_api_key").
HttpResponse unauthorized_response();
/// The keys from a comma-separated option value, or else the environment variable `env` (unset
/// or empty: none). Empty entries are dropped.
std::vector<std::string> api_keys_from(const std::string& option, const char* env);

}  // namespace deepinfer::server
