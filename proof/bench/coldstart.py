"""Cold start: what importing the handler module costs, what a fresh interpreter takes to
handle its first record, and how big the Lambda asset is.

Import time is measured in fresh interpreters (the median of several), for
``payments.handler`` beside a minimal Powertools consumer module written the documented
way (``lambdas/powertools_handler.py``). One extra ``-X importtime`` run says which packages
the time goes to.

The first record is what a Lambda cold start bills beyond the runtime's own start: import
the module (which builds the handler), then handle one SQS batch of one new record. It is
measured for a minimal once module (``lambdas/once_handler.py``) beside the Powertools one,
alternating, in fresh interpreters, against a local endpoint that answers every AWS call at
once with an empty success (``_Answers``): no engine's time, no network, only the client's
own work (imports, clients, requests). The time is the interpreter's wall clock and its CPU.

Every measured interpreter reads compiled byte code, once's modules as the installed
packages' (``pip`` compiles those at install): a first, unmeasured run of each module compiles
what it imports into a byte-code cache of the measurement's own (``PYTHONPYCACHEPREFIX``, a
temporary directory). Without it, a source of ``functions/`` edited since its cached byte
code was written (and never written again where ``PYTHONDONTWRITEBYTECODE`` is set) is
compiled in every measured run, and the figure would say how recently once was edited.

The asset is ``functions/`` plus what ``requirements-lambda.txt`` installs
(``pip install --target``, cached), or the bundle of the last ``make synth`` if there is one.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from once import constants as c
from oncecli.aws import local_env
from oncecli.project import ROOT
from proof import example

FUNCTIONS = ROOT / "functions"
LAMBDAS = Path(__file__).resolve().parent / "lambdas"
MODULES = {
    "once (payments.handler)": "payments.handler",
    "Powertools (documented minimal)": "powertools_handler",
}
#: Packages the Lambda Python runtime already provides: bundling them again costs size.
RUNTIME_PROVIDED = (
    "boto3",
    "botocore",
    "s3transfer",
    "jmespath",
    "urllib3",
    "dateutil",
    "python_dateutil",
    "six",
)
_PROBE = (
    "import time; t = time.perf_counter(); import {module}; print((time.perf_counter() - t) * 1000)"
)
#: The modules whose first record is measured: the same business function, one new record.
FIRST_RECORD = {
    "once (minimal)": "once_handler",
    "Powertools (documented minimal)": "powertools_handler",
}
#: A fresh interpreter: import the module, then handle one batch of one new record. The cyclic
#: garbage collector's CPU time is told apart (``gc_ms``; ``full_gcs`` of its collections
#: were full ones): a process that allocates as much as these do pays one full collection
#: (some 15 ms) about when the first record runs, and one that allocates a little less pays
#: it later, at a warm invocation.
_FIRST_RECORD_PROBE = """
import gc, json, time
EVENT = json.loads({event!r})
GC = {{"ms": 0.0, "full": 0, "at": 0.0}}


def gc_timed(phase, info):
    if phase == "start":
        GC["at"] = time.process_time()
    else:
        GC["ms"] += (time.process_time() - GC["at"]) * 1000
        GC["full"] += info["generation"] == 2


gc.callbacks.append(gc_timed)


class Context:
    function_name = "coldstart"
    memory_limit_in_mb = 1024
    aws_request_id = "coldstart-request"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:coldstart"

    def get_remaining_time_in_millis(self):
        return 60000


w0, c0 = time.perf_counter(), time.process_time()
import {module} as handler_module
w1 = time.perf_counter()
response = handler_module.lambda_handler(EVENT, Context())
w2, c2 = time.perf_counter(), time.process_time()
assert response == {{"batchItemFailures": []}}, response
print(json.dumps({{"import_ms": (w1 - w0) * 1000, "first_ms": (w2 - w1) * 1000,
                  "total_ms": (w2 - w0) * 1000, "cpu_ms": (c2 - c0) * 1000,
                  "gc_ms": GC["ms"], "full_gcs": GC["full"]}}))
