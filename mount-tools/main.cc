// The stoker binary: one CLI11 app whose subcommands live in cmd_*.cc.
#include <cstdio>
#include <exception>
#include <vector>

#include "mount-tools/commands.h"

#ifndef STOKER_VERSION
#define STOKER_VERSION "unknown"
#endif

int main(int argc, char** argv) {
  using namespace stoker;
  CLI::App app("stoker: a read-only FUSE mount that keeps a slow origin's data in an SSD cache",
               "stoker");
  app.set_version_flag("--version", "stoker " STOKER_VERSION, "Print the version and exit");
  app.require_subcommand(0, 1);
  std::vector<Subcommand> commands = {AddMountCommand(app), AddUnmountCommand(app),
                                      AddStatCommand(app), AddFsckCommand(app),
                                      AddWarmCommand(app)};
  auto usage_error = [&app](const std::string& what) {
    std::string where = "stoker";
    for (const CLI::App* sub : app.get_subcommands()) where += " " + sub->get_name();
    PrintError(what + " (see '" + where + " --help')");
    return kExitUsage;
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ExtrasError& e) {
    if (app.get_subcommands().empty() && !app.remaining().empty()) {
      return usage_error("unknown command '" + app.remaining().front() + "'");
    }
    return usage_error(e.what());
  } catch (const CLI::ParseError& e) {
    return usage_error(e.what());
  }
  try {
    for (const auto& c : commands) {
      if (c.app->parsed()) return c.run();
    }
  } catch (const std::exception& e) {
    PrintError(e.what());
    return kExitFailure;
  }
  PrintError("no command given (see 'stoker --help')");
  return kExitUsage;
}
