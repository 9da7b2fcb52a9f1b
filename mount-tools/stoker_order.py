#!/usr/bin/env python3
"""Tell a stoker mount the order in which a data loader will read its files.

A shuffled epoch gets no read-ahead from a file system: it cannot guess the next
file. A data loader knows each epoch's order before it starts; given that order
(`stoker order`, docs/prefetch-order.md), the mount's daemon fetches the next
files of it into its cache, a bounded window ahead of the reader.

Standard library only; copy this file next to your training script. Two ways in:

    import stoker_order

    # A list of files (paths under the mount, absolute or relative to its root):
    stoker_order.write_order("/mnt/data", paths)

    # A PyTorch sampler over an ImageFolder / DatasetFolder: each epoch's
    # indices are drawn, sent as that epoch's order, then yielded.
    dataset = torchvision.datasets.ImageFolder("/mnt/data/train")
    sampler = stoker_order.OrderedSampler(RandomSampler(dataset), dataset)
    loader = DataLoader(dataset, sampler=sampler, batch_size=64, num_workers=4)

The order goes to the daemon over its control socket (CACHE_DIR/control.sock,
which MOUNTPOINT/.stoker/stats.json names): the process needs to reach that
path and to run as the mount's owner or root (the socket is 0600). A new order
replaces the last one and cancels what it still had to fetch. Errors raise
OrderError with the daemon's one-line reason.

As a command, as `stoker order`: stoker_order.py FILE MOUNTPOINT   (one path a
line; '-': stdin)
"""

import json
import os
import socket
import sys

__all__ = ["OrderError", "write_order", "clear_order", "OrderedSampler"]

# A request must stay under the control socket's 1 MiB.
_PART_BYTES = 768 << 10
_TIMEOUT_S = 60


class OrderError(OSError):
    """The order could not be set: not a stoker mount, no daemon, or refused."""


def _mount_root(path):
    """The nearest directory at or above path holding .stoker/stats.json."""
    d = os.path.abspath(path)
    while True:
        if os.path.isfile(os.path.join(d, ".stoker", "stats.json")):
            return d
        parent = os.path.dirname(d)
        if parent == d:
            raise OrderError(f"'{path}' is not under a stoker mount")
        d = parent


def _socket_of(root):
    try:
        with open(os.path.join(root, ".stoker", "stats.json"), encoding="utf-8") as f:
            stats = json.load(f)
    except (OSError, ValueError) as e:
        raise OrderError(f"cannot read the stats of the mount at '{root}': {e}") from None
    sock = stats.get("control_socket")
    if not isinstance(sock, str):
        raise OrderError(f"the mount at '{root}' names no control socket")
    return sock


def _ask(sock_path, request):
    """One request, one answer (fs/control_socket.h); the answer if ok."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(_TIMEOUT_S)
            s.connect(sock_path)
            s.sendall(json.dumps(request).encode() + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
    except OSError as e:
        raise OrderError(e.errno, f"cannot reach the daemon at '{sock_path}': {e.strerror or e}") from None
    try:
        answer = json.loads(data)
    except ValueError:
        raise OrderError(f"unexpected answer from the daemon: {data[:200]!r}") from None
    if not answer.get("ok"):
        raise OrderError(answer.get("error", "the daemon refused"))
    return answer


def _parts(paths):
    part, size = [], 2
    for p in paths:
        more = len(json.dumps(p)) + 1
        if part and size + more > _PART_BYTES:
            yield part
            part, size = [], 2
        part.append(p)
        size += more
    if part:
        yield part


def write_order(mountpoint, paths):
    """Sets the order of the mount at (or above) mountpoint: paths, in the order
    they will be opened, absolute under the mount or relative to its root.
    Returns the order's id. Raises OrderError."""
    root = _mount_root(mountpoint)
    sock = _socket_of(root)
    order = None
    for part in _parts([os.fspath(p) for p in paths]):
        request = {"op": "order", "paths": part}
        if order is not None:
            request["order"] = order
        order = _ask(sock, request)["order"]
    if order is None:
        raise OrderError("the order names no files")
    return order


def clear_order(mountpoint):
    """Drops the order of the mount at (or above) mountpoint."""
    root = _mount_root(mountpoint)
    _ask(_socket_of(root), {"op": "order", "clear": True})


def _path_lookup(source):
    """index -> path for an ImageFolder/DatasetFolder (its .samples), a list
    of paths, or a function."""
    if callable(source):
        return source
    samples = getattr(source, "samples", None)
    if samples is not None:
        return lambda i: samples[i][0]
    return lambda i: source[i]


class OrderedSampler:
    """Wraps a sampler (anything iterable over dataset indices, e.g. torch's
    RandomSampler): each iteration draws the epoch's indices, sends the files
    they name as the mount's order, then yields the indices. paths: the
    dataset (an ImageFolder's .samples give the files), a list of paths, or a
    function index -> path. mountpoint: the mount (default: found above the
    first path). on_error: "raise" (default) or "ignore" (train on without the
    hint, e.g. where the control socket cannot be reached)."""

    def __init__(self, sampler, paths, mountpoint=None, on_error="raise"):
        self.sampler = sampler
        self.path_of = _path_lookup(paths)
        self.mountpoint = mountpoint
        self.on_error = on_error
        self.last_error = None

    def __len__(self):
        return len(self.sampler)

    def __iter__(self):
        indices = [int(i) for i in self.sampler]
        if indices:
            paths = [os.fspath(self.path_of(i)) for i in indices]
            try:
                write_order(self.mountpoint or paths[0], paths)
                self.last_error = None
            except OrderError as e:
                if self.on_error != "ignore":
                    raise
                self.last_error = e
        return iter(indices)

    def set_epoch(self, epoch):
        """Passed on, for DistributedSampler."""
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)


_USAGE = "usage: stoker_order.py FILE MOUNTPOINT   (one path a line; '-': stdin)"


def main(argv):
    if len(argv) != 3:
        print(_USAGE, file=sys.stderr)
        return 2
    name, mountpoint = argv[1], argv[2]
    if name != "-" and os.path.isdir(name):
        # The arguments swapped (this command took MOUNTPOINT FILE once).
        print(f"stoker_order: error: '{name}' is a directory, not a file of paths: {_USAGE}",
              file=sys.stderr)
        return 2
    try:
        f = sys.stdin if name == "-" else open(name, encoding="utf-8")
    except OSError as e:
        print(f"stoker_order: error: cannot read '{name}': {e.strerror}", file=sys.stderr)
        return 2
    with f:
        paths = [line.rstrip("\r\n") for line in f if line.strip() and not line.startswith("#")]
    try:
        order = write_order(mountpoint, paths)
    except OrderError as e:
        print(f"stoker_order: error: {e}", file=sys.stderr)
        return 1
    print(f"order {order}: {len(paths)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
