"""S3 credentials that expire while a mount runs: the daemon takes its keys
from a container credentials endpoint (AWS_CONTAINER_CREDENTIALS_FULL_URI,
as on ECS and EKS Pod Identity) or an EC2 instance metadata service (IMDSv2,
at AWS_EC2_METADATA_SERVICE_ENDPOINT), which hand out keys that expire in a few
seconds, and reads through a proxy in front of moto's S3 server that refuses
(403 ExpiredToken) any key past its expiry or revoked. Reads keep working
across several expiries (keys fetched again ahead of time), a revoked key is
replaced after the server's refusal, and an open file reads on with keys
newer than the ones it was opened with. The token is in no log."""

import http.client
import http.server
import json
import os
import re
import threading
import time

import pytest

import remote_servers as rs
import stoker_testlib as lib
from stoker_testlib import MIB, with_deadline

pytestmark = pytest.mark.skipif(not rs.have_moto(), reason="moto/boto3 are not installed")

BUCKET = "creds"
TOKEN = "container-token-never-logged"
LIFETIME = 6  # seconds a key is good for


class Keys:
    """The endpoint's keys: handed out numbered, each good until its expiry."""

    def __init__(self):
        self.mu = threading.Lock()
        self.issued = {}  # key id -> expiry (unix seconds)
        self.refused = 0
        self.fetches = 0
        self.bad_tokens = 0
        self.sts_keys = 0
        self.refuse_next = 0  # requests to refuse whatever their key

    def issue(self):
        with self.mu:
            self.fetches += 1
            key = f"AKROT{self.fetches:04d}"
            self.issued[key] = time.time() + LIFETIME
            return key, self.issued[key]

    def good(self, key):
        with self.mu:
            # STS's temporary keys (moto's, for a web identity) are good until revoked.
            if key.startswith("ASIA") and key not in self.issued:
                self.issued[key] = time.time() + 3600
                self.sts_keys += 1
            ok = key in self.issued and time.time() < self.issued[key] and not self.refuse_next
            self.refuse_next = max(0, self.refuse_next - 1)
            if not ok:
                self.refused += 1
            return ok

    def revoke_all(self):
        """Revokes every key handed out, and refuses the next request whatever its
        key: the daemon may have fetched a fresh key since, on its own timer."""
        with self.mu:
            for k in self.issued:
                self.issued[k] = 0
            self.refuse_next = 1


def make_handler(keys, moto_port):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def reply(self, status, body, ctype="application/xml", headers=()):
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in headers:
                self.send_header(k, v)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def creds(self):
            if self.headers.get("Authorization") != TOKEN:
                keys.bad_tokens += 1
                return self.reply(401, b"{}", "application/json")
            return self.issue()

        def imds(self):
            if self.command == "PUT" and self.path == "/latest/api/token":
                if not self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
                    return self.reply(400, b"", "text/plain")
                return self.reply(200, b"imds-" + TOKEN.encode(), "text/plain")
            if self.headers.get("X-aws-ec2-metadata-token") != "imds-" + TOKEN:
                keys.bad_tokens += 1
                return self.reply(401, b"", "text/plain")
            base = "/latest/meta-data/iam/security-credentials/"
            if self.path == base:
                return self.reply(200, b"role-stoker", "text/plain")
            if self.path == base + "role-stoker":
                return self.issue()
            return self.reply(404, b"", "text/plain")

        def issue(self):
            key, expires = keys.issue()
            body = json.dumps({"AccessKeyId": key, "SecretAccessKey": "secret-" + key,
                               "Token": "session-" + key,
                               "Expiration": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                           time.gmtime(expires))}).encode()
            return self.reply(200, body, "application/json")

        def proxy(self):
            m = re.search(r"Credential=([A-Z0-9]+)/", self.headers.get("Authorization", ""))
            if not m or not keys.good(m.group(1)):
                body = (b"<?xml version=\"1.0\"?><Error><Code>ExpiredToken</Code>"
                        b"<Message>The provided token has expired.</Message></Error>")
                return self.reply(400, body)
            conn = http.client.HTTPConnection("127.0.0.1", moto_port, timeout=30)
            headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
            headers["Host"] = f"127.0.0.1:{moto_port}"
            conn.request(self.command, self.path, headers=headers)
            r = conn.getresponse()
            body = r.read()
            passed = [(k, v) for k, v in r.getheaders()
                      if k.lower() not in ("content-length", "content-type", "connection",
                                           "transfer-encoding", "server", "date")]
            self.send_response(r.status)
            self.send_header("Content-Type", r.getheader("Content-Type", "application/xml"))
            self.send_header("Content-Length", str(r.getheader("Content-Length", len(body))))
            for k, v in passed:
                self.send_header(k, v)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
            conn.close()

        def do_GET(self):
            if self.path.startswith("/latest/"):
                return self.imds()
            return self.creds() if self.path == "/creds" else self.proxy()

        def do_PUT(self):
            return self.imds()

        def do_HEAD(self):
            return self.proxy()

    return Handler


