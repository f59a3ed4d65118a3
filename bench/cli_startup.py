"""CPU time of the CLI's start-up: `memstream --help` and `memstream status` (issue 27: at most 0.3 s each).

Each command runs `--runs` times in a fresh process; the figure is the median of user+sys CPU
time of the child (resource.getrusage RUSAGE_CHILDREN, diffed around each run), so time spent
waiting for the broker or for a loaded machine's scheduler does not count, but every import does.
`status` needs the stack up (it reads the workers' health files and Kafka's offsets).

    .venv/bin/python -m bench.cli_startup [--runs 9]
"""
from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time

COMMANDS = {"--help": ["--help"], "status": ["status"]}
BUDGET_S = 0.3


def child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def measure(argv: list[str], runs: int) -> tuple[list[float], list[float]]:
    cpu, wall = [], []
    for _ in range(runs):
        before, t0 = child_cpu(), time.perf_counter()
        subprocess.run([sys.executable, "-m", "memstream.app.cli", *argv], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)
        wall.append(time.perf_counter() - t0)
        cpu.append(child_cpu() - before)
    return cpu, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9)
    args = ap.parse_args()
    print(f"{'command':<18}{'median CPU s':>13}{'min':>8}{'max':>8}{'median wall s':>15}   budget {BUDGET_S} s")
    for name, argv in COMMANDS.items():
        cpu, wall = measure(argv, args.runs)
        print(f"memstream {name:<8}{statistics.median(cpu):>13.3f}{min(cpu):>8.3f}{max(cpu):>8.3f}"
              f"{statistics.median(wall):>15.3f}   {'ok' if statistics.median(cpu) <= BUDGET_S else 'OVER'}")


if __name__ == "__main__":
    main()
