"""Real servers on loopback for the remote-origin tests: nginx (Debian's
package) serving a directory with range requests and autoindex, and moto's
standalone S3 server (PyPI). Each runs as our child in the foreground, on a
free port, with its files under a tmp dir; stop() always kills it, and the
fixtures that start one stop it in their finalizers.
"""

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import stoker_testlib as lib

START_TIMEOUT = 60


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port, proc, what, log, host="127.0.0.1", timeout=START_TIMEOUT):
    def up():
        if proc.poll() is not None:
            raise AssertionError(f"{what} exited rc={proc.returncode}: "
                                 f"{Path(log).read_text(errors='replace')[-2000:]}")
        try:
            with socket.create_connection((host, port), timeout=1):
                return True
        except OSError:
            return False
    lib.wait_until(up, timeout, what=f"{what} listening on {port}")


class Server:
    """start_timeout: seconds it may take to listen.
    netns: a slow_link.Namespace to run the server in, listening on its
    address (else the server listens on 127.0.0.1)."""

    def __init__(self, what, workdir, port, netns=None):
        self.what = what
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.netns = netns
        self.host = netns.inner_ip if netns else "127.0.0.1"
        self.port = port or (netns.free_port() if netns else free_port())
        self.proc = None
        self.log = self.workdir / "server.log"
        self.start_timeout = START_TIMEOUT

    def argv(self):
        raise NotImplementedError

    def env(self):
        return None

    def start(self):
        assert self.proc is None or self.proc.poll() is not None
        logf = open(self.log, "a")
        argv = self.argv()
        if self.netns is not None:
            argv = self.netns.exec_argv(argv)  # `ip netns exec` execs the server: proc is the server
        self.proc = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=self.env(),
                                     start_new_session=True)
        logf.close()
        _wait_port(self.port, self.proc, self.what, self.log, self.host, self.start_timeout)
        return self

    def kill(self):
        """SIGKILL, as a crash: no connection is closed politely."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=30)

    stop = kill

    def restart(self):
        self.kill()
        return self.start()


class Nginx(Server):
    """nginx serving root at http://127.0.0.1:PORT/{json,html,plain,norange}/."""

    def __init__(self, root, workdir, port=None, netns=None):
        super().__init__("nginx", workdir, port, netns)
        self.root = Path(root)

    @property
    def url(self):
        return f"http://{self.host}:{self.port}"

    def access_log(self):
        """[(connection, requests on it, status, method, path, range)]."""
        out = []
        p = self.workdir / "access.log"
        if not p.exists():
            return out
        for line in p.read_text(errors="replace").splitlines():
            conn, nreq, status, _, rest = line.split(" ", 4)
            request, _, rng = rest.rpartition(' "')
            method, path = request.strip('"').split(" ")[:2]
            out.append((int(conn), int(nreq), int(status), method, path, rng.rstrip('"')))
        return out

    def file_bytes_sent(self):
        """Body bytes nginx sent for files (not listings), all requests together."""
        p = self.workdir / "access.log"
        if not p.exists():
            return 0
        total = 0
        for line in p.read_text(errors="replace").splitlines():
            sent, request = line.split(" ", 4)[3:]
            if not request.split(" ")[1].endswith("/"):
                total += int(sent)
        return total

    def argv(self):
        w = self.workdir
        for d in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (w / d).mkdir(exist_ok=True)
        root = str(self.root)
        conf = f"""
daemon off;
master_process off;
worker_processes 1;
pid {w}/nginx.pid;
error_log {w}/error.log warn;
events {{ worker_connections 512; }}
http {{
  log_format stoker '$connection $connection_requests $status $body_bytes_sent "$request" "$http_range"';
  access_log {w}/access.log stoker;
  client_body_temp_path {w}/body;
  proxy_temp_path {w}/proxy;
  fastcgi_temp_path {w}/fastcgi;
  uwsgi_temp_path {w}/uwsgi;
  scgi_temp_path {w}/scgi;
  default_type application/octet-stream;
  keepalive_requests 100000;
  server {{
    listen {self.host}:{self.port};
    location ~ /denied_[^/]*$ {{ deny all; }}
    location /json/ {{ alias {root}/; autoindex on; autoindex_format json; }}
    location /html/ {{ alias {root}/; autoindex on; autoindex_format html;
                       autoindex_exact_size on; }}
    location /plain/ {{ alias {root}/; }}
    location /norange/ {{ alias {root}/; autoindex on; autoindex_format json;
                          max_ranges 0; }}
  }}
}}
"""
        (w / "nginx.conf").write_text(conf)
        return [shutil.which("nginx") or "/usr/sbin/nginx", "-p", str(w), "-c",
                str(w / "nginx.conf")]


class Moto(Server):
    """moto's S3 server at http://127.0.0.1:PORT (any credentials work unless
    auth is on: then only keys made through its IAM do)."""

    def __init__(self, workdir, port=None, auth=False, netns=None):
        super().__init__("moto_server", workdir, port, netns)
        self.auth = auth

    @property
    def endpoint(self):
        return f"http://{self.host}:{self.port}"

    def argv(self):
        exe = shutil.which("moto_server")
        if exe:
            return [exe, "-H", self.host, "-p", str(self.port)]
        return [sys.executable, "-m", "moto.server", "-H", self.host, "-p", str(self.port)]

    def env(self):
        env = dict(os.environ)
        if self.auth:
            env["INITIAL_NO_AUTH_ACTION_COUNT"] = "0"
        return env

    def client(self, key="testing", secret="testing"):
        import boto3
        from botocore.config import Config
        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=key,
                            aws_secret_access_key=secret, region_name="us-east-1",
                            config=Config(s3={"addressing_style": "path"},
                                          retries={"max_attempts": 2},
                                          # Plain signed bodies: moto checks those.
                                          request_checksum_calculation="when_required"))


class PrefilledMoto(Moto):
    """moto's S3 server whose bucket holds `count` objects PREFIX/k000000...
    and the files under from_dir (as PREFIX/PATH, read at each start) before
    it starts serving (see moto_prefilled.py)."""

    def __init__(self, workdir, bucket, prefix, count, port=None, from_dir=None):
        super().__init__(workdir, port)
        self.bucket, self.prefix, self.count = bucket, prefix, count
        self.from_dir = from_dir
        self.start_timeout = START_TIMEOUT + count // 1000  # ~0.15 ms a key, ten times over

    def argv(self):
        return [sys.executable, str(Path(__file__).with_name("moto_prefilled.py")), self.host,
                str(self.port), self.bucket, self.prefix, str(self.count),
                *([str(self.from_dir)] if self.from_dir else [])]


@contextlib.contextmanager
def aws_env(key_id, secret, region="us-east-1"):
    """The standard AWS variables set to these keys (no profile, no session
    token) for the duration; what was there before comes back after."""
    names = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
             "AWS_REGION")
    saved = {k: os.environ.get(k) for k in names}
    os.environ.update(AWS_ACCESS_KEY_ID=key_id, AWS_SECRET_ACCESS_KEY=secret, AWS_REGION=region)
    os.environ.pop("AWS_SESSION_TOKEN", None)
    os.environ.pop("AWS_PROFILE", None)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def have_nginx():
    return bool(shutil.which("nginx") or os.path.exists("/usr/sbin/nginx"))


def have_moto():
    try:
        import boto3  # noqa: F401
        import moto  # noqa: F401
    except ImportError:
        return False
    return True
