// Small whole files and directory trees through plain syscalls: setup, /proc
// and /sys. Never the cache's data, which goes through the I/O backend
// (cache/io/io_backend.h).
//
// Errors name the path: "cannot create directory '/a/b': Permission denied".
// Thread-safety: plain functions; none keeps state.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace stoker {

// The whole content of path (a regular file or a /proc file whose size stat
// does not tell).
Result<std::string> ReadWholeFile(const std::string& path);

// Writes text to the existing file at path in one write(2), as a /proc or
// /sys knob wants it. Fails (EIO) on a short write.
Status WriteSmallFile(const std::string& path, std::string_view text);

// mkdir -p: creates what is missing of dir, dir itself with leaf_mode and the
// directories above it with parent_mode (both before the umask). Appends
// each directory it created to *made (outermost first) when made is given.
// What exists already is left as it is; dir existing as a non-directory is
// ENOTDIR.
Status MakeDirs(const std::string& dir, mode_t leaf_mode, mode_t parent_mode,
                std::vector<std::string>* made = nullptr);

}  // namespace stoker
