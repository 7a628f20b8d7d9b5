// deepinfer: one binary, subcommands registered by the cmd_*.cpp files.
#include <cstdio>

#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"deepinfer: inference engine for the DeepSeek-V4 family"};
  app.require_subcommand(1);
  deepinfer::cli::Registry reg;
  deepinfer::cli::register_model_commands(app, reg);
  deepinfer::cli::register_generate_commands(app, reg);
  deepinfer::cli::register_bench_commands(app, reg);
  deepinfer::cli::register_serve_commands(app, reg);
  deepinfer::cli::register_route_commands(app, reg);
#ifdef DI_HAVE_TOKENIZER_COMMANDS
  deepinfer::cli::register_tokenizer_commands(app, reg);
#endif
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  for (auto& [sub, handler] : reg.commands) {
    if (sub->parsed()) return handler();
  }
  return 2;
}
