"""Docker-free bundling of an ``OnceConsumer``'s asset: the user's code, the once runtime
and the runtime's dependencies, in one zip.

``cdk synth`` must work on a machine without Docker, so the asset is built locally: the
dependencies in ``requirements-lambda.txt`` (beside this module) are installed with
``pip --target`` for the Lambda platform (manylinux x86_64, CPython 3.13, wheels only), the
installed ``once`` package is copied beside them (never ``once.testing``, which exists only
for tests), then the contents of the user's ``code_dir`` on top. Tests and caches never enter
the asset. The installed dependencies are cached per user (``$ONCE_CDK_CACHE_DIR``, else
``~/.cache/once-cdk/lambda-deps``) under the sha256 of the requirements, because apps and
tests synthesize many times and the cache lets them do it offline.

With the context key ``once.constants.HOST_CONTEXT`` set (the ``once`` command's local
cloud sets it), the dependencies are installed for the Python and platform that synthesizes
instead, so that the asset runs on this machine as it stands: the local cloud imports each
function's handler from its own asset, and Lambda's cp313 wheels do not load in another
Python. The template still declares the Lambda runtime.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import aws_cdk as cdk
import jsii
from aws_cdk import aws_lambda as lambda_

import once

REQUIREMENTS = Path(__file__).resolve().parent / "requirements-lambda.txt"
#: The installed once runtime, as the application imports it.
RUNTIME_DIR = Path(once.__file__).resolve().parent
RUNTIME_PACKAGE = RUNTIME_DIR.name
#: Parts of the once package that exist only for tests.
RUNTIME_TEST_ONLY = ("testing", "testing.py")

#: The Lambda platform the wheels are chosen for; the function's runtime and architecture.
PYTHON_VERSION = "3.13"
PIP_PLATFORM = "manylinux2014_x86_64"
RUNTIME = lambda_.Runtime.PYTHON_3_13
ARCHITECTURE = lambda_.Architecture.X86_64

#: Never copied into the asset: tests, caches, and what a project folder used as code_dir
#: also holds (its CDK output, which holds the asset being built, its environments).
EXCLUDE = (
    "__pycache__", "*.pyc", "tests", "*.egg-info", ".pytest_cache", ".ruff_cache",
    ".mypy_cache", "cdk.out", ".git", ".venv", "node_modules",
)  # fmt: skip

#: Distributions the Lambda Python runtime already provides. They arrive only as
#: dependencies of dependencies (aws-xray-sdk pulls in botocore, 30 MB), and a bundled copy
#: would shadow the runtime's boto3/botocore pair with a mismatched botocore.
PROVIDED_BY_RUNTIME = ("boto3", "botocore", "s3transfer", "urllib3", "python_dateutil", "six")

#: Bumped when the way the cache is built changes, so an old cache is not reused.
_RECIPE = f"{PYTHON_VERSION} {PIP_PLATFORM} no:{','.join(PROVIDED_BY_RUNTIME)} v2"


def _recipe(for_host: bool) -> str:
    if not for_host:
        return _RECIPE
    return f"host {sys.implementation.cache_tag} {sys.platform} {_RECIPE}"


def cache_dir() -> Path:
    """Where installed dependencies are kept between synths."""
    configured = os.environ.get("ONCE_CDK_CACHE_DIR")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "once-cdk" / "lambda-deps"


def requirements_digest(path: Path = REQUIREMENTS, *, for_host: bool = False) -> str:
    """sha256 of the requirements file (and of this recipe): the key of the dependency cache."""
    return hashlib.sha256(path.read_bytes() + _recipe(for_host).encode()).hexdigest()


def _prune(target: Path) -> None:
    """Remove what the runtime provides, console scripts, byte code and type stubs (only a
    type checker reads them) from ``target``."""
    for dist_info in target.glob("*.dist-info"):
        name = dist_info.name.split("-")[0].lower()
        if name not in PROVIDED_BY_RUNTIME:
            continue
        record = dist_info / "RECORD"
        for line in record.read_text().splitlines() if record.exists() else []:
            installed = target / line.split(",")[0]
            if installed.is_file() and target in installed.resolve().parents:
                installed.unlink()
        shutil.rmtree(dist_info, ignore_errors=True)
    shutil.rmtree(target / "bin", ignore_errors=True)
    for stubs in list(target.glob("*-stubs")):
        shutil.rmtree(stubs, ignore_errors=True)
    for stub in list(target.rglob("*.pyi")):
        stub.unlink()
    for pycache in list(target.rglob("__pycache__")):
        shutil.rmtree(pycache, ignore_errors=True)
    # Packages emptied by the removal above leave their directories behind.
    for directory in sorted(target.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        if directory.is_dir() and not any(directory.iterdir()):
            directory.rmdir()


def _pip_install(requirements: Path, target: Path, *, for_host: bool = False) -> None:
    platform = [] if for_host else [
        "--platform", PIP_PLATFORM, "--implementation", "cp", "--python-version", PYTHON_VERSION,
    ]  # fmt: skip
    subprocess.run(
        [
            sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
            "-r", str(requirements), "--target", str(target), *platform,
            "--only-binary=:all:", "--no-compile",
        ],
        check=True,
    )  # fmt: skip


def cached_dependencies(
    requirements: Path = REQUIREMENTS, cache: Path | None = None, *, for_host: bool = False
) -> Path:
    """The directory of installed runtime dependencies, installing them on first use."""
    cache = cache or cache_dir()
    cached = cache / requirements_digest(requirements, for_host=for_host)
    if cached.is_dir():
        return cached
    cache.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="deps-", dir=cache))
    try:
        _pip_install(requirements, staging, for_host=for_host)
        _prune(staging)
        os.replace(staging, cached)  # atomic: a concurrent synth sees all or nothing
    except OSError:
        if not cached.is_dir():
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return cached


def _user_code_ignore(code_dir: Path, output_dir: Path) -> Callable[[str, list[str]], set[str]]:
    """Leave out tests and caches, the asset being built if it lies inside ``code_dir``, and
    ``code_dir``'s copy of the runtime if it is the very package being shipped (an app whose
    code folder also holds ``once``, as in its source tree)."""
    patterns = shutil.ignore_patterns(*EXCLUDE)
    output = output_dir.resolve()

    def ignore(directory: str, names: list[str]) -> set[str]:
        ignored = set(patterns(directory, names))
        here = Path(directory).resolve()
        if here == code_dir and RUNTIME_PACKAGE in names:
            ignored.add(RUNTIME_PACKAGE)
        ignored.update(name for name in names if output.is_relative_to(here / name))
        return ignored

    return ignore


def check_code_dir(code_dir: Path, handler: str) -> str | None:
    """Why ``code_dir`` and ``handler`` cannot make a function, or None when they can."""
    if not code_dir.is_dir():
        return f"code_dir={str(code_dir)!r} is not a directory"
    own_runtime = code_dir / RUNTIME_PACKAGE
    if own_runtime.exists() and own_runtime.resolve() != RUNTIME_DIR:
        return (
            f"code_dir={str(code_dir)!r} holds its own {RUNTIME_PACKAGE!r} package, which "
            f"would replace the once runtime that OnceConsumer ships ({RUNTIME_DIR}); "
            "remove it or rename it"
        )
    module, _, function = handler.rpartition(".")
    if not module or not function or not all(part.isidentifier() for part in handler.split(".")):
        return f"handler={handler!r}: expected 'package.module.function'"
    path = code_dir.joinpath(*module.split("."))
    if not (path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()):
        return (
            f"handler={handler!r}: no module {module!r} in code_dir={str(code_dir)!r} "
            f"(looked for {path.relative_to(code_dir)}.py): the handler's package must be at "
            "the root of code_dir"
        )
    return None


def build_asset(code_dir: Path, output_dir: Path, *, for_host: bool = False) -> None:
    """Fill ``output_dir``: the dependencies, the once runtime, then the user's code."""
    shutil.copytree(cached_dependencies(for_host=for_host), output_dir, dirs_exist_ok=True)
    shutil.copytree(
        RUNTIME_DIR,
        output_dir / RUNTIME_PACKAGE,
        dirs_exist_ok=True,
        ignore=shutil.ignore_patterns(*EXCLUDE, *RUNTIME_TEST_ONLY),
    )
    shutil.copytree(
        code_dir, output_dir, dirs_exist_ok=True, ignore=_user_code_ignore(code_dir, output_dir)
    )


