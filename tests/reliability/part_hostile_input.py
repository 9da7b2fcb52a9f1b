"""Hostile input: every libFuzzer target (cmake/StokerFuzz.cmake: the
TFRecord/Example/layout parsers, the tar reader and tar views, the JPEG probe and decoder, the index
record decoders, the S3 listing XML and HTTP listing parsers) runs for a
bounded time over its corpus in the tree, under ASan + UBSan. New inputs go
to a scratch directory, so the tree's corpus only changes by hand.

The targets are built beforehand (.ci/run does it; by hand:
cmake -S . -B build-fuzz -G Ninja -DSTOKER_FUZZ=ON -DSTOKER_TESTS=OFF
-DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 &&
ninja -C build-fuzz stoker_fuzzers); $STOKER_FUZZ_DIR names another build.

Proves: no input found in the time given crashes, hangs, leaks or trips a
sanitizer in the parsers that read files and server answers. A finding
prints the input's file; it becomes a regression test beside the parser
and a corpus file."""

import os
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# target binary (under the fuzz build) -> its corpus (in the tree)
TARGETS = {
    "decode/fuzz/tfrecord_example_fuzz": "decode/fuzz/corpus/tfrecord_example",
    "decode/fuzz/jpeg_probe_fuzz": "decode/fuzz/corpus/jpeg_probe",
    "decode/fuzz/tar_view_fuzz": "decode/fuzz/corpus/tar_view",
    "cache/fuzz/index_record_fuzz": "cache/fuzz/corpus/index_record",
    "cache/fuzz/remote_listing_fuzz": "cache/fuzz/corpus/remote_listing",
}
SECONDS = {"quick": 20, "full": 300}


def hostile_input(tally, scratch, quick, seed):
    build = Path(os.environ.get("STOKER_FUZZ_DIR", REPO / "build-fuzz"))
    seconds = SECONDS["quick" if quick else "full"]
    for target, corpus in TARGETS.items():
        name = Path(target).name
        binary = build / target
        tally.add(cases=1)
        if not os.access(binary, os.X_OK):
            tally.fail(f"{binary} is not built (see this part's docstring)")
            continue
        findings = scratch.path("findings")
        findings.mkdir(exist_ok=True)
        new = scratch.path("new-" + name)
        new.mkdir()
        cmd = [str(binary), f"-max_total_time={seconds}", "-timeout=10", "-rss_limit_mb=2048",
               "-print_final_stats=1", f"-seed={seed}", f"-artifact_prefix={findings}/{name}-",
               str(new), str(REPO / corpus)]
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1",
                   UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1")
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=seconds + 120)
        except subprocess.TimeoutExpired:
            tally.add(hangs=1)
            tally.say(f"HANG: {name} did not stop after {seconds}s")
            tally.notes.append(f"{name} hung")
            continue
        runs = re.search(r"stat::number_of_executed_units:\s*(\d+)", r.stderr)
        units = int(runs.group(1)) if runs else 0
        tally.add(faults=units)
        if r.returncode != 0:
            saved = sorted(p.name for p in findings.iterdir() if p.name.startswith(name))
            tail = "\n".join(r.stderr.splitlines()[-40:])
            tally.fail(f"{name} exit {r.returncode}, inputs kept: {saved}\n{tail}")
            continue
        cov = re.findall(r"cov: (\d+)", r.stderr)
        tally.say(f"{name}: {units} inputs in {seconds}s, coverage {cov[-1] if cov else '?'} edges, "
                  f"{len(list(new.iterdir()))} new inputs, no finding")
