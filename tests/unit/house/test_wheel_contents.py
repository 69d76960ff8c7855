"""The package is the product: a wheel built from the checkout holds ``once``, ``once_cdk``
and ``oncecli``, and nothing else at the top: not the example (``payments`` would shadow a
team's own), not the repository's proof (``proof/``: demo, chaos harness, benchmarks), with
the data files they read and the pytest plugin; the extras a team installs bring no
plotting or profiling library, and the ``once`` command offers only what works in a team's
project. (That every module of those
packages is in it, and every library they import declared: ``tests/localcloud/test_packaging.py``.)

The wheel is built from a copy of the checkout's files (tracked, and new ones not ignored)
in a temporary folder: setuptools builds in ``build/`` beside the sources, so building in
the checkout would both leave files there and risk packing stale copies from older builds.
The build is offline (``--no-index``, ``--no-build-isolation``: this environment's
setuptools).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _checkout_files() -> list[str]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the files a wheel is built from are unknown")
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return [name for name in listed.split("\0") if name and (ROOT / name).is_file()]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[zipfile.ZipFile]:
    tmp = tmp_path_factory.mktemp("wheel")
    source, out = tmp / "src", tmp / "dist"
    for name in _checkout_files():
        target = source / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(source),
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--disable-pip-version-check",
            "--quiet",
            "-w",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (built,) = out.glob("once-*.whl")
    with zipfile.ZipFile(built) as archive:
        yield archive


def _names(wheel: zipfile.ZipFile) -> set[PurePosixPath]:
    return {PurePosixPath(name) for name in wheel.namelist()}


def _dist_info(wheel: zipfile.ZipFile, name: str) -> str:
    (path,) = [p for p in wheel.namelist() if p.endswith(f".dist-info/{name}")]
    return wheel.read(path).decode()


def test_the_wheel_holds_once_once_cdk_and_oncecli_only(wheel):
    top = {p.parts[0] for p in _names(wheel) if not p.parts[0].endswith(".dist-info")}
    assert top == {"once", "once_cdk", "oncecli"}
    assert set(_dist_info(wheel, "top_level.txt").split()) == {"once", "once_cdk", "oncecli"}


def test_nothing_of_the_proof_or_the_example_is_in_the_wheel(wheel):
    names = _names(wheel)
    proof_modules = {p.stem for p in (ROOT / "proof").rglob("*.py")} - {"__init__", "__main__"}
    assert proof_modules
    shipped = {p.stem for p in names if p.suffix == ".py"}
    # The proof's own module names (harness, drive, verdict...) appear nowhere in the wheel;
    # a few name both a module of the proof and one of the product (the chaos harness's
    # Powertools peer, and the runtime's bridge to Powertools' records).
    same_names = {"errors", "example", "cli", "powertools"}
    assert not proof_modules & shipped - same_names, proof_modules & shipped - same_names
    assert not [p for p in names if p.parts[0] in {"proof", "payments", "infra", "tests"}]


def test_the_wheel_holds_the_data_the_packages_read(wheel):
    assert "once_cdk/requirements-lambda.txt" in set(wheel.namelist())


#: Libraries for plots and profiles: the proof's (requirements-dev.txt), never a team's.
PROOF_ONLY = ("matplotlib", "pyinstrument", "hypothesis")


def test_no_extra_a_team_installs_brings_a_plotting_or_profiling_library(wheel):
    requires = [
        line.partition(":")[2].strip()
        for line in _dist_info(wheel, "METADATA").splitlines()
        if line.startswith("Requires-Dist:")
    ]
    assert requires
    assert not [r for r in requires if r.lower().startswith(PROOF_ONLY)], requires


def test_the_once_command_offers_only_what_works_in_a_teams_project():
    from oncecli.cli import build_parser

    (commands,) = [
        action.choices
        for action in build_parser()._actions
        if getattr(action, "choices", None) and action.dest == "command"
    ]
    assert set(commands) == {
        "up",
        "send",
        "status",
        "inspect",
        "dlq",
        "redrive",
        "logs",
        "env",
        "event",
        "invoke",
    }


def test_the_pytest_plugin_ships_and_is_registered(wheel):
    assert "once/testing/__init__.py" in set(wheel.namelist())
    entry_points = _dist_info(wheel, "entry_points.txt")
    assert "[pytest11]" in entry_points
    assert "once = once.testing" in entry_points
    assert "once = oncecli.cli:main" in entry_points
