"""The first run on a loaded machine: `./dev demo` from fresh clones while a CPU hog holds the load.

    python -m bench.first_run [--runs 5] [--hog 8] [--repo .] [--keep]

Each run: `git clone` of the repository (its committed HEAD) into a temporary folder, then the
README's first command, `./dev demo`, exactly as a new user runs it: its own venv, its own `.stack`
(jars, data, secrets), its own ports (so a developer's stack can keep running beside it), while
`stress-ng --cpu N` keeps N busy loops on the machine's cores (load average ≈ N). Prints per run:
pass/fail, wall time, the load average seen, and the last lines on failure; then a summary.
Package caches (pip, Maven) are shared with the machine as a user's would be; the clone's stack is
stopped and the clone removed at the end of each run (--keep keeps them).

Needs Debian's stress-ng (installed with apt-get when missing).
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

# A port block away from the defaults (29092, 55432, 27687, 8080, 9460): a developer's stack may run beside.
PORTS = {"MEMSTREAM_KAFKA_PORT": 39092, "MEMSTREAM_KAFKA_CONTROLLER_PORT": 39093, "MEMSTREAM_PG_PORT": 45432,
         "MEMSTREAM_NEO4J_BOLT_PORT": 37687, "MEMSTREAM_API_PORT": 18080, "MEMSTREAM_MCP_PORT": 18090,
         "MEMSTREAM_METRICS_PORT": 19460}


def _hog(n: int) -> subprocess.Popen:
    if shutil.which("stress-ng") is None:
        subprocess.run(["apt-get", "install", "-y", "-q", "stress-ng"], check=True, capture_output=True)
    return subprocess.Popen(["stress-ng", "--cpu", str(n), "--quiet"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def one_run(repo: Path, k: int, keep: bool) -> dict:
    where = Path(tempfile.mkdtemp(prefix=f"memstream-first-run-{k}-"))
    where.chmod(0o755)   # as a user's checkout: the postgres OS user must be able to enter it (mkdtemp makes 0700)
    clone = where / "memstream"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
    env = {**os.environ, **{k: str(v) for k, v in PORTS.items()}, "MEMSTREAM_NAMESPACE": "memstream"}
    env.pop("MEMSTREAM_STACK_DIR", None)
    started = time.monotonic()
    loads = []
    proc = subprocess.Popen(["./dev", "demo"], cwd=clone, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out: list[str] = []
    assert proc.stdout is not None
    for raw in proc.stdout:
        out.append(raw.decode("utf-8", "replace").rstrip())
        loads.append(os.getloadavg()[0])
    code = proc.wait()
    took = time.monotonic() - started
    if (clone / ".venv/bin/memstream").exists():
        subprocess.run([str(clone / ".venv/bin/memstream"), "stack", "down"], cwd=clone, env=env,
                       capture_output=True, timeout=300)
    if not keep:
        shutil.rmtree(where, ignore_errors=True)
    learned = any("== what memory learned" in line for line in out)
    return {"run": k, "ok": code == 0 and learned, "seconds": took, "load_max": max(loads or [0.0]),
            "load_median": statistics.median(loads or [0.0]), "waits": sum("waiting for memory" in ln for ln in out),
            "tail": out[-8:]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--hog", type=int, default=8, help="busy loops of stress-ng (≈ the load average it holds)")
    ap.add_argument("--repo", default=str(Path(__file__).resolve().parents[1]))
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    hog = _hog(args.hog)
    results = []
    try:
        time.sleep(5)
        for k in range(1, args.runs + 1):
            r = one_run(Path(args.repo), k, args.keep)
            results.append(r)
            print(f"run {k}: {'PASS' if r['ok'] else 'FAIL'} in {r['seconds']:.0f} s "
                  f"(load average median {r['load_median']:.1f}, max {r['load_max']:.1f}; "
                  f"{r['waits']} progress lines while waiting)", flush=True)
            if not r["ok"]:
                print("  " + "\n  ".join(r["tail"]), flush=True)
    finally:
        os.killpg(hog.pid, 9)
    ok = sum(r["ok"] for r in results)
    print(f"first run under a CPU hog of {args.hog}: {ok} of {len(results)} passed; "
          f"median {statistics.median(r['seconds'] for r in results):.0f} s, "
          f"max {max(r['seconds'] for r in results):.0f} s")


if __name__ == "__main__":
    main()
