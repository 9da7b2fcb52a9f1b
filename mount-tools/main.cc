// The stoker binary: one CLI11 app whose subcommands live in cmd_*.cc.
#include <cstdio>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "mount-tools/cli_parse.h"
#include "mount-tools/commands.h"
#include "mount-tools/mount_helper.h"

#ifndef STOKER_VERSION
#define STOKER_VERSION "unknown"
#endif

namespace {

// Called as mount(8)'s or umount(8)'s helper (mount-tools/mount_helper.h),
// or by fuse3's mount.fuse3 (cli_parse.h): the arguments of the subcommand to
// run instead; nullopt otherwise.
std::optional<stoker::Result<std::vector<std::string>>> HelperArgs(const CLI::App& app, int argc,
                                                                   char** argv) {
  const char* slash = std::strrchr(argv[0], '/');
  const std::string self = slash != nullptr ? slash + 1 : argv[0];
  const std::vector<std::string> rest(argv + 1, argv + argc);
  if (self == "mount.fuse.stoker") return stoker::MountHelperArgs(rest);
  if (self == "umount.fuse.stoker") return stoker::UnmountHelperArgs(rest);
  if (stoker::IsFuseHelperCall(app, rest)) return stoker::MountHelperArgs(rest);
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace stoker;
  CLI::App app("stoker: a read-only FUSE mount that keeps a slow origin's data in an SSD cache",
               "stoker");
  app.set_version_flag("--version", "stoker " STOKER_VERSION, "Print the version and exit");
  app.require_subcommand(0, 1);
  std::vector<Subcommand> commands = {
      AddMountCommand(app), AddUnmountCommand(app), AddStatCommand(app),    AddFsckCommand(app),
      AddWarmCommand(app),  AddOrderCommand(app),   AddRefreshCommand(app), AddFluidCommand(app)};
  UntypePositionals(app);
  std::vector<std::string> helper_args;
  std::vector<char*> helper_argv;
  if (auto helper = HelperArgs(app, argc, argv)) {
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
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string where = "stoker";
    for (const CLI::App* sub : app.get_subcommands()) where += " " + sub->get_name();
    PrintError(ParseErrorLine(app, e) + " (see '" + where + " --help')");
    return kExitUsage;
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
