// The pieces of the FUSE protocol that Debian 12's libfuse 3.14 does not
// know (its fuse_kernel.h is protocol 7.38): FUSE passthrough, protocol
// 7.40 (Linux 6.9). Each value is the kernel's, from
// include/uapi/linux/fuse.h (also libfuse >= 3.17's include/fuse_kernel.h);
// the byte offsets are those of the structs there. Nothing else may define
// them.
//
// How stoker uses them: fs/passthrough.h (backing files, per-node modes),
// fs/fuse_io.h (the INIT reply, patched on its way to the kernel) and
// fs/inval_notifier.h (dropping nodes by id, protocol 7.45, Linux 6.18).
#pragma once

#include <linux/ioctl.h>

#include <cstddef>
#include <cstdint>

namespace stoker::fuse_ext {

// fuse.h: `#define FUSE_PASSTHROUGH (1ULL << 37)`, sent in fuse_init_out's
// flags2 (flags >> 32), valid only with FUSE_INIT_EXT (1 << 30) in flags.
inline constexpr uint64_t kInitPassthrough = 1ull << 37;
// fuse.h, protocol 7.39 (Linux 6.6): `#define FUSE_DIRECT_IO_ALLOW_MMAP
// (1ULL << 36)`, in flags2: a shared mmap of a file opened with
// FOPEN_DIRECT_IO is allowed (through the page cache) instead of ENODEV.
inline constexpr uint64_t kInitDirectIoAllowMmap = 1ull << 36;
inline constexpr uint32_t kInitExt = 1u << 30;
// fuse.h: `#define FUSE_WRITEBACK_CACHE (1 << 16)`; the kernel refuses
// passthrough with it.
inline constexpr uint32_t kInitWritebackCache = 1u << 16;
// fuse.h: `#define FOPEN_PASSTHROUGH (1 << 7)`, in fuse_open_out.open_flags.
inline constexpr uint32_t kOpenPassthrough = 1u << 7;
// fuse.h: `#define FOPEN_NOFLUSH (1 << 5)` (7.30), one of the few flags the
// kernel takes beside FOPEN_PASSTHROUGH; libfuse sets it from fi->noflush.
inline constexpr uint32_t kOpenNoFlush = 1u << 5;
// fuse.h: `#define FUSE_INIT 26`.
inline constexpr uint32_t kOpInit = 26;

// fuse.h, protocol 7.40: the head of struct fuse_init_out, up to the field
// libfuse 3.14 calls unused[0]. Only its byte offsets are used.
struct InitOutHead {
  uint32_t major, minor, max_readahead, flags;
  uint16_t max_background, congestion_threshold;
  uint32_t max_write, time_gran;
  uint16_t max_pages, map_alignment;
  uint32_t flags2;
  uint32_t max_stack_depth;
};
static_assert(offsetof(InitOutHead, flags2) == 32 && offsetof(InitOutHead, max_stack_depth) == 36);
// The stacking depth the backing files add: 1 for files on a filesystem
// that is not itself stacked (ext4, xfs), as the cache's data files are.
// The kernel takes 1 or 2 (FILESYSTEM_MAX_STACK_DEPTH).
inline constexpr uint32_t kMaxStackDepth = 1;

// fuse.h, protocol 7.40: struct fuse_open_out { uint64_t fh; uint32_t
// open_flags; int32_t backing_id; }. libfuse 3.14 calls the last field
// padding; the struct is the same 16 bytes.
struct OpenOut {
  uint64_t fh;
  uint32_t open_flags;
  int32_t backing_id;
};
static_assert(sizeof(OpenOut) == 16);

// fuse.h: struct fuse_backing_map { int32_t fd; uint32_t flags; uint64_t
// padding; } (flags and padding must be 0), and
// `#define FUSE_DEV_IOC_MAGIC 229`,
// `#define FUSE_DEV_IOC_BACKING_OPEN _IOW(FUSE_DEV_IOC_MAGIC, 1, struct fuse_backing_map)`,
// `#define FUSE_DEV_IOC_BACKING_CLOSE _IOW(FUSE_DEV_IOC_MAGIC, 2, uint32_t)`.
struct BackingMap {
  int32_t fd;
  uint32_t flags;
  uint64_t padding;
};
static_assert(sizeof(BackingMap) == 16);
inline constexpr unsigned kDevIocMagic = 229;
inline constexpr unsigned long kDevIocBackingOpen = _IOW(kDevIocMagic, 1, BackingMap);
inline constexpr unsigned long kDevIocBackingClose = _IOW(kDevIocMagic, 2, uint32_t);

// fuse.h, protocol 7.45 (Linux 6.18): `FUSE_NOTIFY_PRUNE = 9` in enum
// fuse_notify_code, and struct fuse_notify_prune_out { uint32_t count;
// uint32_t padding; uint64_t spare; }, followed by count uint64_t node ids:
// the kernel drops the unused dentries of each node (d_prune_aliases) and so
// forgets the nodes not in use, taking no directory's lock. A notification
// is a fuse_out_header with unique 0 and the code in its error field; a
// kernel that does not know the code answers the write with EINVAL.
inline constexpr int32_t kNotifyPrune = 9;
struct NotifyPruneOut {
  uint32_t count;
  uint32_t padding;
  uint64_t spare;
};
static_assert(sizeof(NotifyPruneOut) == 16);

}  // namespace stoker::fuse_ext
