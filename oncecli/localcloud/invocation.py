"""One emulated Lambda execution environment: a separate process running the handler.

Why a process and not a thread: a crash must be a real crash (the record stays
IN_PROGRESS, its lease has to run out), and a timeout must really stop the code mid-flight,
as Lambda does at the deadline. The parent (``mapping.Worker``) kills and replaces the process
in both cases. The process is warm between invocations, like a Lambda container: the
handler module is imported once, with the function's environment set first.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import io
import os
import signal
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from once import batchresponse
from oncecli.aws import LOCAL_ACCOUNT, LOCAL_REGION
from oncecli.localcloud import roles


@dataclass
class LambdaContext:
    """The attributes and method of Lambda's Python context object that handlers use.

    The one context of the project's tooling: the emulated invocations here, the harness's
    workers and the benchmarks all hand it to the handlers they call.
    """

    function_name: str
    invoked_function_arn: str
    memory_limit_in_mb: int
    deadline_ms: int
    aws_request_id: str
    function_version: str = "$LATEST"
    log_group_name: str = ""
    log_stream_name: str = "local"

    @classmethod
    def starting_now(cls, function_name: str, timeout_s: float, memory_mb: int) -> LambdaContext:
        """The context of an invocation that starts now, with ``timeout_s`` to run."""
        return cls(
            function_name=function_name,
            invoked_function_arn=(
                f"arn:aws:lambda:{LOCAL_REGION}:{LOCAL_ACCOUNT}:function:{function_name}"
            ),
            memory_limit_in_mb=memory_mb,
            deadline_ms=int(time.time() * 1000 + timeout_s * 1000),
            aws_request_id=str(uuid.uuid4()),
            log_group_name=f"/aws/lambda/{function_name}",
        )

    def get_remaining_time_in_millis(self) -> int:
        """Milliseconds left before the function timeout (0 once it has passed)."""
        return max(0, self.deadline_ms - int(time.time() * 1000))


@dataclass(frozen=True)
class Invocation:
    """What the parent sends for one invocation."""

    event: dict[str, Any]
    deadline_ms: int
    function_name: str
    function_arn: str
    memory_mb: int


def _quiet(log_path: str | None) -> None:
    """Ctrl-C is the parent's business; logs go to a file so the demo output stays clean."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with the CLI
    target = os.open(log_path or os.devnull, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(target, 1)
    os.dup2(target, 2)
    os.close(target)
    # A line is in the log when it is written, as in CloudWatch Logs: the metrics shipper
    # (``emf``) reads it from there while the worker stays warm.
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(line_buffering=True)


def run_from(code_dir: str) -> None:
    """Import from the function's asset first, as Lambda does (``/var/task`` heads its
    path): its packages, the once runtime and the dependencies its bundling installed among
    them, replace any copy this process imported before (the CLI's own), so that the
    handler runs the code that was deployed."""
    sys.path.insert(0, code_dir)
    shipped = {
        path.stem if path.suffix == ".py" else path.name
        for path in Path(code_dir).iterdir()
        if path.suffix == ".py" or (path.is_dir() and path.name.isidentifier())
    }
    for name in list(sys.modules):
        if name.partition(".")[0] in shipped:
            del sys.modules[name]
    importlib.invalidate_caches()


#: What a worker inherits from the process that started it only if its mapping sets it too:
#: the AWS SDK's endpoint overrides (``AWS_ENDPOINT_URL``, ``AWS_ENDPOINT_URL_<SERVICE>``)
#: and profile. Left over from a shell set up for real AWS, one of them would send a
#: service's calls (or all of them) elsewhere than where the mapping routes them.
_ROUTING_PREFIX = "AWS_ENDPOINT_URL"
_ROUTING = frozenset({"AWS_PROFILE", "AWS_DEFAULT_PROFILE"})


def worker_environ(inherited: Mapping[str, str], env: Mapping[str, str]) -> dict[str, str]:
    """The environment a worker runs with: the one it ``inherited`` less the endpoint
    overrides and profile its mapping did not set (``_ROUTING``), then ``env`` (the
    function's own variables and the mapping's)."""
    kept = {
        name: value
        for name, value in inherited.items()
        if not (name.startswith(_ROUTING_PREFIX) or name in _ROUTING)
    }
    return {**kept, **env}


def serve(
    conn: Connection,
    handler: str,
    env: dict[str, str],
    log_path: str | None,
    code_dir: str | None = None,
) -> None:
    """Process entry point: import the handler (from ``code_dir``, the function's asset,
    if given), then answer invocations until told to stop. The process's environment is
    ``worker_environ(inherited, env)``.

    On the local cloud (``env`` names the function and the local cloud's endpoint) every
    AWS call the process makes from the handler's import on, once's and the business
    code's, is judged by the function's role as its stack grants it (``roles``): what the
    role does not allow fails with AWS's AccessDenied error for the service.

    Each answer is ``answer_of``'s: ``("ok", json_text)`` or ``("error", "Class:
    message")``; the JSON text is parsed by the parent, as Lambda parses the function's
    response payload (``once.batchresponse.parse``).
    """
    _quiet(log_path)
    environ = worker_environ(os.environ, env)
    os.environ.clear()
    os.environ.update(environ)
    role = roles.for_worker(environ)  # read before it is enforced: the lookup is ours
    if code_dir is not None:
        run_from(code_dir)
    with contextlib.ExitStack() as judged:
        if role is not None:
            judged.enter_context(roles.enforce(role))
        _answer(conn, handler)


def _answer(conn: Connection, handler: str) -> None:
    """Import the handler, say so, and answer invocations until told to stop."""
    module_name, function_name = handler.rsplit(".", 1)
    function = getattr(importlib.import_module(module_name), function_name)
    conn.send(("ready", os.getpid()))
    while True:
        try:
            invocation: Invocation | None = conn.recv()
        except EOFError:
            return
        if invocation is None:
            return
        context = LambdaContext(
            function_name=invocation.function_name,
            invoked_function_arn=invocation.function_arn,
            memory_limit_in_mb=invocation.memory_mb,
            deadline_ms=invocation.deadline_ms,
            aws_request_id=str(uuid.uuid4()),
            log_group_name=f"/aws/lambda/{invocation.function_name}",
        )
        try:
            response = function(invocation.event, context)
        except Exception as error:
            conn.send(("error", f"{type(error).__name__}: {error}"[:500]))
            continue
        conn.send(answer_of(response))


def answer_of(returned: Any) -> tuple[str, str]:
    """What the worker sends for a handler that returned ``returned``: ``("ok", payload)``,
    the response payload Lambda's Python runtime makes of it (``once.batchresponse.marshal``),
    or ``("error", "Runtime.MarshalError: ...")`` when it cannot make one."""
    try:
        return "ok", batchresponse.marshal(returned)
    except batchresponse.MarshalError as error:
        return "error", f"{batchresponse.MARSHAL_ERROR}: {error}"[:500]
