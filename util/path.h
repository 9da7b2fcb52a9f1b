// Paths as strings: joining and splitting '/'-separated paths, and suffixes.
// Nothing here touches the file system; "." and ".." are not resolved.
//
// Works for both kinds of path stoker handles: origin paths (relative to the
// origin root, no leading '/', "" for the root; see cache/origin/origin.h)
// and absolute host paths.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <utility>

namespace stoker {

// dir + "/" + name, with no separator doubled: JoinPath("", "x") == "x",
// JoinPath("/", "x") == "/x", JoinPath("a/b", "x") == "a/b/x".
std::string JoinPath(std::string_view dir, std::string_view name);

// What is above the last '/': "a/b/c" -> "a/b"; "c" -> ""; "/x" -> "/".
std::string ParentOf(std::string_view path);

// What follows the last '/': "a/b/c" -> "c"; "c" -> "c".
std::string BaseName(std::string_view path);

// {ParentOf(path), BaseName(path)}.
std::pair<std::string, std::string> SplitPath(std::string_view path);

// True if origin path is prefix or lies below it ("" is the root: every
// path): IsAtOrUnder("a/b", "a") but not IsAtOrUnder("ab", "a").
bool IsAtOrUnder(std::string_view path, std::string_view prefix);

// True if s ends with suffix (any suffix, not only a file name's).
bool EndsWith(std::string_view s, std::string_view suffix);

}  // namespace stoker
