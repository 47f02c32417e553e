"""The tests' harness: real processes only. It starts the built ``holdpoint``
(``holdpoint up --dev-jwt``, or a nats-server and ``holdpoint worker``
separately) on free loopback ports with a temporary store, mints tokens with
``holdpoint dev-token``, and waits for exact conditions with deadlines. Every
process it starts is stopped by pid when its fixture ends.

The binary: ``HOLDPOINT_BIN``, else ``$CARGO_TARGET_DIR/debug/holdpoint``, else the
workspace's ``target/debug/holdpoint``. The nats-server: ``HOLDPOINT_NATS_SERVER``,
else what ``ops/setup.sh`` recorded in ``.tools/nats-server.path``.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]


def holdpoint_binary() -> str:
    candidates = [
        os.environ.get("HOLDPOINT_BIN"),
        os.environ.get("CARGO_TARGET_DIR")
        and str((ROOT / os.environ["CARGO_TARGET_DIR"]).resolve() / "debug" / "holdpoint"),
        str(ROOT / "target" / "debug" / "holdpoint"),
    ]
    for c in candidates:
        if c and Path(c).is_file():
            return c
    raise RuntimeError(f"no holdpoint binary (tried {candidates}): run ops/test.sh, or cargo build")


def nats_binary() -> str:
    if os.environ.get("HOLDPOINT_NATS_SERVER"):
        return os.environ["HOLDPOINT_NATS_SERVER"]
    recorded = ROOT / ".tools" / "nats-server.path"
    if recorded.is_file():
        return recorded.read_text().strip()
    raise RuntimeError("no nats-server: run ops/setup.sh, or set HOLDPOINT_NATS_SERVER")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Proc:
    """A child process whose output is collected; stopped by pid."""

    def __init__(self, name: str, args: list[str], cwd: str, env: dict[str, str]) -> None:
        self.name = name
        self.out = ""
        self._lock = threading.Lock()
        self.p = subprocess.Popen(
            args,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.p.stdout is not None
        for line in self.p.stdout:
            with self._lock:
                self.out += line

    def line(self, pattern: str, timeout: float = 30.0) -> re.Match[str]:
        """Waits for an output line matching ``pattern``; fails after ``timeout``."""
        rx = re.compile(pattern, re.M)
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                m = rx.search(self.out)
            if m:
                return m
            if self.p.poll() is not None:
                raise RuntimeError(f"{self.name} exited {self.p.returncode}:\n{self.out[-3000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name} did not print {pattern!r}:\n{self.out[-3000:]}")
            time.sleep(0.02)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 5 s."""
        if self.p.poll() is not None:
            return
        self.p.send_signal(signal.SIGTERM)
        try:
            self.p.wait(5)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait(5)


