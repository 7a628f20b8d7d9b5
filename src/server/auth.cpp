#include "server/auth.h"

#include <cstdlib>

#include "server/api_error.h"

namespace deepinfer::server {

namespace {

bool same(const std::string& token, const std::string& key) {
  // Every byte of the token is looked at, whatever matches: no early exit.
  unsigned char diff = token.size() == key.size() ? 0 : 1;
  for (size_t i = 0; i < token.size(); ++i) diff |= static_cast<unsigned char>(token[i] ^ (i < key.size() ? key[i] : 0));
  return diff == 0;
}

}  // namespace

bool authorized(const HttpRequest& req, const std::vector<std::string>& keys) {
  if (keys.empty()) return true;
  const std::string h = req.header("authorization");
  const std::string prefix = "Bearer ";
  if (h.size() <= prefix.size() || h.compare(0, prefix.size(), prefix) != 0) return false;
  const std::string token = h.substr(prefix.size());
  bool ok = false;
  for (const auto& k : keys) ok |= same(token, k);
  return ok;
}

HttpResponse unauthorized_response() {
  ApiError e = api_error_for_http(401, "Incorrect or missing API key: send \"Authorization: Bearer <key>\"");
  e.code = "invalid_api_key";
  HttpResponse r;
  r.status = 401;
  r.body = api_error_body(e);
  r.headers.push_back({"WWW-Authenticate", "Bearer"});
  return r;
}

std::vector<std::string> api_keys_from(const std::string& option, const char* env) {
  std::string v = option;
  if (v.empty() && env) {
    const char* e = std::getenv(env);
    if (e) v = e;
  }
  std::vector<std::string> keys;
  size_t at = 0;
  while (at <= v.size()) {
    const size_t comma = v.find(',', at);
    std::string k = v.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (!k.empty()) keys.push_back(std::move(k));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return keys;
}

}  // namespace deepinfer::server
