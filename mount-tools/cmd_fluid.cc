// `stoker fluid`: the command of a Fluid ThinRuntimeProfile's FUSE container
// (mount-tools/fluid_config.h, docker/k8s/fluid/). It reads Fluid's config,
// creates the target directory, sets the secrets' environment and becomes
// `stoker mount ORIGIN TARGET --foreground ...` (exec: the same process, so
// SIGTERM from the kubelet reaches the mount, which unmounts and exits 0).
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

#include "mount-tools/commands.h"
#include "mount-tools/fluid_config.h"
#include "util/files.h"

namespace stoker {
namespace {

struct FluidArgs {
  std::string config;  // empty: Fluid's path, else the one before Fluid 1.1
  std::string cache = FluidDefaults().cache_dir;
  std::string secrets = FluidDefaults().secrets_dir;
  bool print = false;
};

int RunFluid(const FluidArgs& a) {
  std::string path = a.config;
  if (path.empty()) {
    path = kFluidConfig;
    struct stat st;
    if (stat(path.c_str(), &st) != 0 && stat(kFluidConfigBefore11, &st) == 0) {
      path = kFluidConfigBefore11;
    }
  }
  Result<std::string> text = ReadWholeFile(path);
  if (!text.ok()) {
    PrintError("fluid: cannot read the config " + path + ": " + text.status().message());
    return kExitFailure;
  }
  FluidDefaults defaults;
  defaults.cache_dir = a.cache;
  defaults.secrets_dir = a.secrets;
  defaults.read_file = ReadWholeFile;
  defaults.getenv = [](const char* name) -> const char* { return std::getenv(name); };
  Result<FluidMount> m = FluidMountOf(*text, defaults);
  if (!m.ok()) {
    PrintError("fluid: " + path + ": " + m.status().message());
    return kExitFailure;
  }
  if (a.print) {
    std::string line = "stoker";
    for (const std::string& arg : m->args) line += " " + arg;
    std::printf("%s\n", line.c_str());
    for (const auto& [name, value] : m->env)
      std::printf("env %s (%zu bytes)\n", name.c_str(), value.size());
    return kExitOk;
  }
  std::error_code ec;
  std::filesystem::create_directories(m->target, ec);
  if (ec) {
    PrintError("fluid: cannot create targetPath " + m->target + ": " + ec.message());
    return kExitFailure;
  }
  for (const auto& [name, value] : m->env) setenv(name.c_str(), value.c_str(), 1);
  std::vector<char*> argv;
  std::string self = "stoker";
  argv.push_back(self.data());
  for (std::string& arg : m->args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  execv("/proc/self/exe", argv.data());
  PrintError(std::string("fluid: cannot run stoker mount: ") + std::strerror(errno));
  return kExitFailure;
}

}  // namespace

Subcommand AddFluidCommand(CLI::App& root) {
  auto a = std::make_shared<FluidArgs>();
  CLI::App* app = root.add_subcommand(
      "fluid",
      "Mount what a Fluid ThinRuntime's config asks for (the FUSE container's command), in the "
      "foreground until SIGTERM");
  app->add_option("--config", a->config,
                  std::string("Fluid's config (default: ") + kFluidConfig + ", else " +
                      kFluidConfigBefore11 + ")")
      ->type_name("FILE");
  app->add_option("--cache", a->cache,
                  "Cache directory when the options name none (a hostPath of the profile)")
      ->capture_default_str()
      ->type_name("DIR");
  app->add_option("--secrets", a->secrets,
                  "Where Fluid mounts the Dataset's secrets: an option's value that names a file "
                  "below it is read from that file")
      ->capture_default_str()
      ->type_name("DIR");
  app->add_flag("--print", a->print,
                "Print the stoker mount command the config gives, and the secrets' variables "
                "(not their values); mount nothing");
  return {app, [a] { return RunFluid(*a); }};
}

}  // namespace stoker
