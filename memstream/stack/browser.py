"""The headless browser the web console's tests drive (tests/test_console.py): Debian's chromium and
chromium-driver, installed by `memstream stack install` (so `./dev test` on a fresh machine has
them) with apt-get, as postgresql-15 is. Nothing is downloaded at test time: selenium is pointed at
/usr/bin/chromedriver and never fetches a driver of its own."""
from __future__ import annotations

import os
import shutil
import subprocess

from kernel.errors import PrerequisiteMissing

PACKAGES = ("chromium", "chromium-driver")
HINT = "chromium + chromium-driver missing: apt-get install -y chromium chromium-driver"


def installed() -> bool:
    return bool(shutil.which("chromium") and shutil.which("chromedriver"))


def install() -> str:
    if installed():
        return "present (chromium, chromedriver)"
    if os.geteuid() != 0:
        raise PrerequisiteMissing(HINT + " (needs root)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    cmd = ["apt-get", "install", "-y", "-qq", *PACKAGES]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:      # a fresh machine's package index may be empty or stale: refresh once
        subprocess.run(["apt-get", "update", "-qq"], capture_output=True, text=True, env=env)
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0 or not installed():
        last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise PrerequisiteMissing(f"{HINT}: {last[0]}")
    return "installed (chromium, chromedriver)"
