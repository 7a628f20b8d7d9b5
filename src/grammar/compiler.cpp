#include "grammar/compiler.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <numeric>
#include <thread>

#include "grammar/ebnf_parser.h"
#include "grammar/pda.h"
#include "grammar/regex_converter.h"
#include "grammar/state_classes.h"

namespace deepinfer::grammar {
namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

int64_t cache_bytes_of(const StateTokenCache& c) {
  return static_cast<int64_t>((c.accepted_bitset.size() + c.accepted_ids.size() + c.uncertain_ids.size()) * 4);
}

// Classifies every matchable token for one top-of-stack state by a preorder walk of the vocabulary
// trie (tokens with a common prefix share the automaton work; a dead prefix skips its subtree).
class Classifier {
 public:
  Classifier(const ByteMachine& m, const TokenizerInfo& tok, int32_t expand_levels)
      : m_(m), tok_(tok), pda_(m, pool_, expand_levels) {
    const auto levels = static_cast<size_t>(tok.trie().max_depth) + 2;
    open_.resize(levels);
    closed_.resize(levels);
    flag_.resize(levels);
  }

  /// Classifies `state` into `out`; returns the trie nodes walked (the work done).
  int64_t run(int32_t state, StateTokenCache& out) {
    pool_.clear();
    int64_t steps = 0;
    const TokenTrie& t = tok_.trie();
    std::vector<int32_t> accepted;
    std::vector<int32_t>& uncertain = out.uncertain_ids;
    uncertain.clear();
    auto add_range = [&](std::vector<int32_t>& v, int32_t node_b, int32_t node_e) {
      v.insert(v.end(), t.tokens.begin() + t.token_begin[static_cast<size_t>(node_b)],
               t.tokens.begin() + t.token_begin[static_cast<size_t>(node_e)]);
    };
    open_[0].assign(1, Handle{state, -1, 0});
    flag_[0] = (pda_.closure(open_[0], closed_[0]) & Pda::kHorizon) != 0;
    int32_t n = t.num_nodes();
    int32_t i = 1;
    while (i < n) {
      ++steps;
      auto iu = static_cast<size_t>(i);
      auto d = static_cast<size_t>(t.depth[iu]);
      std::vector<Handle>& s = open_[d];
      pda_.step(closed_[d - 1], t.byte[iu], s);
      int32_t end = t.subtree_end[iu];
      if (s.empty()) {
        if (flag_[d - 1]) add_range(uncertain, i, end);
        i = end;
        continue;
      }
      bool inside = false;
      for (const Handle& h : s) inside = inside || h.level == 0;
      std::vector<int32_t>& dst = inside ? accepted : uncertain;
      dst.insert(dst.end(), t.tokens.begin() + t.token_begin[iu], t.tokens.begin() + t.token_begin[iu + 1]);
      if (end > i + 1) {
        bool horizon = (pda_.closure(s, closed_[d]) & Pda::kHorizon) != 0;  // always computed
        flag_[d] = flag_[d - 1] || horizon;
        if (closed_[d].empty()) {
          if (flag_[d]) add_range(uncertain, i + 1, end);
          i = end;
          continue;
        }
      }
      ++i;
    }
    out.num_accepted = static_cast<int32_t>(accepted.size());
    if (accepted.size() * 32 > static_cast<size_t>(tok_.vocab_size())) {  // a bitset needs no sort
      out.accepted_bitset.assign(static_cast<size_t>(tok_.bitmask_words()), 0);
      for (int32_t id : accepted) out.accepted_bitset[static_cast<size_t>(id) >> 5] |= 1u << (id & 31);
    } else {
      std::sort(accepted.begin(), accepted.end());
      out.accepted_ids = std::move(accepted);
    }
    return steps;
  }

 private:
  const ByteMachine& m_;
  const TokenizerInfo& tok_;
  NodePool pool_;
  Pda pda_;
  std::vector<std::vector<Handle>> open_;
  std::vector<std::vector<Handle>> closed_;
  std::vector<uint8_t> flag_;
};

}  // namespace

GrammarCompiler::GrammarCompiler(std::shared_ptr<const TokenizerInfo> tokenizer, CompilerOptions options)
    : tokenizer_(std::move(tokenizer)), options_(options) {}

size_t GrammarCompiler::cache_size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cache_.size();
}

int64_t GrammarCompiler::cache_hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

Result<std::shared_ptr<const CompiledGrammar>> GrammarCompiler::compile(const Grammar& g) {
  DI_TRY(g.validate());
  std::string ebnf = g.to_ebnf();
  std::string key = std::to_string(tokenizer_->fingerprint()) + "\n" + ebnf;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      it->second.second = ++clock_;
      ++hits_;
      return it->second.first;
    }
    // A grammar that failed (over a budget) fails the same way again: answer at once.
    for (const auto& [k, status] : failed_) {
      if (k == key) {
        ++hits_;
        return status;
      }
    }
  }
  auto built = build(g, std::move(ebnf));
  std::lock_guard<std::mutex> lock(mu_);
  if (!built.is_ok()) {
    failed_.emplace_back(key, built.status());
    if (failed_.size() > kFailedKept) failed_.pop_front();
    return built.status();
  }
  std::shared_ptr<const CompiledGrammar> result = std::move(built).value();
  cache_[key] = {result, ++clock_};
  while (cache_.size() > std::max<size_t>(1, options_.max_cache_entries)) {
    auto oldest = cache_.begin();
    for (auto it = cache_.begin(); it != cache_.end(); ++it) {
      if (it->second.second < oldest->second.second) oldest = it;
    }
    cache_.erase(oldest);
  }
  return result;
}