class Holdpoint:
    """One test's processes and temp directory, and the person-side helpers."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="holdpoint-py-")
        self.bin = holdpoint_binary()
        self.procs: list[Proc] = []
        self.env = {
            **os.environ,
            "HOLDPOINT_NATS_SERVER": nats_binary(),
            "NO_COLOR": "1",
            "RUST_LOG": "info",
            "HOLDPOINT_DEV_JWT_DIR": str(Path(self.dir) / ".holdpoint" / "dev-jwt"),
        }
        self.nats_url = ""
        self.nats_port = 0
        self.api = ""

    def spawn(self, name: str, args: list[str]) -> Proc:
        proc = Proc(name, [self.bin, *args], self.dir, self.env)
        self.procs.append(proc)
        return proc

    def up(self) -> Holdpoint:
        """``holdpoint up --dev-jwt`` on free ports: its own nats-server, a worker,
        the ingress and the notifier (webhooks in local mode)."""
        up = self.spawn(
            "holdpoint up",
            [
                "up", "--dev-jwt", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
                "--nats-port", "0", "--store", str(Path(self.dir) / "nats"),
            ],
        )
        self.nats_url = up.line(r"^holdpoint nats:\s+(\S+)$").group(1)
        self.api = up.line(r"^holdpoint api:\s+(\S+)$").group(1)
        return self

    def nats(self, port: int | None = None) -> Proc:
        """A nats-server of its own (JetStream, temp store, free port unless
        ``port``: the same store and port again after a restart)."""
        port = port or free_port()
        proc = Proc(
            "nats-server",
            [nats_binary(), "-js", "-a", "127.0.0.1", "-p", str(port), "-sd", str(Path(self.dir) / "nats")],
            self.dir,
            self.env,
        )
        self.procs.append(proc)
        self.nats_url = f"nats://127.0.0.1:{port}"
        self.nats_port = port
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        return proc

    def nats_with_roles(self) -> Proc:
        """A nats-server with ops/nats/holdpoint.conf (one user per role, an
        organisation's own users; development passwords ``<user>-dev-only``), its
        streams made by ``holdpoint setup`` as the ``setup`` user."""
        port = free_port()
        proc = Proc(
            "nats-server (roles)",
            [
                nats_binary(), "-c", str(ROOT / "ops" / "nats" / "holdpoint.conf"), "-js",
                "-a", "127.0.0.1", "-p", str(port), "-sd", str(Path(self.dir) / "nats"),
            ],
            self.dir,
            self.env,
        )
        self.procs.append(proc)
        proc.line(r"Server is ready")
        self.nats_url = f"nats://127.0.0.1:{port}"
        subprocess.run(
            [self.bin, "setup", "--nats-url", self.url_as("setup")],
            cwd=self.dir, env=self.env, capture_output=True, text=True, check=True, timeout=60,
        )
        return proc

    def url_as(self, user: str) -> str:
        """This test's NATS URL with ``user`` and its development password."""
        return self.nats_url.replace("nats://", f"nats://{user}:{user}-dev-only@")

    def worker(self, user: str | None = None) -> Proc:
        """``holdpoint worker`` against this test's NATS (as ``user`` of the roles
        configuration when given), once it pulls commands."""
        url = self.nats_url if user is None else self.url_as(user)
        w = self.spawn("holdpoint worker", ["worker", "--nats-url", url])
        w.line(r"pulling commands")
        return w

    def ingress(self) -> Proc:
        """``holdpoint ingress --dev-jwt`` against this test's NATS on a free port;
        sets ``api``."""
        ingress = self.spawn(
            "holdpoint ingress",
            [
                "ingress", "--dev-jwt", "--nats-url", self.nats_url,
                "--listen", f"127.0.0.1:{free_port()}", "--admin-listen", "127.0.0.1:0",
            ],
        )
        self.api = ingress.line(r"api (http://\S+)").group(1)
        return ingress

    def token(self, org: str, person: str) -> str:
        """A development token for ``person`` of ``org``."""
        out = subprocess.run(
            [self.bin, "dev-token", "--org", org, "--person", person],
            cwd=self.dir, env=self.env, capture_output=True, text=True, check=True, timeout=30,
        )
        return out.stdout.strip()

    def close(self) -> None:
        for p in reversed(self.procs):
            p.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def up() -> Iterator[Holdpoint]:
    """One ``holdpoint up`` for a test module (each test uses ids of its own)."""
    hp = Holdpoint()
    try:
        yield hp.up()
    finally:
        hp.close()


@pytest.fixture
def split() -> Iterator[Holdpoint]:
    """A nats-server alone; the test starts and stops workers."""
    hp = Holdpoint()
    try:
        hp.nats()
        yield hp
    finally:
        hp.close()


@pytest.fixture
def split_roles() -> Iterator[Holdpoint]:
    """A nats-server with the roles configuration, set up; no worker yet."""
    hp = Holdpoint()
    try:
        hp.nats_with_roles()
        yield hp
    finally:
        hp.close()


async def until(what: str, check: Callable[[], Any], timeout: float = 15.0, every: float = 0.05) -> Any:
    """Awaits ``check()`` (sync or async) until it returns something truthy (returned);
    fails after ``timeout`` seconds naming ``what``."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            value = check()
            if asyncio.iscoroutine(value):
                value = await value
            if value:
                return value
        except Exception as e:  # noqa: BLE001 - kept for the failure message
            last = e
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout} s waiting for {what}: {last!r}")
        await asyncio.sleep(every)


async def collect(source: AsyncIterator[Any], into: list[Any]) -> None:
    """Appends everything ``source`` yields to ``into`` (run as a task; cancel to stop)."""
    async for item in source:
        into.append(item)


class Script:
    """A script of tests/ run as a process of its own (a runtime the test can
    kill -9 and start again): its output lines, read with deadlines."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.lines: list[str] = []

    @classmethod
    async def start(cls, name: str, *args: str) -> Script:
        import sys

        script = ROOT / "sdks" / "python" / "tests" / name
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(script), *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )
        return cls(proc)

    async def line(self, prefix: str, timeout: float = 90) -> str:
        """The next output line that starts with ``prefix`` (a loaded machine imports slowly)."""
        assert self.proc.stdout is not None
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                raise TimeoutError(f"no line {prefix!r} in {timeout} s: {self.lines}")
            raw = await asyncio.wait_for(self.proc.stdout.readline(), left)
            if not raw:
                raise RuntimeError(f"exited {await self.proc.wait()} before {prefix!r}: {''.join(self.lines)}")
            text = raw.decode()
            self.lines.append(text)
            if text.startswith(prefix):
                return text.rstrip("\n")

    async def kill(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
        await self.proc.wait()
