"""The wheel gives a working ``once`` without the source tree: every module of the runtime,
the construct library and the CLI is in it, and every library they import is declared. (The
example service is not shipped: ``tests/unit/house/test_wheel_contents.py``.)

The wheel is built the way ``pip install .`` builds it, offline (the build backend of the
development environment).
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: ``pip wheel`` offline, with the build backend of this environment.
PIP_WHEEL = (sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q")
#: Source folders whose packages the wheel ships, and the folder each is rooted in.
SHIPPED = {"once": "functions", "oncecli": ".", "once_cdk": "."}
#: The example service: the demo, harness and benchmarks import it from the checkout they
#: run in (``proof.example``), so it is no dependency of the wheel.
EXAMPLE = "payments"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    """The wheel, built from a copy of what it is made of (setuptools leaves ``build/lib``
    behind in the tree it builds, and a stale copy there would hide a missing package)."""
    source, out = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("wheel")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    for package, base in SHIPPED.items():
        if (ROOT / base / package).is_dir():
            shutil.copytree(
                ROOT / base / package,
                source / base / package,
                ignore=shutil.ignore_patterns("__pycache__"),
            )
    subprocess.run(
        [*PIP_WHEEL, "-w", str(out), str(source)],
        check=True,
        capture_output=True,
    )
    (built,) = out.glob("once-*.whl")
    return zipfile.ZipFile(built)


def _sources() -> dict[str, Path]:
    """Every Python file the wheel must hold, by its path inside the wheel."""
    found = {}
    for package, base in SHIPPED.items():
        for path in (ROOT / base / package).rglob("*.py"):
            found[str(path.relative_to(ROOT / base))] = path
    return found


def _metadata(wheel: zipfile.ZipFile) -> tuple[list[str], str]:
    (name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    (points,) = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
    message = Parser().parsestr(wheel.read(name).decode())
    return message.get_all("Requires-Dist") or [], wheel.read(points).decode()


def test_every_module_is_in_the_wheel(wheel: zipfile.ZipFile) -> None:
    missing = sorted(set(_sources()) - set(wheel.namelist()))
    assert not missing, f"left out of the wheel: {missing}"


def test_the_once_command_is_its_entry_point(wheel: zipfile.ZipFile) -> None:
    _, entry_points = _metadata(wheel)
    assert "once = oncecli.cli:main" in entry_points


def test_the_wheel_declares_its_license_and_carries_its_text(wheel: zipfile.ZipFile) -> None:
    (name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    metadata = Parser().parsestr(wheel.read(name).decode())
    assert metadata["License-Expression"] == "MIT"
    (license_file,) = [n for n in wheel.namelist() if n.endswith("licenses/LICENSE")]
    assert wheel.read(license_file) == (ROOT / "LICENSE").read_bytes()


def _names(requires: list[str]) -> set[str]:
    return {
        r.split(";")[0].split("[")[0].split("<")[0].split(">")[0].strip().lower() for r in requires
    }


def _undeclared(declared: set[str], sources: list[Path]) -> dict[str, str]:
    """The libraries the sources import that no declared distribution provides."""
    providers = packages_distributions()
    undeclared: dict[str, str] = {}
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top in SHIPPED or top == EXAMPLE:
                    continue
                dists = {d.lower().replace("_", "-") for d in providers.get(top, [top])}
                if not dists & {d.replace("_", "-") for d in declared}:
                    undeclared[top] = str(path.relative_to(ROOT))
    # botocore and urllib3 come with boto3, which is declared.
    return {k: v for k, v in undeclared.items() if k not in ("botocore", "urllib3")}


def test_every_library_imported_is_a_declared_dependency(wheel: zipfile.ZipFile) -> None:
    requires, _ = _metadata(wheel)
    undeclared = _undeclared(_names(requires), list(_sources().values()))
    assert not undeclared, f"imported but not declared (module: where): {undeclared}"


def test_pip_install_without_extras_gives_the_runtime_and_once_cdk(wheel: zipfile.ZipFile) -> None:
    """A team deploys with ``pip install .``: what ``once`` (but its pytest plugin, which
    comes with the ``testing`` extra) and ``once_cdk`` import is a base dependency; the
    local cloud, harness and benchmarks come with the ``local`` extra."""
    requires, _ = _metadata(wheel)
    base = _names([r for r in requires if "extra ==" not in r])
    sources = [
        path
        for name, path in _sources().items()
        if name.startswith(("once/", "once_cdk/")) and not name.startswith("once/testing/")
    ]
    undeclared = _undeclared(base, sources)
    assert not undeclared, f"imported but only in an extra (module: where): {undeclared}"
