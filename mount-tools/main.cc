// The stoker binary: one CLI11 app whose subcommands live in cmd_*.cc.
#include <cstdio>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "mount-tools/commands.h"
#include "mount-tools/mount_helper.h"

#ifndef STOKER_VERSION
#define STOKER_VERSION "unknown"
#endif

namespace {

// Called as mount(8)'s or umount(8)'s helper (mount-tools/mount_helper.h):
// the arguments of the subcommand to run instead; nullopt otherwise.
std::optional<stoker::Result<std::vector<std::string>>> HelperArgs(int argc, char** argv) {
  const char* slash = std::strrchr(argv[0], '/');
  const std::string self = slash != nullptr ? slash + 1 : argv[0];
  const std::vector<std::string> rest(argv + 1, argv + argc);
  if (self == "mount.fuse.stoker") return stoker::MountHelperArgs(rest);
  if (self == "umount.fuse.stoker") return stoker::UnmountHelperArgs(rest);
  // fuse3's mount.fuse3 runs `stoker ORIGIN MOUNTPOINT -o ...`: an origin is
  // a path or a URL, which no subcommand's name is.
  if (argc >= 3 && std::strchr(argv[1], '/') != nullptr && argv[2][0] != '-') {
    return stoker::MountHelperArgs(rest);
  }
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace stoker;
  std::vector<std::string> helper_args;
  std::vector<char*> helper_argv;
  if (auto helper = HelperArgs(argc, argv)) {
    if (!helper->ok()) {
      PrintError(helper->status().message());
      return kExitUsage;
    }
    helper_args = std::move(*helper).value();
    helper_argv.push_back(argv[0]);
    for (std::string& a : helper_args) helper_argv.push_back(a.data());
    argc = static_cast<int>(helper_argv.size());
    argv = helper_argv.data();
  }
  CLI::App app("stoker: a read-only FUSE mount that keeps a slow origin's data in an SSD cache",
               "stoker");
  app.set_version_flag("--version", "stoker " STOKER_VERSION, "Print the version and exit");
  app.require_subcommand(0, 1);
  std::vector<Subcommand> commands = {AddMountCommand(app), AddUnmountCommand(app),
                                      AddStatCommand(app),  AddFsckCommand(app),
                                      AddWarmCommand(app),  AddOrderCommand(app)};
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