"""
#: SnapStart, emulated: the module is imported and the runtime's before-snapshot hooks run
#: (INIT, then the snapshot); a fork stands for a restore (the process's memory as it was,
#: nothing of it re-run), whose child runs the after-restore hooks, then one batch of one new
#: record. Its figures start at the fork: ``import_ms`` holds the after-restore hooks' time.
#: A real restore also resumes the microVM and pages its memory in, which is not emulated.
_SNAPSHOT_PROBE = (
    _FIRST_RECORD_PROBE.split("w0, c0 =")[0]
    + """
import os
import {module} as handler_module
import snapshot_restore_py

for hook, args, kwargs in reversed(snapshot_restore_py.get_before_snapshot()):
    hook(*args, **kwargs)
read_end, write_end = os.pipe()
if os.fork() == 0:
    w0, c0 = time.perf_counter(), time.process_time()
    for hook, args, kwargs in snapshot_restore_py.get_after_restore():
        hook(*args, **kwargs)
    w1 = time.perf_counter()
    response = handler_module.lambda_handler(EVENT, Context())
    w2, c2 = time.perf_counter(), time.process_time()
    ok = response == {{"batchItemFailures": []}}
    os.write(write_end, json.dumps({{"import_ms": (w1 - w0) * 1000, "first_ms": (w2 - w1) * 1000,
                                    "total_ms": (w2 - w0) * 1000, "cpu_ms": (c2 - c0) * 1000,
                                    "ok": ok}}).encode())
    os._exit(0)
os.close(write_end)
with os.fdopen(read_end) as pipe:
    figures = json.loads(pipe.read())
os.wait()
assert figures.pop("ok"), "the restored process reported a failed record"
print(json.dumps(figures))
"""
)


def _env(functions: Path) -> dict[str, str]:
    example.require()  # the example's own names, from the checkout
    from payments import ENV_LEDGER_TABLE_NAME, SERVICE_NAME

    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")}
    env.update(
        {
            "PYTHONPATH": f"{functions}{os.pathsep}{LAMBDAS}",
            **local_env(),
            c.ENV_SERVICE_NAME: SERVICE_NAME,
            c.ENV_TABLE_NAME: "idem",
            ENV_LEDGER_TABLE_NAME: "ledger",
        }
    )
    return env


def endpoint_env(functions: Path, url: str) -> dict[str, str]:
    """``_env`` with every AWS call sent to ``url`` (an ``_answers`` endpoint), never
    through a proxy of this machine's environment."""
    env = {
        k: v
        for k, v in _env(functions).items()
        if k.lower() not in ("http_proxy", "https_proxy", "all_proxy")
    }
    env.update({"AWS_ENDPOINT_URL": url, "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"})
    return env


def compiled(env: dict[str, str], pycache: Path) -> dict[str, str]:
    """``env`` with byte code read from, and written to, ``pycache`` (the measurement's
    own cache, whatever ``PYTHONDONTWRITEBYTECODE`` says), so that a first run of a module
    compiles it for the measured ones."""
    env = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


@contextmanager
def _pycache() -> Iterator[Path]:
    """A byte-code cache for the time of the block."""
    with tempfile.TemporaryDirectory(prefix="coldstart-pyc-") as path:
        yield Path(path)


def import_ms(
    module: str, runs: int, functions: Path = FUNCTIONS, pycache: Path | None = None
) -> list[float]:
    """Import time of ``module`` in ``runs`` fresh interpreters, in ms, after one run that
    compiles it (into ``pycache``, else a cache of this call's own)."""
    with contextlib.ExitStack() as stack:
        cache = pycache or stack.enter_context(_pycache())
        out = []
        for _ in range(runs + 1):
            done = subprocess.run(
                [sys.executable, "-c", _PROBE.format(module=module)],
                env=compiled(_env(functions), cache),
                capture_output=True,
                text=True,
                check=True,
            )
            out.append(float(done.stdout.strip().splitlines()[-1]))
        return out[1:]


