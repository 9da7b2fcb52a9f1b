#include "mount-tools/cli_parse.h"

#include <sys/stat.h>

#include <algorithm>

namespace stoker {
namespace {

// Optimal string alignment distance: insertions, deletions, substitutions
// and swaps of two neighbours, each 1.
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

bool IsOption(std::string_view arg) { return arg.size() > 1 && arg[0] == '-'; }

std::vector<std::string> CommandNames(const CLI::App& root) {
  std::vector<std::string> names;
  for (const CLI::App* sub : root.get_subcommands([](const CLI::App*) { return true; })) {
    names.push_back(sub->get_name());
    for (const std::string& alias : sub->get_aliases()) names.push_back(alias);
  }
  return names;
}

// "--cache-size", "-o", ...: what app (a subcommand, or the root) takes,
// --help and the root's --version included.
std::vector<std::string> OptionNames(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* opt : app.get_options()) {
    for (const std::string& l : opt->get_lnames()) names.push_back("--" + l);
    for (const std::string& s : opt->get_snames()) names.push_back("-" + s);
  }
  return names;
}

std::string WithSuggestion(const std::string& what, std::string_view word,
                           const std::vector<std::string>& names) {
  const std::string near = ClosestName(word, names);
  return near.empty() ? what : what + " (did you mean " + near + "?)";
}

}  // namespace

bool IsFuseHelperCall(const CLI::App& root, const std::vector<std::string>& args) {
  if (args.size() < 2 || IsOption(args[0]) || IsOption(args[1])) return false;
  const std::vector<std::string> commands = CommandNames(root);
  if (std::find(commands.begin(), commands.end(), args[0]) != commands.end()) return false;
  struct stat st;
  return args[0].find('/') != std::string::npos || stat(args[0].c_str(), &st) == 0 ||
         (args.size() >= 3 && args[2].rfind("-o", 0) == 0);
}

void UntypePositionals(CLI::App& root) {
  for (CLI::App* sub : root.get_subcommands([](CLI::App*) { return true; })) {
    for (CLI::Option* opt : sub->get_options([](CLI::Option* o) { return o->get_positional(); })) {
      opt->type_name("");
    }
  }
}

std::string ClosestName(std::string_view word, const std::vector<std::string>& names) {
  // A typo changes a letter or two of a word, and not half of it.
  const size_t bound = std::min<size_t>(2, word.size() / 3);
  std::string best;
  size_t best_distance = bound + 1;
  for (const std::string& name : names) {
    const size_t d = EditDistance(word, name);
    if (d < best_distance) {
      best = name;
      best_distance = d;
    }
  }
  return best;
}

std::string ParseErrorLine(const CLI::App& root, const CLI::ParseError& e) {
  const std::vector<CLI::App*> chosen = root.get_subcommands();
  if (chosen.empty()) {
    const std::vector<std::string> extra = root.remaining();
    if (!extra.empty() && !IsOption(extra.front())) {
      return WithSuggestion("unknown command '" + extra.front() + "'", extra.front(),
                            CommandNames(root));
    }
  }
  // An unknown option is named whatever else went wrong: a typo of --cache
  // also reads as "--cache is required".
  const CLI::App& app = chosen.empty() ? root : *chosen.front();
  for (const std::string& arg : root.remaining(/*recurse=*/true)) {
    if (!IsOption(arg)) continue;
    const std::string name = arg.substr(0, arg.find('='));
    return WithSuggestion("unknown option '" + name + "'", name, OptionNames(app));
  }
  return e.what();
}

}  // namespace stoker
