"""Cold start: what importing the handler module costs, and how big the Lambda asset is.

Import time is measured in fresh interpreters (the median of several), for
``payments.handler`` beside a minimal Powertools consumer module written the documented
way (``lambdas/powertools_handler.py``). One extra ``-X importtime`` run says which packages
the time goes to. The asset is ``functions/`` plus what ``requirements-lambda.txt`` installs
(``pip install --target``, cached), or the bundle of the last ``make synth`` if there is one.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from once import constants as c
from oncecli.aws import local_env
from oncecli.demo import example
from oncecli.project import ROOT

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


def import_ms(module: str, runs: int, functions: Path = FUNCTIONS) -> list[float]:
    """Import time of ``module`` in ``runs`` fresh interpreters, in ms."""
    out = []
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-c", _PROBE.format(module=module)],
            env=_env(functions),
            capture_output=True,
            text=True,
            check=True,
        )
        out.append(float(done.stdout.strip().splitlines()[-1]))
    return out


def import_breakdown(module: str, functions: Path = FUNCTIONS, top: int = 8) -> dict[str, float]:
    """Self time (ms) per top-level package from ``python -X importtime``."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        env=_env(functions),
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
    for label, module in MODULES.items():
        tick(f"cold start: {module}")
        samples = import_ms(module, runs, functions)
        result["imports"][label] = {
            "module": module,
            "median_ms": statistics.median(samples),
            "min_ms": min(samples),
            "max_ms": max(samples),
            "breakdown_ms": import_breakdown(module, functions),
        }
    tick("asset size")
    result["asset"] = asset_size(cache, install)
    return result
