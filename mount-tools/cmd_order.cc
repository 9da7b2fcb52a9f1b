// `stoker order FILE MOUNTPOINT`: hands a mount's daemon the order in which
// a reader (a data loader's sampler, one epoch) will open files, so that it
// fetches the next ones of it ahead of the reader (cache/order_prefetcher.h).
// The order goes over CACHE_DIR/control.sock, in parts that each fit one
// request; it replaces the mount's last order. `--clear` drops it.
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "mount-tools/commands.h"
#include "mount-tools/daemon_client.h"
#include "mount-tools/mount_root.h"

namespace stoker {

namespace {

// Under the control socket's 1 MiB a request, with room for the rest of it.
constexpr size_t kPartBytes = 768u << 10;

Result<std::string> ReadAll(const std::string& file) {
  std::ostringstream text;
  if (file == "-") {
    text << std::cin.rdbuf();
    return text.str();
  }
  std::ifstream in(file);
  if (!in) return Status::FromErrno("cannot read '" + file + "'");
  text << in.rdbuf();
  return text.str();
}

int RunOrder(const std::string& file, const std::string& mountpoint) {
  if (Status st = CheckOrderFile(file); !st.ok()) {
    PrintError("order: " + st.message());
    return kExitUsage;
  }
  Result<std::string> text = ReadAll(file);
  if (!text.ok()) {
    PrintError("order: " + text.status().message());
    return kExitUsage;
  }
  const std::vector<std::string> paths = ParseOrderLines(*text);
  if (paths.empty()) {
    PrintError("order: '" + file + "' names no files");
    return kExitUsage;
  }
  Result<Daemon> d = DaemonOf(mountpoint);
  if (!d.ok()) {
    PrintError(d.status().message());
    return kExitFailure;
  }
  uint64_t id = 0;
  for (const std::vector<std::string>& part : SplitOrder(paths, kPartBytes)) {
    nlohmann::json request = {{"op", "order"}, {"paths", part}};
    if (id != 0) request["order"] = id;
    Result<nlohmann::json> reply = Ask(*d, request);
    if (!reply.ok()) {
      PrintError(reply.status().message());
      return kExitFailure;
    }
    id = reply->value("order", uint64_t{0});
  }
  std::printf("order %llu: %zu files for '%s'\n", static_cast<unsigned long long>(id), paths.size(),
              d->root.c_str());
  return kExitOk;
}

int ClearOrder(const std::string& mountpoint) {
  Result<Daemon> d = DaemonOf(mountpoint);
  Result<nlohmann::json> reply = d.ok() ? Ask(*d, {{"op", "order"}, {"clear", true}}) : d.status();
  if (!reply.ok()) {
    PrintError(reply.status().message());
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace

Status CheckOrderFile(const std::string& file) {
  struct stat st;
  if (file == "-" || stat(file.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return Status::OK();
  const std::string what = FindMountRoot(file).ok() ? "a stoker mount" : "a directory";
  return Status::Invalid("'" + file + "' is " + what +
                         ", not a file of paths: usage: stoker order FILE MOUNTPOINT");
}

std::vector<std::string> ParseOrderLines(const std::string& text) {
  std::vector<std::string> paths;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty() && line[0] != '#') paths.push_back(line);
  }
  return paths;
}

std::vector<std::vector<std::string>> SplitOrder(const std::vector<std::string>& paths,
                                                 size_t max_bytes) {
  std::vector<std::vector<std::string>> parts(1);
  size_t bytes = 2;  // []
  for (const std::string& p : paths) {
    const size_t more = nlohmann::json(p).dump().size() + 1;  // quoted, escaped, a comma
    if (!parts.back().empty() && bytes + more > max_bytes) {
      parts.emplace_back();
      bytes = 2;
    }
    parts.back().push_back(p);
    bytes += more;
  }
  return parts;
}

namespace {

// The usage lines of `stoker order`: both arguments required, or --clear.
class OrderFormatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App*, std::string name) const override {
    return get_label("Usage") + ": " + name + " FILE MOUNTPOINT\n       " + name +
           " --clear MOUNTPOINT\n";
  }
};

}  // namespace

Subcommand AddOrderCommand(CLI::App& root) {
  struct Args {
    std::string file;
    std::string mountpoint;
    std::string clear;
  };
  auto args = std::make_shared<Args>();
  CLI::App* app = root.add_subcommand(
      "order",
      "Tell a mount the order a reader will open files in (one epoch), to fetch ahead of it");
  // FILE and MOUNTPOINT are required but for --clear, which CLI11 cannot say.
  app->formatter(std::make_shared<OrderFormatter>());
  app->add_option("FILE", args->file,
                  "The paths, one per line, relative to the mount's root or absolute under it; "
                  "'-' reads them from stdin");
  app->add_option("MOUNTPOINT", args->mountpoint, "The stoker mount (or any path under it)");
  app->add_option("--clear", args->clear, "Drop the order of the mount at MOUNTPOINT")
      ->type_name("MOUNTPOINT");
  return {app, [args] {
            if (!args->clear.empty()) {
              if (!args->file.empty()) {
                PrintError("order: --clear takes no FILE");
                return kExitUsage;
              }
              return ClearOrder(args->clear);
            }
            if (args->file.empty() || args->mountpoint.empty()) {
              PrintError("order: give FILE and MOUNTPOINT (or --clear MOUNTPOINT)");
              return kExitUsage;
            }
            return RunOrder(args->file, args->mountpoint);
          }};
}

}  // namespace stoker
