"""OriginReadGuard: makes chosen origin files unreadable (or a directory
unopenable) for every process, root included, using fanotify permission
events, and records who tried. Used to prove data came from the cache."""

import ctypes
import os
import struct
import threading


class OriginReadGuard:
    """Makes reads of the given origin files fail (EPERM) for every process,
    root included, and records who tried: a fanotify FAN_ACCESS_PERM mark on
    each file, answered FAN_DENY by a listener thread. Metadata (stat,
    readdir, open) is untouched, so the origin still looks identical; only
    its bytes become unreadable. This is how the tests prove data came from
    the cache rather than trusting the daemon's own counters.

    Where fanotify permission events are not available (no CAP_SYS_ADMIN,
    kernel without CONFIG_FANOTIFY_ACCESS_PERMISSIONS) `available` is False
    and the tests fall back to the stats counters alone.
    """

    FAN_CLASS_CONTENT = 0x04
    FAN_CLOEXEC = 0x01
    FAN_ACCESS_PERM = 0x00020000
    FAN_OPEN_PERM = 0x00010000
    FAN_ONDIR = 0x40000000
    FAN_MARK_ADD = 0x01
    FAN_ALLOW = 0x01
    FAN_DENY = 0x02
    AT_FDCWD = -100

    def __init__(self, files, mask=None):
        """mask: the fanotify events to deny; default FAN_ACCESS_PERM (reads).
        FAN_OPEN_PERM | FAN_ONDIR on a directory makes it unopenable."""
        self.files = [str(f) for f in files]
        self.mask = self.FAN_ACCESS_PERM if mask is None else mask
        self.events = []  # (pid, path)
        self.available = False
        self.reason = ""
        self._fd = -1
        self._thread = None
        self._stop = False

    def __enter__(self):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.fanotify_init.argtypes = [ctypes.c_uint, ctypes.c_uint]
            libc.fanotify_mark.argtypes = [ctypes.c_int, ctypes.c_uint,
                                           ctypes.c_uint64, ctypes.c_int,
                                           ctypes.c_char_p]
        except (OSError, AttributeError) as e:
            self.reason = f"no fanotify in libc: {e}"
            return self
        fd = libc.fanotify_init(self.FAN_CLASS_CONTENT | self.FAN_CLOEXEC,
                                os.O_RDONLY | os.O_LARGEFILE)
        if fd < 0:
            self.reason = f"fanotify_init: {os.strerror(ctypes.get_errno())}"
            return self
        self._fd = fd
        for f in self.files:
            if libc.fanotify_mark(fd, self.FAN_MARK_ADD, self.mask,
                                  self.AT_FDCWD, f.encode()) != 0:
                self.reason = f"fanotify_mark {f}: {os.strerror(ctypes.get_errno())}"
                os.close(fd)
                self._fd = -1
                return self
        self.available = True
        self._thread = threading.Thread(target=self._loop, daemon=True,
                                        name="origin-read-guard")
        self._thread.start()
        return self

    def _loop(self):
        import select
        while not self._stop:
            try:
                r, _, _ = select.select([self._fd], [], [], 0.2)
                if not r:
                    continue
                buf = os.read(self._fd, 8192)
            except OSError:
                return
            off = 0
            while off + 24 <= len(buf):
                ev_len, _, _, _, _mask, efd, pid = struct.unpack_from("IBBHQii", buf, off)
                path = "?"
                if efd >= 0:
                    try:
                        path = os.readlink(f"/proc/self/fd/{efd}")
                    except OSError:
                        pass
                self.events.append((pid, path))
                try:
                    os.write(self._fd, struct.pack("iI", efd, self.FAN_DENY))
                except OSError:
                    pass
                if efd >= 0:
                    os.close(efd)
                off += ev_len

    def __exit__(self, *exc):
        self._stop = True
        if self._thread is not None:
            self._thread.join(5)
        if self._fd >= 0:
            os.close(self._fd)  # pending events are allowed, marks go away
            self._fd = -1
        return False