@jsii.implements(cdk.ILocalBundling)
class LocalPipBundling:
    """CDK's local bundling hook: build the asset here instead of in a container."""

    def __init__(self, code_dir: Path, for_host: bool) -> None:
        self._code_dir = code_dir
        self._for_host = for_host

    def try_bundle(self, output_dir: str, _options: object) -> bool:
        build_asset(self._code_dir, Path(output_dir), for_host=self._for_host)
        return True


def function_code(code_dir: Path, *, for_host: bool = False) -> lambda_.Code:
    """The Lambda asset. The Docker image is never pulled: local bundling always succeeds.
    ``for_host``: its dependencies for this machine, not Lambda's
    (``once.constants.HOST_CONTEXT``)."""
    return lambda_.Code.from_asset(
        str(code_dir),
        exclude=list(EXCLUDE),
        # Hash what was built, not code_dir alone: a new runtime or dependency pin must
        # change the asset, or `cdk deploy` would keep the old code.
        asset_hash_type=cdk.AssetHashType.OUTPUT,
        bundling=cdk.BundlingOptions(
            image=cdk.DockerImage.from_registry("unused"),
            # jsii hands the options over positionally; the stub spells them as keywords.
            local=LocalPipBundling(code_dir, for_host),  # type: ignore[arg-type]
        ),
    )