class _Answer(BaseHTTPRequestHandler):
    """Answers every AWS JSON-protocol call with an empty success, on a kept-alive
    connection: DynamoDB's writes without return values, SQS's and SNS's sends."""

    protocol_version = "HTTP/1.1"
    # The headers and the body leave in two writes: without this, the second waits for the
    # client's delayed ACK (some 40 ms on Linux), and the figure would be that wait.
    disable_nagle_algorithm = True
    BODY = b"{}"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-amz-json-1.0")
        self.send_header("Content-Length", str(len(self.BODY)))
        self.send_header("x-amzn-RequestId", "coldstart")
        self.send_header("x-amz-crc32", str(zlib.crc32(self.BODY) & 0xFFFFFFFF))
        self.end_headers()
        self.wfile.write(self.BODY)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def _answers() -> Iterator[str]:
    """A local endpoint of ``_Answer``, for the time of the block: its URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _one_record_event() -> str:
    """An SQS event of one new record, as Lambda delivers it."""
    record = {
        "messageId": "coldstart-message",
        "receiptHandle": "coldstart-receipt",
        "body": json.dumps({"paymentId": os.urandom(8).hex(), "account": "a-1", "amount": 100}),
        "attributes": {
            "ApproximateReceiveCount": "1",
            "SentTimestamp": "1700000000000",
            "SenderId": "AIDA",
            "ApproximateFirstReceiveTimestamp": "1700000000000",
        },
        "messageAttributes": {},
        "md5OfBody": "",
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:coldstart",
        "awsRegion": "us-east-1",
    }
    return json.dumps({"Records": [record]})


def first_record(
    modules: dict[str, tuple[str, Path]],
    runs: int,
    sdk: Path | None = None,
    *,
    snapshot: bool = False,
) -> dict[str, dict[str, Any]]:
    """Import plus first record of each of ``modules`` (label: module name, and the Lambda
    code it is imported beside) in ``runs`` fresh interpreters each, the modules alternating:
    medians of wall time (import, first record, both) and CPU. ``sdk``: a directory whose
    boto3 and botocore are imported instead of the installed ones. ``snapshot``: SnapStart
    emulated (``_SNAPSHOT_PROBE``): restore hooks plus first record, from the restore.
    Each module's first run compiles what it imports and is not counted."""
    probe = _SNAPSHOT_PROBE if snapshot else _FIRST_RECORD_PROBE
    samples: dict[str, list[dict[str, float]]] = {label: [] for label in modules}
    with _answers() as url, _pycache() as pycache:
        envs = {}
        for label, (_, functions) in modules.items():
            env = compiled(endpoint_env(functions, url), pycache)
            if sdk is not None:
                env["PYTHONPATH"] = os.pathsep.join([str(sdk), env["PYTHONPATH"]])
            envs[label] = env
        for n in range(runs + 1):
            for label, (module, _) in modules.items():
                done = subprocess.run(
                    [
                        sys.executable,
                        "-c",
                        probe.format(module=module, event=_one_record_event()),
                    ],
                    env=envs[label],
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if done.returncode != 0:
                    raise RuntimeError(f"first record of {module} failed:\n{done.stderr[-2000:]}")
                if n > 0:
                    samples[label].append(json.loads(done.stdout.strip().splitlines()[-1]))
    return {
        label: {
            "module": modules[label][0],
            "runs": runs,
            **{
                f"{key}_median": statistics.median(s[key] for s in rows)
                for key in ("import_ms", "first_ms", "total_ms", "cpu_ms")
            },
            "total_ms_min": min(s["total_ms"] for s in rows),
            "total_ms_max": max(s["total_ms"] for s in rows),
            **(
                {
                    "gc_ms_median": statistics.median(s["gc_ms"] for s in rows),
                    "full_gc_runs": sum(s["full_gcs"] > 0 for s in rows),
                }
                if all("gc_ms" in s for s in rows)
                else {}
            ),
        }
        for label, rows in samples.items()
    }


def import_breakdown(
    module: str, functions: Path = FUNCTIONS, top: int = 8, pycache: Path | None = None
) -> dict[str, float]:
    """Self time (ms) per top-level package from ``python -X importtime``, reading byte code
    from ``pycache`` (where ``import_ms`` compiled it) when given."""
    env = _env(functions) if pycache is None else compiled(_env(functions), pycache)
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    per_package: dict[str, float] = defaultdict(float)
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _, name = (part.strip() for part in line.split(":", 1)[1].split("|"))
        per_package[name.split(".")[0]] += int(self_us) / 1000
    ranked = sorted(per_package.items(), key=lambda kv: -kv[1])
    return dict(ranked[:top])


def _tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _bundle_dir() -> Path | None:
    """The function's bundle in the cloud assembly that ``make synth`` last wrote: the zip
    asset its assets manifest names that holds ``payments/`` (cdk.out keeps older bundles
    beside it, so the manifest, not a glob, says which one is current)."""
    out = ROOT / "cdk.out"
    for manifest in sorted(out.glob("*.assets.json")):
        for asset in json.loads(manifest.read_text()).get("files", {}).values():
            path = out / asset["source"]["path"]
            if (path / "payments" / "handler.py").is_file():
                return path
    return None


def _same_code(bundle: Path) -> bool:
    """True when the bundle's ``once`` and ``payments`` are the sources in ``functions/``."""
    for pkg in ("once", "payments"):
        ours = {p.relative_to(FUNCTIONS): p for p in (FUNCTIONS / pkg).rglob("*.py")}
        theirs = {p.relative_to(bundle): p for p in (bundle / pkg).rglob("*.py")}
        if ours.keys() != theirs.keys() or any(
            ours[k].read_bytes() != theirs[k].read_bytes() for k in ours
        ):
            return False
    return True


def _installed(cache: Path) -> Path | None:
    """``requirements-lambda.txt`` installed with ``pip --target``, cached by its hash."""
    reqs = ROOT / "requirements-lambda.txt"
    target = cache / ("asset-" + hashlib.sha256(reqs.read_bytes()).hexdigest()[:12])
    if not (target / ".complete").exists():
        shutil.rmtree(target, ignore_errors=True)
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--target",
                str(target),
                "-r",
                str(reqs),
            ],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            return None
        (target / ".complete").touch()
    return target