@pytest.fixture(params=["container", "instance", "web_identity"])
def world(request, tmp_path, monkeypatch):
    server = rs.Moto(tmp_path / "moto")
    server.start()
    try:
        client = server.client()
        client.create_bucket(Bucket=BUCKET)
        rng = lib.seeded("s3-creds")
        data = {f"f{i:02d}": rng.randbytes(MIB + 1000 * i) for i in range(12)}
        data["zbig"] = rng.randbytes(12 * MIB + 5)
        for name, body in data.items():
            client.put_object(Bucket=BUCKET, Key=f"d/{name}", Body=body)
        keys = Keys()
        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                                make_handler(keys, int(server.endpoint.rsplit(":", 1)[1])))
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        port = httpd.server_address[1]
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
        if request.param == "web_identity":
            token = tmp_path / "token"
            token.write_text(TOKEN + "\n")
            monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(token))
            monkeypatch.setenv("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/stoker-reader")
            monkeypatch.setenv("AWS_ENDPOINT_URL_STS", server.endpoint)  # moto's STS
        elif request.param == "container":
            monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", f"http://127.0.0.1:{port}/creds")
            monkeypatch.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", TOKEN)
        else:
            monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", raising=False)
            monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", f"http://127.0.0.1:{port}")
        monkeypatch.setenv("AWS_REGION", "us-east-1")
        keys.source = request.param
        yield keys, f"http://127.0.0.1:{port}", data
        httpd.shutdown()
    finally:
        server.stop()


def test_reads_keep_working_across_expiries(mounts, world):
    keys, endpoint, data = world
    if keys.source == "web_identity":
        pytest.skip("moto's STS gives keys for 15 minutes at least")
    # No prefetch: the open file below reads its rest from the origin, late.
    m = mounts.make(f"s3://{BUCKET}/d", args=["--chunk-size", "1M", "--cache-size", "1G",
                                              "--revalidate", "0", "--prefetch", "0",
                                              "--prefetch-files", "0", "--s3-endpoint", endpoint])
    # An open file whose keys expire before it is read whole.
    f = open(m.mnt / "zbig", "rb")
    try:
        first = f.read(4096)
        start = time.time()
        names = sorted(data)[:10]
        for i, name in enumerate(names):  # one uncached file a second: 2.5 key lifetimes
            assert with_deadline(lib.read_file, m.mnt / name) == data[name], name
            time.sleep(max(0, start + 1.5 * (i + 1) - time.time()))
        origin_before = m.stats()["origin_bytes_read"]
        assert first + f.read() == data["zbig"]
        assert m.stats()["origin_bytes_read"] - origin_before >= 11 * MIB  # read late, with new keys
    finally:
        f.close()
    assert keys.fetches >= 3, "the keys were not fetched again before they expired"
    assert keys.bad_tokens == 0
    # A revoked key: the server refuses it, the daemon replaces it.
    keys.revoke_all()
    before = keys.refused
    assert with_deadline(lib.read_file, m.mnt / "f10") == data["f10"]
    assert keys.refused > before
    lib.wait_until(lambda: "refused the keys" in m.log_path().read_text(errors="replace"), 30,
                   what="the refusal logged")
    log = m.log_path().read_text(errors="replace")
    assert TOKEN not in log and "secret-AKROT" not in log
    assert TOKEN not in (m.mnt / ".stoker" / "stats.json").read_text()


def test_a_web_identity_is_exchanged_with_sts(mounts, world):
    """EKS IRSA: the projected token and the role go to STS (moto's), whose
    temporary keys sign the reads."""
    keys, endpoint, data = world
    if keys.source != "web_identity":
        pytest.skip("the web identity source only")
    m = mounts.make(f"s3://{BUCKET}/d", args=["--chunk-size", "1M", "--cache-size", "1G",
                                              "--s3-endpoint", endpoint])
    for name in sorted(data)[:3]:
        assert with_deadline(lib.read_file, m.mnt / name) == data[name], name
    assert keys.sts_keys >= 1 and keys.refused == 0
    lib.wait_until(lambda: "web identity" in m.log_path().read_text(errors="replace"), 30,
                   what="the source logged")
    assert TOKEN not in m.log_path().read_text(errors="replace")


def test_an_endpoint_that_refuses_fails_the_mount_with_one_line(mounts, world, monkeypatch):
    keys, endpoint, _ = world
    if not os.environ.get("AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        pytest.skip("the container endpoint's token; an instance's is its own")
    monkeypatch.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "wrong")
    m = mounts.new(f"s3://{BUCKET}/d", args=["--s3-endpoint", endpoint])
    r = lib.run(m.command())
    assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1, lib.describe(r)
    assert "container credentials" in r.stderr and "wrong" not in r.stderr
    assert not lib.is_mounted(m.mnt)
