// Subcommands of the `deepinfer` binary. Each cmd_*.cpp registers its subcommands on the app;
// a handler returns the process exit code (0 ok, 1 runtime error, 2 usage error).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace deepinfer::cli {

/// Registered handlers run after parsing; exactly one subcommand is selected.
using Handler = std::function<int()>;
struct Registry {
  std::vector<std::pair<CLI::App*, Handler>> commands;
  void add(CLI::App* sub, Handler h) { commands.emplace_back(sub, std::move(h)); }
};

void register_model_commands(CLI::App& app, Registry& reg);      // score, inspect
void register_generate_commands(CLI::App& app, Registry& reg);   // generate
void register_bench_commands(CLI::App& app, Registry& reg);      // bench, devices
void register_tokenizer_commands(CLI::App& app, Registry& reg);  // tokenize, detokenize
void register_serve_commands(CLI::App& app, Registry& reg);      // serve
void register_route_commands(CLI::App& app, Registry& reg);      // route

}  // namespace deepinfer::cli
