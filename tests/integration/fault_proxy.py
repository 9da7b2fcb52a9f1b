"""A fault-injecting HTTP proxy for the remote-origin tests: it forwards
GET and HEAD to a real server (nginx, moto) and, for requests whose path
matches a rule, answers with the rule's status instead (the first `times`
matching requests, or all), or stalls: sends the headers, then nothing
until the proxy stops, or hangs: sends nothing at all until then (as a
stopped server whose kernel still accepts). It counts the requests it saw per path, so that
a test can tell a retried request from one that was not.
"""

import contextlib
import http.client
import http.server
import os
import re
import threading
import urllib.parse


class Rule:
    def __init__(self, pattern, status=None, times=None, body=b"", method=None, stall=False,
                 hang=False):
        self.pattern = re.compile(pattern)
        self.status = status
        self.stall = stall
        self.hang = hang
        self.times = times  # None: always
        self.body = body
        self.method = method
        self.hits = 0


class FaultProxy:
    def __init__(self, upstream_port):
        self.upstream_port = upstream_port
        self.rules = []
        self.drop_headers = set()  # lower-case names of upstream headers not passed on
        self.seen = {}  # unquoted path -> count
        self.targets = []  # (method, request target as sent: path and query)
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def handle_any(self):
                path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
                with proxy.lock:
                    proxy.targets.append((self.command, self.path))
                rule = proxy._match(self.command, path)
                if rule is not None and rule.hang:
                    proxy.stopping.wait(300)
                    self.close_connection = True
                    return
                if rule is not None and rule.stall:
                    self.send_response(206 if self.headers.get("Range") else 200)
                    self.send_header("Content-Length", str(1 << 20))
                    self.end_headers()
                    self.wfile.flush()
                    proxy.stopping.wait(300)
                    self.close_connection = True
                    return
                if rule is not None:
                    self.send_response(rule.status)
                    self.send_header("Content-Length", str(len(rule.body)))
                    if rule.body:
                        self.send_header("Content-Type", "application/xml")
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(rule.body)
                    return
                conn = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=60)
                try:
                    headers = {k: v for k, v in self.headers.items()}
                    conn.request(self.command, self.path, headers=headers)
                    resp = conn.getresponse()
                    body = resp.read()
                finally:
                    conn.close()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("content-length", "transfer-encoding", "connection",
                                         *proxy.drop_headers):
                        self.send_header(k, v)
                length = resp.getheader("Content-Length")
                self.send_header("Content-Length",
                                 length if self.command == "HEAD" and length else str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_GET = handle_any
            do_HEAD = handle_any

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def _match(self, method, path):
        with self.lock:
            self.seen[path] = self.seen.get(path, 0) + 1
            for r in self.rules:
                if r.method and r.method != method:
                    continue
                if not r.pattern.search(path):
                    continue
                if r.times is not None and r.hits >= r.times:
                    continue
                r.hits += 1
                return r
        return None

    def add(self, rule):
        with self.lock:
            self.rules.append(rule)
        return rule

    def count(self, path):
        with self.lock:
            return self.seen.get(path, 0)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()


@contextlib.contextmanager
def running(port):
    """A FaultProxy in front of 127.0.0.1:port, stopped on leaving."""
    p = FaultProxy(port).start()
    try:
        yield p
    finally:
        p.stop()


def check_no_reader_waits_on_a_probe(proxy, m, path, want, seconds=4):
    """The mount m reads its origin through proxy, with --origin-backoff 1,
    --origin-stall-timeout 30 and --origin-retries 1 (PROBE_ARGS), and has
    path cached. From now on requests fail (503) until the origin's back-off
    episode has started, then hang (no answer at all), so a probe takes the
    stall timeout, 30 s, per attempt. For `seconds` (several back-offs) path
    is read and stat'ed again and again: a reader that sent a probe itself
    would miss the 20 s deadline of every read here; the probes must reach
    the proxy all the same."""
    import time

    import stoker_testlib as lib
    assert lib.with_deadline(lib.read_file, path) == want
    proxy.add(Rule(".", status=503, times=2))  # the episode starts at once
    hang = proxy.add(Rule(".", hang=True))
    assert lib.with_deadline(lib.read_file, path, timeout=20) == want
    assert m.stats()["origin_unreachable"] is True
    end = time.monotonic() + seconds
    reads = 0
    while time.monotonic() < end:
        assert lib.with_deadline(lib.read_file, path, timeout=20) == want
        assert lib.with_deadline(os.stat, path, timeout=20).st_size == len(want)
        reads += 1
        time.sleep(0.05)
    assert hang.hits >= 1, "no probe reached the server"
    s = m.stats()
    assert s["origin_unreachable"] is True, s
    assert s["revalidations_skipped"] >= reads, s
