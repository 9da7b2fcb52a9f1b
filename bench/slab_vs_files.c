// slab_vs_files: what storing small objects costs as one file each (stoker's format: data/XX/<id>-<version>,
// created on the first write) against slots of one preallocated slab file. A micro-benchmark for issue 2's
// "slab files vs sparse per-object files: measure and choose"; it changes nothing in stoker.
//
//   slab_vs_files DIR [COUNT [SIZE]]      COUNT objects (default 3000) of SIZE bytes (default 102400)
//
// Modes, each on a fresh subdirectory of DIR (same file system as a cache would use):
//   files            mkdir of the 256 XX directories as needed, open(O_CREAT), pwrite, close
//   files-reused     the same after the previous run's files were unlinked (a cache that evicts and refills:
//                    ext4 then searches its inode tables for an inode not recently deleted)
//   slab             one file, fallocate'd up front for all slots, pwrite at slot offsets
//   files-direct, slab-direct   the same writes through O_DIRECT (4 KiB aligned buffer and sizes)
// Each prints wall and CPU (user+sys of this process) per object for the writes, then the wall time of the
// syncfs that writes the dirty pages back (the flusher's CPU is not this process's; the syncfs wall time
// includes it). The page cache is not dropped between modes. Buffered reads of what was written are not
// measured: they cost the same from either layout once the pages are cached.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double Now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double Cpu(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
         ru.ru_stime.tv_usec / 1e6;
}

static void Die(const char* what, const char* path) {
  fprintf(stderr, "slab_vs_files: %s %s: %s\n", what, path, strerror(errno));
  exit(1);
}

static void WriteAll(int fd, const char* buf, size_t len, off_t off, const char* path) {
  size_t done = 0;
  while (done < len) {
    ssize_t n = pwrite(fd, buf + done, len - done, off + (off_t)done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) Die("pwrite", path);
    done += (size_t)n;
  }
}

static void RemoveTree(const char* dir) {
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) Die("rm -rf", dir);
}

static void Report(const char* mode, long count, double wall, double cpu, int sync_fd) {
  double t = Now();
  if (syncfs(sync_fd) != 0) Die("syncfs", mode);
  double sync_wall = Now() - t;
  printf("%-13s %8.1f us/object wall %8.1f us/object CPU   syncfs %7.1f ms\n", mode, wall * 1e6 / count,
         cpu * 1e6 / count, sync_wall * 1e3);
  fflush(stdout);
}

static void Files(const char* base, const char* mode, long count, const char* buf, size_t size, int direct,
                  int sync_fd) {
  char dir[4096], path[4200];
  snprintf(dir, sizeof dir, "%s/%s", base, mode);
  if (mkdir(dir, 0700) != 0) Die("mkdir", dir);
  double w = Now(), c = Cpu();
  for (long i = 1; i <= count; ++i) {
    snprintf(path, sizeof path, "%s/%02lx/%ld-1", dir, i & 0xff, i);
    int flags = O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | (direct ? O_DIRECT : 0);
    int fd = open(path, flags, 0600);
    if (fd < 0 && errno == ENOENT) {
      char sub[4200];
      snprintf(sub, sizeof sub, "%s/%02lx", dir, i & 0xff);
      if (mkdir(sub, 0700) != 0 && errno != EEXIST) Die("mkdir", sub);
      fd = open(path, flags, 0600);
    }
    if (fd < 0) Die("open", path);
    WriteAll(fd, buf, size, 0, path);
    close(fd);
  }
  Report(mode, count, Now() - w, Cpu() - c, sync_fd);
}

static void Slab(const char* base, const char* mode, long count, const char* buf, size_t size, int direct,
                 int sync_fd) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s.slab", base, mode);
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | (direct ? O_DIRECT : 0), 0600);
  if (fd < 0) Die("open", path);
  // Slots rounded to 4 KiB, as direct I/O needs; allocated before the clock starts (a slab is made once).
  size_t slot = (size + 4095) & ~(size_t)4095;
  if (fallocate(fd, 0, 0, (off_t)(slot * (size_t)count)) != 0) Die("fallocate", path);
  if (fsync(fd) != 0) Die("fsync", path);
  double w = Now(), c = Cpu();
  for (long i = 0; i < count; ++i) WriteAll(fd, buf, size, (off_t)(slot * (size_t)i), path);
  Report(mode, count, Now() - w, Cpu() - c, sync_fd);
  close(fd);
}

int main(int argc, char** argv) {
  if (argc < 2 || argc > 4) {
    fprintf(stderr, "usage: slab_vs_files DIR [COUNT [SIZE]]\n");
    return 2;
  }
  const long count = argc > 2 ? atol(argv[2]) : 3000;
  const size_t size = argc > 3 ? (size_t)atol(argv[3]) : 102400;
  if (count <= 0 || size == 0 || size % 4096 != 0) {
    fprintf(stderr, "slab_vs_files: COUNT > 0 and SIZE a positive multiple of 4096 (for O_DIRECT)\n");
    return 2;
  }
  char base[4096];
  snprintf(base, sizeof base, "%s/slab_vs_files.%d", argv[1], (int)getpid());
  if (mkdir(base, 0700) != 0) Die("mkdir", base);
  int sync_fd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (sync_fd < 0) Die("open", base);
  char* buf = NULL;
  if (posix_memalign((void**)&buf, 4096, size) != 0) Die("posix_memalign", "");
  for (size_t i = 0; i < size; ++i) buf[i] = (char)(i * 131 + 7);
  if (syncfs(sync_fd) != 0) Die("syncfs", base);

  Files(base, "files", count, buf, size, 0, sync_fd);
  char prev[4200];
  snprintf(prev, sizeof prev, "%s/files", base);
  RemoveTree(prev);
  if (syncfs(sync_fd) != 0) Die("syncfs", base);
  Files(base, "files-reused", count, buf, size, 0, sync_fd);
  Slab(base, "slab", count, buf, size, 0, sync_fd);
  Files(base, "files-direct", count, buf, size, 1, sync_fd);
  Slab(base, "slab-direct", count, buf, size, 1, sync_fd);

  close(sync_fd);
  RemoveTree(base);
  free(buf);
  return 0;
}
