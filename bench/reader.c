// bench reader: the one reader used for every system in bench/run, so native and FUSE reads pay the same costs.
//
//   reader file PATH              read PATH sequentially in 1 MiB read(2) calls until EOF
//   reader stream PATH            the same in 256 KiB calls with the kernel's read-ahead off for the file
//                                 (POSIX_FADV_RANDOM): a TFRecordDataset-like stream whose reads reach a FUSE
//                                 daemon one at a time, as they are made (bench/remote)
//   reader tree DIR [THREADS]     walk DIR (readdir, d_type; lstat only where d_type is unknown), then open, read
//                                 whole and close every regular file; the walk is part of the timed work, as it
//                                 is for a data loader that lists its dataset
//
// Prints one line: "<bytes> <files> <seconds>", seconds from a monotonic clock around the work only (no process
// start-up). Exit 1 on any error, with the failing path on stderr. Single-threaded unless THREADS > 1.
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { kBlock = 1 << 20 };

static double Now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void* NewBuffer(void) {
  void* buf = NULL;
  if (posix_memalign(&buf, 4096, kBlock) != 0) {
    fprintf(stderr, "reader: out of memory\n");
    exit(1);
  }
  memset(buf, 0, kBlock);  // fault the pages in before the clock starts
  return buf;
}

// Returns bytes read, or -1 (message printed). advice: a posix_fadvise advice for the whole file, or -1.
static int64_t ReadWholeIn(const char* path, char* buf, size_t block, int advice) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    fprintf(stderr, "reader: open %s: %s\n", path, strerror(errno));
    return -1;
  }
  if (advice >= 0 && (errno = posix_fadvise(fd, 0, 0, advice)) != 0) {
    fprintf(stderr, "reader: posix_fadvise %s: %s\n", path, strerror(errno));
    close(fd);
    return -1;
  }
  int64_t total = 0;
  for (;;) {
    ssize_t n = read(fd, buf, block);
    if (n < 0) {
      if (errno == EINTR) continue;
      fprintf(stderr, "reader: read %s at %lld: %s\n", path, (long long)total, strerror(errno));
      close(fd);
      return -1;
    }
    if (n == 0) break;
    total += n;
  }
  close(fd);
  return total;
}

static int64_t ReadWhole(const char* path, char* buf) { return ReadWholeIn(path, buf, kBlock, -1); }

struct PathList {
  char** paths;
  size_t count, cap;
};

static void Push(struct PathList* list, char* path) {
  if (list->count == list->cap) {
    list->cap = list->cap ? list->cap * 2 : 4096;
    list->paths = realloc(list->paths, list->cap * sizeof(char*));
    if (!list->paths) exit(1);
  }
  list->paths[list->count++] = path;
}

static int Walk(const char* dir, struct PathList* list) {
  DIR* d = opendir(dir);
  if (!d) {
    fprintf(stderr, "reader: opendir %s: %s\n", dir, strerror(errno));
    return -1;
  }
  struct dirent* e;
  int rc = 0;
  while (rc == 0 && (e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    char* path = NULL;
    if (asprintf(&path, "%s/%s", dir, e->d_name) < 0) exit(1);
    unsigned char type = e->d_type;
    if (type == DT_UNKNOWN) {
      struct stat st;
      if (lstat(path, &st) != 0) {
        fprintf(stderr, "reader: lstat %s: %s\n", path, strerror(errno));
        rc = -1;
      } else if (S_ISDIR(st.st_mode)) {
        type = DT_DIR;
      } else if (S_ISREG(st.st_mode)) {
        type = DT_REG;
      }
    }
    if (type == DT_DIR) {
      rc = Walk(path, list);
      free(path);
    } else if (type == DT_REG) {
      Push(list, path);
    } else {
      free(path);
    }
  }
  closedir(d);
  return rc;
}

struct Shared {
  struct PathList* list;
  atomic_size_t next;
  atomic_llong bytes;
  atomic_int failed;
};

static void* Worker(void* arg) {
  struct Shared* s = arg;
  char* buf = NewBuffer();
  for (;;) {
    size_t i = atomic_fetch_add(&s->next, 1);
    if (i >= s->list->count || atomic_load(&s->failed)) break;
    int64_t n = ReadWhole(s->list->paths[i], buf);
    if (n < 0) {
      atomic_store(&s->failed, 1);
      break;
    }
    atomic_fetch_add(&s->bytes, n);
  }
  free(buf);
  return NULL;
}

int main(int argc, char** argv) {
  const int stream = argc >= 3 && strcmp(argv[1], "stream") == 0;
  if (argc >= 3 && (stream || strcmp(argv[1], "file") == 0)) {
    char* buf = NewBuffer();
    double t0 = Now();
    int64_t n = stream ? ReadWholeIn(argv[2], buf, 256 << 10, POSIX_FADV_RANDOM) : ReadWhole(argv[2], buf);
    double t1 = Now();
    if (n < 0) return 1;
    printf("%lld 1 %.6f\n", (long long)n, t1 - t0);
    return 0;
  }
  if (argc >= 3 && strcmp(argv[1], "tree") == 0) {
    int threads = argc >= 4 ? atoi(argv[3]) : 1;
    if (threads < 1) threads = 1;
    struct PathList list = {0};
    struct Shared s = {.list = &list};
    pthread_t tids[256];
    if (threads > 256) threads = 256;
    double t0 = Now();
    if (Walk(argv[2], &list) != 0) return 1;
    if (threads == 1) {
      Worker(&s);
    } else {
      for (int i = 0; i < threads; i++) pthread_create(&tids[i], NULL, Worker, &s);
      for (int i = 0; i < threads; i++) pthread_join(tids[i], NULL);
    }
    double t1 = Now();
    if (atomic_load(&s.failed)) return 1;
    printf("%lld %zu %.6f\n", (long long)atomic_load(&s.bytes), list.count, t1 - t0);
    return 0;
  }
  fprintf(stderr, "usage: reader file PATH | reader stream PATH | reader tree DIR [THREADS]\n");
  return 2;
}
