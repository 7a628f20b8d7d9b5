// `deepinfer score` and `inspect`: the model-level subcommands (generate: cmd_generate.cpp).
#include <cstdio>
#include <map>

#include "commands.h"
#include "device_flag.h"
#include "core/log.h"
#include "engine/offline.h"
#include "jsonl.h"
#include "model/deepseek_v4/model.h"
#include "model/deepseek_v41/inventory.h"
#include "model/model.h"

namespace deepinfer::cli {

namespace {

int fail(const Status& s) {
  std::fprintf(stderr, "deepinfer: error: %s\n", std::string(s.message()).c_str());
  return 1;
}

struct ModelArgs {
  std::string model_dir;
  std::string input, output;
  int threads = 0;
  bool reference_rounding = false;
  bool kv_rounding_only = false;
  std::string device = "cpu";
};

Result<std::unique_ptr<Backend>> make_cpu(int threads) {
  BackendConfig bc;
  bc.num_threads = threads;
  return Backend::create(bc);
}

int run_score(const ModelArgs& a, int64_t top_k) {
  if (top_k < 0) return fail(Status::invalid_argument("--top-logprobs must be >= 0"));
  auto lines = read_jsonl(a.input);
  if (!lines.is_ok()) return fail(lines.status());
  std::vector<std::vector<int32_t>> seqs;
  std::vector<nlohmann::json> ids;
  for (const auto& l : *lines) {
    auto toks = token_array(l, "tokens", a.input);
    if (!toks.is_ok()) return fail(toks.status());
    seqs.push_back(std::move(toks).value());
    ids.push_back(l.value.contains("id") ? l.value["id"] : nlohmann::json(l.line_no));
  }
  if (int rc = check_device_flag("score", a.device)) return rc;
  auto backend = make_cpu(a.threads);
  if (!backend.is_ok()) return fail(backend.status());
  LoadOptions lo;
  lo.numerics.reference_rounding = a.reference_rounding || a.kv_rounding_only;
  lo.numerics.kv_only = a.kv_rounding_only;
  lo.device = a.device;
  auto model = load_model(a.model_dir, **backend, lo);
  if (!model.is_ok()) return fail(model.status());
  for (size_t i = 0; i < seqs.size(); ++i)
    for (int32_t t : seqs[i])
      if (t >= (*model)->info().vocab_size)
        return fail(Status::invalid_argument(a.input + ":" + std::to_string((*lines)[i].line_no) + ": token id " +
                                             std::to_string(t) + " >= vocab_size " +
                                             std::to_string((*model)->info().vocab_size)));
  ScoreOptions opt;
  opt.top_logprobs = top_k;
  auto results = score_sequences(**model, seqs, opt);
  if (!results.is_ok()) return fail(results.status());
  AtomicWriter w(a.output);
  if (!w.ok()) return fail(Status::invalid_argument(a.output + ": cannot write"));
  for (size_t i = 0; i < seqs.size(); ++i) {
    const ScoreResult& r = (*results)[i];
    nlohmann::json lp = nlohmann::json::array(), top = nlohmann::json::array();
    for (size_t t = 0; t < r.token_logprobs.size(); ++t) {
      lp.push_back(r.token_logprobs[t] ? nlohmann::json(*r.token_logprobs[t]) : nlohmann::json(nullptr));
      if (t == 0) {
        top.push_back(nullptr);
        continue;
      }
      nlohmann::json alts = nlohmann::json::array();
      for (const auto& [id, v] : r.top_logprobs[t]) alts.push_back({id, v});
      top.push_back(alts);
    }
    w.line({{"id", ids[i]}, {"token_logprobs", lp}, {"top_logprobs", top}});
  }
  Status s = w.commit();
  return s.is_ok() ? 0 : fail(s);
}

int run_inspect(const std::string& dir, bool as_json);

}  // namespace

void register_model_commands(CLI::App& app, Registry& reg) {
  auto args = std::make_shared<ModelArgs>();
  auto top_k = std::make_shared<int64_t>(0);
  CLI::App* score = app.add_subcommand("score", "log-probabilities of given token sequences (JSONL in/out)");
  score->add_option("model_dir", args->model_dir, "model folder")->required();
  score->add_option("--input", args->input, "JSONL: {\"id\", \"tokens\": [ints]}")->required();
  score->add_option("--output", args->output, "JSONL: {\"id\", \"token_logprobs\", \"top_logprobs\"}")->required();
  score->add_option("--top-logprobs", *top_k, "alternatives per position");
  score->add_option("--threads", args->threads, "CPU threads (0: all)");
  add_device_option(score, args->device);
  score->add_flag("--reference-rounding", args->reference_rounding,
                  "reproduce the official reference's low-precision rounding (FP8/FP4 KV, indexer, FP8 "
                  "activations) instead of exact arithmetic");
  score->add_flag("--kv-rounding-only", args->kv_rounding_only,
                  "V4.1: only the KV / indexer part of --reference-rounding (the NumPy reference's kv_quant)");
  reg.add(score, [args, top_k] { return run_score(*args, *top_k); });

  auto dir = std::make_shared<std::string>();
  auto as_json = std::make_shared<bool>(false);
  CLI::App* insp = app.add_subcommand("inspect", "config summary, tensor inventory, parameter and state sizes");
  insp->add_option("model_dir", *dir, "model folder")->required();
  insp->add_flag("--json", *as_json, "print JSON");
  reg.add(insp, [dir, as_json] { return run_inspect(*dir, *as_json); });
}

namespace {

int run_inspect_v41(const std::string& dir, const Checkpoint& ck, bool as_json);

int run_inspect(const std::string& dir, bool as_json) {
  auto ck = Checkpoint::open(dir, /*require_weights=*/false);
  if (!ck.is_ok()) return fail(ck.status());
  if (ck->config().is_object() && ck->config().value("model_type", std::string()) == "deepseek_v41")
    return run_inspect_v41(dir, *ck, as_json);
  auto cfg = v4::V4Config::from_json(ck->config(), dir + "/config.json");
  if (!cfg.is_ok()) return fail(cfg.status());
  const v4::V4Config& c = *cfg;
  bool mtp = false;
  struct Inv { int64_t tensors = 0; uint64_t bytes = 0; uint64_t params = 0; };
  std::map<std::string, Inv> inv;
  uint64_t total_bytes = 0, total_params = 0;
  for (const auto& t : ck->tensors()) {
    auto& e = inv[std::string(dtype_name(t.info->dtype))];
    const uint64_t bytes = t.info->end - t.info->begin;
    const bool is_scale = t.info->name.size() > 6 && t.info->name.substr(t.info->name.size() - 6) == ".scale";
    // Packed FP4 holds two parameters per byte; scales are metadata, not parameters.
    const uint64_t params = is_scale ? 0 : (t.info->dtype == DType::kI8 || t.info->dtype == DType::kU8)
                                               ? 2 * bytes : static_cast<uint64_t>(shape_numel(t.info->shape));
    e.tensors++;
    e.bytes += bytes;
    e.params += params;
    total_bytes += bytes;
    total_params += params;
    mtp |= v4::canonical_tensor_name(t.info->name).rfind("mtp.0.", 0) == 0;
  }
  const v4::StateSizes ss = v4::state_sizes(c, mtp);
  int64_t n_swa = 0, n_csa = 0, n_hca = 0, n_hash = 0;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    n_swa += c.attn_kinds[l] == v4::AttnKind::kSliding;
    n_csa += c.attn_kinds[l] == v4::AttnKind::kCsa;
    n_hca += c.attn_kinds[l] == v4::AttnKind::kHca;
    n_hash += c.hash_moe[l];
  }
  nlohmann::json j;
  j["model_dir"] = dir;
  j["config"] = {{"model_type", "deepseek_v4"}, {"vocab_size", c.vocab_size}, {"hidden_size", c.hidden},
                 {"layers", c.num_layers}, {"sliding_layers", n_swa}, {"csa_layers", n_csa},
                 {"hca_layers", n_hca}, {"hash_moe_layers", n_hash}, {"heads", c.num_heads},
                 {"head_dim", c.head_dim}, {"rope_dim", c.rope_dim}, {"window", c.window},
                 {"routed_experts", c.n_routed_experts}, {"experts_per_token", c.experts_per_tok},
                 {"moe_intermediate_size", c.moe_inter}, {"index_topk", c.index_topk}, {"hc_mult", c.hc_mult},
                 {"mtp_head", mtp}};
  nlohmann::json dt = nlohmann::json::object();
  for (const auto& [k, v] : inv) dt[k] = {{"tensors", v.tensors}, {"bytes", v.bytes}, {"parameters", v.params}};
  j["tensors"] = {{"count", ck->tensors().size()}, {"bytes", total_bytes}, {"parameters", total_params},
                  {"by_dtype", dt}};
  j["state"] = {{"bytes_per_token", ss.bytes_per_token}, {"bytes_per_sequence", ss.bytes_per_sequence},
                {"dtype", "f32"}};
  if (as_json) {
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("model        %s (deepseek_v4)\n", dir.c_str());
  std::printf("layers       %lld: %lld sliding, %lld CSA, %lld HCA; %lld hash-routed MoE%s\n",
              (long long)c.num_layers, (long long)n_swa, (long long)n_csa, (long long)n_hca, (long long)n_hash,
              mtp ? "; MTP head" : "");
  std::printf("shapes       hidden %lld, heads %lld x %lld (rope %lld), window %lld, experts %lld top-%lld x %lld\n",
              (long long)c.hidden, (long long)c.num_heads, (long long)c.head_dim, (long long)c.rope_dim,
              (long long)c.window, (long long)c.n_routed_experts, (long long)c.experts_per_tok,
              (long long)c.moe_inter);
  std::printf("tensors      %zu, %.3f GB, %.3f B parameters\n", ck->tensors().size(), total_bytes / 1e9,
              total_params / 1e9);
  for (const auto& [k, v] : inv)
    std::printf("  %-8s   %6lld tensors %12llu bytes %14llu parameters\n", k.c_str(), (long long)v.tensors,
                (unsigned long long)v.bytes, (unsigned long long)v.params);
  std::printf("state (f32)  %.1f bytes per token, %zu bytes per sequence (rings + open windows)\n",
              ss.bytes_per_token, ss.bytes_per_sequence);
  return 0;
}

// V4.1: names (from the index, or the shards when present) and shapes (shards only) against the
// architecture's inventory; parameters from the inventory's logical shapes; state bytes.
int run_inspect_v41(const std::string& dir, const Checkpoint& ck, bool as_json) {
  auto cfg = v41::V41Config::from_json(ck.config(), dir + "/config.json");
  if (!cfg.is_ok()) return fail(cfg.status());
  const v41::V41Config& c = *cfg;
  std::vector<std::string> names;
  std::map<std::string, const TensorInfo*> infos;
  for (const auto& t : ck.tensors()) names.push_back(t.info->name), infos[t.info->name] = t.info;
  const bool have_weights = !names.empty();
  if (!have_weights) {
    auto idx = Checkpoint::read_json(dir + "/model.safetensors.index.json");
    if (!idx.is_ok()) return fail(idx.status());
    for (auto it = (*idx)["weight_map"].begin(); it != (*idx)["weight_map"].end(); ++it) names.push_back(it.key());
  }
  const v41::IndexCheck r = v41::check_index_names(c, names);
  const std::string where = dir + (have_weights ? "" : "/model.safetensors.index.json");
  if (!r.missing.empty())
    return fail(Status::invalid_argument(where + ": missing tensor '" + r.missing.front() + "' (and " +
                                         std::to_string(r.missing.size() - 1) + " more)"));
  if (!r.unexpected.empty())
    return fail(Status::invalid_argument(where + ": unexpected tensor '" + r.unexpected.front() + "' (and " +
                                         std::to_string(r.unexpected.size() - 1) + " more)"));
  if (have_weights)
    for (const auto& e : v41::expected_tensors(c)) {
      const TensorInfo* ti = infos.count(e.name) ? infos[e.name] : infos["model." + e.name];
      Shape packed = e.shape;
      if (ti->dtype == DType::kI8 && packed.size() == 2) packed[1] /= 2;  // MXFP4: two values per byte
      if (ti->shape != e.shape && ti->shape != packed)
        return fail(Status::invalid_argument(ck.dir() + ": tensor '" + e.name + "': shape " +
                                             shape_to_string(ti->shape) + ", expected " + shape_to_string(e.shape)));
    }
  const v4::StateSizes ss = v41::state_sizes(c);
  const uint64_t total = r.backbone_params + r.engram_table_params + r.engram_other_params;
  nlohmann::json j;
  j["model_dir"] = dir;
  j["config"] = {{"model_type", "deepseek_v41"}, {"vocab_size", c.vocab_size}, {"hidden_size", c.hidden},
                 {"layers", c.num_layers}, {"heads", c.num_heads}, {"head_dim", c.head_dim},
                 {"routed_experts", c.n_routed_experts}, {"experts_per_token", c.experts_per_tok},
                 {"kv_sources", c.kv_sources}, {"index_sources", c.index_sources},
                 {"engram_layers", c.engram_layers}, {"window", c.window}};
  j["tensors"] = {{"names", names.size()}, {"checked", r.matched}, {"scales", r.scales}, {"dspark", r.dspark},
                  {"not_checked", r.not_checked}, {"weights_present", have_weights}};
  j["parameters"] = {{"backbone", r.backbone_params}, {"engram_tables", r.engram_table_params},
                     {"engram_other", r.engram_other_params}, {"total_without_dspark", total},
                     {"dspark", r.dspark_params}};
  j["state"] = {{"bytes_per_token", ss.bytes_per_token}, {"bytes_per_sequence", ss.bytes_per_sequence},
                {"dtype", "f32"}};
  const std::vector<v41::MemoryPlan> plans = v41::memory_plans(c);
  nlohmann::json mem = nlohmann::json::array();
  for (const auto& p : plans)
    mem.push_back({{"gpus", p.gpus}, {"experts_per_gpu", p.experts_per_gpu},
                   {"routed_expert_bytes_per_gpu", p.routed_expert_bytes}, {"replicated_bytes_per_gpu", p.replicated_bytes},
                   {"dspark_experts_per_gpu", p.dspark_experts_per_gpu},
                   {"dspark_routed_bytes_per_gpu", p.dspark_routed_bytes},
                   {"dspark_replicated_bytes_per_gpu", p.dspark_replicated_bytes},
                   {"weight_bytes_per_gpu", p.weight_bytes_per_gpu}, {"engram_table_host_bytes", p.engram_table_host_bytes},
                   {"state_bytes_per_token", p.state_bytes_per_token},
                   {"state_bytes_per_sequence", p.state_bytes_per_sequence}});
  j["memory"] = {{"layout", "expert parallel: routed experts (backbone and DSpark) split by id, the rest replicated; "
                            "weight_bytes_per_gpu includes DSpark; Engram tables in host "
                            "memory (mmapped); state f32 on the GPU running the sequence; stored formats as released"},
                 {"per_gpu_count", mem}};
  if (as_json) {
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("model        %s (deepseek_v41)\n", dir.c_str());
  std::printf("layers       %lld; KV sources %zu, index sources %zu, Engram layers %zu\n", (long long)c.num_layers,
              c.kv_sources.size(), c.index_sources.size(), c.engram_layers.size());
  std::printf("tensors      %zu names: %lld checked, %lld scales, %lld DSpark (not checked), %lld vision (not checked)\n",
              names.size(), (long long)r.matched, (long long)r.scales, (long long)r.dspark, (long long)r.not_checked);
  std::printf("parameters   %.3f B backbone + %.3f B Engram tables + %.3f B Engram projections = %.3f B (without DSpark); "
              "DSpark %.3f B\n",
              r.backbone_params / 1e9, r.engram_table_params / 1e9, r.engram_other_params / 1e9, total / 1e9,
              r.dspark_params / 1e9);
  std::printf("state (f32)  %.1f bytes per token, %zu bytes per sequence (rings + open groups)\n", ss.bytes_per_token,
              ss.bytes_per_sequence);
  std::printf("memory       expert parallel (routed experts split, rest replicated); Engram tables %.3f GB in host memory\n",
              plans.empty() ? 0.0 : plans[0].engram_table_host_bytes / 1e9);
  for (const auto& p : plans)
    std::printf("  %lld GPU%s     %.3f GB weights per GPU (%lld experts/layer %.3f GB + replicated %.3f GB + DSpark "
                "%lld experts/stage %.3f GB + %.3f GB), + %.1f B state per token\n",
                (long long)p.gpus, p.gpus == 1 ? " " : "s", p.weight_bytes_per_gpu / 1e9, (long long)p.experts_per_gpu,
                p.routed_expert_bytes / 1e9, p.replicated_bytes / 1e9, (long long)p.dspark_experts_per_gpu,
                p.dspark_routed_bytes / 1e9, p.dspark_replicated_bytes / 1e9, p.state_bytes_per_token);
  return 0;
}

}  // namespace
}  // namespace deepinfer::cli
