"""moto's S3 server with a bucket already holding many small objects, made
in its own process before it serves: putting 100k objects through the HTTP
API takes minutes, putting them into moto's backend takes seconds.

    python3 moto_prefilled.py HOST PORT BUCKET PREFIX COUNT [DIR]

Keys are PREFIX/k000000 ... (six digits, COUNT of them), each holding its
number and a newline (with STOKER_PREFILL_DIRS=N, in N directories:
PREFIX/d000/k000000, the key i in directory i % N), and PREFIX/PATH with
the bytes of each file DIR/PATH (a server that comes back after a crash
with what it held, as S3 does).
Prints "ready" once it serves; runs until killed.
"""

import os

import signal
import sys


def main():
    host, port, bucket, prefix, count = sys.argv[1:6]
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends
    from moto.server import ThreadedMotoServer

    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    backend.create_bucket(bucket, "us-east-1")
    dirs = int(os.environ.get("STOKER_PREFILL_DIRS", "0"))
    for i in range(int(count)):
        key = f"d{i % dirs:03d}/k{i:06d}" if dirs else f"k{i:06d}"
        backend.put_object(bucket, f"{prefix}/{key}", b"%d\n" % i)
    if len(sys.argv) > 6:
        root = sys.argv[6]
        for dirpath, _, names in os.walk(root):
            for n in names:
                path = os.path.join(dirpath, n)
                with open(path, "rb") as f:
                    backend.put_object(bucket, f"{prefix}/{os.path.relpath(path, root)}", f.read())
    server = ThreadedMotoServer(ip_address=host, port=int(port), verbose=False)
    server.start()
    print("ready", flush=True)
    signal.pause()


if __name__ == "__main__":
    main()