def asset_size(cache: Path, install: bool = True) -> dict[str, Any]:
    """Bytes of the asset: our code, its dependencies, and the share the runtime has."""
    bundle = _bundle_dir()
    source = None
    if bundle is not None:
        source = "the function's bundle from `make synth`, in cdk.out" + (
            "" if _same_code(bundle) else ", built from older sources than functions/"
        )
    deps = bundle or (_installed(cache) if install else None)
    if deps is None:
        return {
            "source": "not measured (no CDK bundle, and pip install --target "
            + ("failed)" if install else "not run)")
        }
    ours = sum(_tree_bytes(FUNCTIONS / pkg) for pkg in ("once", "payments"))
    packages: dict[str, int] = defaultdict(int)
    for child in deps.iterdir():
        if child.name in ("once", "payments") or child.name.startswith("."):
            continue
        name = child.name.split("-")[0].split(".")[0].lower()
        packages[name] += _tree_bytes(child) if child.is_dir() else child.stat().st_size
    total = ours + sum(packages.values())
    provided = sum(n for name, n in packages.items() if name in RUNTIME_PROVIDED)
    return {
        "source": source or "functions/ + pip install --target -r requirements-lambda.txt",
        "ours_bytes": ours,
        "total_bytes": total,
        "runtime_provided_bytes": provided,
        "packages": dict(sorted(packages.items(), key=lambda kv: -kv[1])[:8]),
    }


def run(
    runs: int,
    cache: Path,
    tick: Callable[[str], None],
    functions: Path = FUNCTIONS,
    install: bool = True,
) -> dict[str, Any]:
    result: dict[str, Any] = {"runs": runs, "imports": {}}
    with _pycache() as pycache:
        for label, module in MODULES.items():
            tick(f"cold start: {module}")
            samples = import_ms(module, runs, functions, pycache)
            result["imports"][label] = {
                "module": module,
                "median_ms": statistics.median(samples),
                "min_ms": min(samples),
                "max_ms": max(samples),
                "breakdown_ms": import_breakdown(module, functions, pycache=pycache),
            }
    tick("cold start: first record")
    result["first_record"] = first_record(
        {label: (module, functions) for label, module in FIRST_RECORD.items()}, runs
    )
    tick("cold start: first record after a snapshot")
    result["snapshot"] = first_record(
        {label: (module, functions) for label, module in FIRST_RECORD.items()}, runs, snapshot=True
    )
    tick("asset size")
    result["asset"] = asset_size(cache, install)
    return result