Result<std::shared_ptr<const CompiledGrammar>> GrammarCompiler::build(const Grammar& g, std::string ebnf) const {
  auto t0 = std::chrono::steady_clock::now();
  std::shared_ptr<CompiledGrammar> cg(new CompiledGrammar());
  DI_ASSIGN_OR_RETURN(cg->machine_, build_byte_machine(g, options_.max_states, tokenizer_.get()));
  cg->tokenizer_ = tokenizer_;
  cg->ebnf_ = std::move(ebnf);
  const ByteMachine& m = cg->machine_;
  cg->stats_.num_rules = g.num_rules();
  cg->stats_.num_states = m.num_states;
  cg->stats_.build_ms = ms_since(t0);

  auto t1 = std::chrono::steady_clock::now();
  // One classification per class of equivalent states (state_classes.h), shared by its members.
  std::vector<int32_t> cls(static_cast<size_t>(m.num_states));
  if (options_.share_equivalent_states) {
    cls = classification_classes(m, tokenizer_->trie().max_depth + 1);
  } else {
    std::iota(cls.begin(), cls.end(), 0);
  }
  std::vector<int32_t> todo, slot_of_class(static_cast<size_t>(m.num_states), -1);
  cg->cache_of_.assign(static_cast<size_t>(m.num_states), 0);  // 0: the empty cache
  for (int32_t s = 0; s < m.num_states; ++s) {
    if (!m.needs_cache[static_cast<size_t>(s)]) continue;
    int32_t& slot = slot_of_class[static_cast<size_t>(cls[static_cast<size_t>(s)])];
    if (slot < 0) {
      slot = static_cast<int32_t>(todo.size()) + 1;
      todo.push_back(s);
    }
    cg->cache_of_[static_cast<size_t>(s)] = slot;
    ++cg->stats_.num_cached_states;
  }
  cg->caches_.resize(todo.size() + 1);
  // Budgets: each worker adds its states' trie walks and cache bytes; past either, every worker
  // stops after its current state and the compile fails.
  std::atomic<size_t> next{0};
  std::atomic<int64_t> steps{0}, cache_bytes{0};
  std::atomic<bool> over{false};
  auto worker = [&]() {
    Classifier c(m, *tokenizer_, options_.context_expansion ? 1 : 0);
    for (size_t k = next++; k < todo.size() && !over.load(std::memory_order_relaxed); k = next++) {
      StateTokenCache& cache = cg->caches_[k + 1];
      const int64_t walked = c.run(todo[k], cache);
      const int64_t st = steps.fetch_add(walked, std::memory_order_relaxed) + walked;
      const int64_t bytes = cache_bytes_of(cache);
      const int64_t by = cache_bytes.fetch_add(bytes, std::memory_order_relaxed) + bytes;
      if (st > options_.max_classify_steps || by > options_.max_cache_bytes) over.store(true);
    }
  };
  int32_t nt = std::clamp(options_.num_threads, 1, 64);
  nt = std::min<int32_t>(nt, static_cast<int32_t>(std::max<size_t>(1, todo.size())));
  std::vector<std::thread> threads;
  for (int32_t i = 1; i < nt; ++i) threads.emplace_back(worker);
  worker();
  for (std::thread& th : threads) th.join();
  cg->stats_.classify_ms = ms_since(t1);
  cg->stats_.classify_steps = steps.load();
  if (over.load()) {
    return Status::invalid_argument(
        "the grammar is too complex to compile for this vocabulary: " + std::to_string(m.num_states) +
        " automaton states, token classification stopped at its budget (" +
        std::to_string(options_.max_classify_steps) + " vocabulary-trie steps, " +
        std::to_string(options_.max_cache_bytes >> 20) +
        " MiB of token caches); simplify it (a pattern such as .*a.{12} needs an automaton state per "
        "combination of positions)");
  }
  cg->stats_.num_classified_states = static_cast<int32_t>(todo.size());
  for (const StateTokenCache& c : cg->caches_) {
    cg->stats_.num_uncertain += static_cast<int64_t>(c.uncertain_ids.size());
    cg->stats_.max_uncertain = std::max<int64_t>(cg->stats_.max_uncertain, static_cast<int64_t>(c.uncertain_ids.size()));
  }
  cg->stats_.cache_bytes =
      static_cast<int64_t>((m.next.size() + cg->cache_of_.size()) * sizeof(int32_t)) + cache_bytes.load();
  return std::shared_ptr<const CompiledGrammar>(std::move(cg));
}

Result<std::shared_ptr<const CompiledGrammar>> GrammarCompiler::compile_ebnf(std::string_view ebnf, std::string_view root) {
  DI_ASSIGN_OR_RETURN(Grammar g, parse_ebnf(ebnf, root));
  return compile(g);
}

Result<std::shared_ptr<const CompiledGrammar>> GrammarCompiler::compile_regex(std::string_view pattern) {
  DI_ASSIGN_OR_RETURN(Grammar g, regex_to_grammar(pattern));
  return compile(g);
}

Result<std::shared_ptr<const CompiledGrammar>> GrammarCompiler::compile_json_schema(std::string_view schema,
                                                                                     const JsonSchemaOptions& opts) {
  DI_ASSIGN_OR_RETURN(Grammar g, json_schema_to_grammar(schema, opts));
  return compile(g);
}

Result<std::shared_ptr<const CompiledGrammar>> GrammarCompiler::compile_builtin_json(bool object_only,
                                                                                      const JsonSchemaOptions& opts) {
  return compile_ebnf(builtin_json_ebnf(object_only, opts));
}

}  // namespace deepinfer::grammar
