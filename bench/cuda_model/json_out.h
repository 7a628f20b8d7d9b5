// The result file in issue 5's format: {"machine", "git_rev", "command", "date", "rows": [{model,
// phase, batch, context, tokens_per_s, step_ms, floor_ms, floor_ratio, peer}]} plus the floors and
// per-row extras. Rewritten after every row, so a run killed by its time box still leaves JSON.
// merge_peer attaches the transformers peer's tokens/s (bench/peer_transformers.py rows {model,
// phase, batch, context, tokens_per_s}) to the rows with the same (model, phase, batch, context).
#pragma once

#include <string>
#include <vector>

#include "common.h"

namespace deepinfer::bench {

class JsonOut {
 public:
  JsonOut(std::string path, std::string rev, std::string command);
  void floors(double copy_Bps, double fp8_flops) { copy_ = copy_Bps, fp8_ = fp8_flops; }
  void note(const std::string& n) { notes_.push_back(n); }
  void add(const ResultRow& r) { rows_.push_back(r); }
  /// Reads the peer's measured rows; rows added before or after get the peer value of their key
  /// in every write(). Returns how many rows already added match (prints what it could not read).
  int merge_peer(const std::string& peer_path);
  void write() const;
  void print_table() const;

 private:
  std::string path_, rev_, command_, date_, machine_;
  double copy_ = 0, fp8_ = 0;
  std::vector<std::string> notes_;
  std::vector<ResultRow> rows_;
  std::vector<std::pair<std::string, double>> peer_;  // key -> tokens/s, per row index
  std::string peer_raw_;                              // the peer file's rows, kept verbatim
};

/// "model|phase|batch|context": the join key of our rows and the peer's.
std::string row_key(const std::string& model, const std::string& phase, int64_t batch, int64_t context);

}  // namespace deepinfer::bench
