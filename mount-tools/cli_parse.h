// How main reads a command line around CLI11: whether it is fuse3's
// mount.fuse3 calling stoker as a mount helper, and the one line a CLI11
// parse error becomes (with "did you mean" for a mistyped option or command).
//
// Thread-safety: single-threaded, as the CLI.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace stoker {

// fuse3's mount.fuse3, for an fstab line of type fuse.stoker where no
// mount.fuse.stoker is installed, runs `stoker SOURCE MOUNTPOINT -o OPTIONS`
// with SOURCE as fstab gives it (a relative path too). args: argv without
// argv[0]. True when args[0] names no subcommand of root and is not an
// option, args[1] is not an option, and args[0] is a path or URL: it holds
// a '/', it exists, or -o follows the two.
bool IsFuseHelperCall(const CLI::App& root, const std::vector<std::string>& args);

// The name among names closest to word by edit distance (a swap of two
// neighbours counts one), if close enough to be a typo of it; "" if none is.
std::string ClosestName(std::string_view word, const std::vector<std::string>& names);

// CLI11 shows TEXT for every string value in --help; a positional's name
// already says what it is (ORIGIN, MOUNTPOINT), so those of every
// subcommand of root get no type name.
void UntypePositionals(CLI::App& root);

// The one line (no "stoker: error:" in front) for a parse error of root:
// an unknown command or option named, with the closest name ("did you mean
// --cache-size?"), else CLI11's own message.
std::string ParseErrorLine(const CLI::App& root, const CLI::ParseError& e);

}  // namespace stoker
