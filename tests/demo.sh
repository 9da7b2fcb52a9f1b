#!/usr/bin/env bash
# The README's demo: builds a sample tree, mounts it through stoker with an SSD
# cache, reads every byte (checked against the origin with sha256), shows the
# cache statistics, remounts and reads again from the warm cache, then
# unmounts, checks the cache with fsck and removes everything.
#
#   tests/demo.sh            # uses build/stoker; STOKER_BIN=... to use another
#
# Needs FUSE (/dev/fuse, fusermount3); installs nothing. Leaves no mount
# behind, also when a step fails.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
stoker=${STOKER_BIN:-$root/build/stoker}
demo=${STOKER_DEMO_DIR:-/tmp/stoker-demo}
origin=$demo/origin
mnt=$demo/mnt
cache=$demo/cache

command -v fusermount3 >/dev/null 2>&1 ||
  { echo "demo: fusermount3 is missing (install the fuse3 package)" >&2; exit 1; }
[ -e /dev/fuse ] || { echo "demo: /dev/fuse is missing (FUSE is not available here)" >&2; exit 1; }
[ -x "$stoker" ] ||
  { echo "demo: $stoker is not built (cmake -S . -B build && cmake --build build)" >&2; exit 1; }

is_mounted() { awk -v m="$mnt" '$5 == m { found = 1 } END { exit !found }' /proc/self/mountinfo; }

cleanup() {
  rc=$?
  if is_mounted; then
    "$stoker" unmount "$mnt" 2>/dev/null || fusermount3 -u -z "$mnt" 2>/dev/null ||
      umount -l "$mnt" 2>/dev/null || true
  fi
  if [ "$rc" -ne 0 ] && [ -f "$cache/stoker.log" ]; then
    echo "demo: failed; the daemon's last log lines:" >&2
    tail -n 20 "$cache/stoker.log" >&2 || true
  fi
  rm -rf "$demo"
  exit "$rc"
}
trap cleanup EXIT

step() { printf '\n== %s\n' "$*"; }

step "sample tree in $origin"
if is_mounted; then fusermount3 -u -z "$mnt"; fi
rm -rf "$demo"
mkdir -p "$origin/nested/deeper" "$mnt"
head -c $((64 << 20)) /dev/urandom >"$origin/big.bin"
printf 'hello from the origin\n' >"$origin/hello.txt"
: >"$origin/empty"
head -c $((1 << 20)) /dev/urandom >"$origin/exactly one chunk.bin"
for i in $(seq 1 20); do
  head -c $((i * 997)) /dev/urandom >"$origin/nested/small-$i.dat"
done
printf 'deep\n' >"$origin/nested/deeper/leaf.txt"
ln -s hello.txt "$origin/link-to-hello"
(cd "$origin" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$demo/origin.sha256"
echo "$(wc -l <"$demo/origin.sha256") files, $(du -sh "$origin" | cut -f1)"

step "stoker mount $origin $mnt --cache $cache --cache-size 1G"
"$stoker" mount "$origin" "$mnt" --cache "$cache" --cache-size 1G

verify() {
  (cd "$mnt" && sha256sum --quiet -c "$demo/origin.sha256")
  [ "$(readlink "$mnt/link-to-hello")" = hello.txt ] || { echo "demo: symlink differs" >&2; exit 1; }
  echo "every byte matches the origin (sha256 of $(wc -l <"$demo/origin.sha256") files; symlink ok)"
}

step "read through the mount, cold: fetched from the origin"
verify

step "stoker stat $mnt"
"$stoker" stat "$mnt"

step "stoker warm $mnt/nested (queues a background fetch; already cached here)"
"$stoker" warm "$mnt/nested"

step "stoker unmount, then mount again: the cache survives"
"$stoker" unmount "$mnt"
"$stoker" mount "$origin" "$mnt" --cache "$cache" --cache-size 1G

step "read again, warm: served from the SSD cache"
verify

step "stoker stat $mnt (origin bytes stay 0 on this mount)"
"$stoker" stat "$mnt"

# TODO(issue 3): decoded views. Read "$mnt/.decoded/..." (TFRecord records, JPEG
# pixels) here once they exist; they are not part of this demo yet.

step "stoker unmount $mnt"
"$stoker" unmount "$mnt"

step "stoker fsck $cache"
"$stoker" fsck "$cache"

step "done; removing $demo"
