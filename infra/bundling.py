"""Docker-free bundling of the Lambda asset: ``functions/`` plus its runtime dependencies.

``cdk synth`` must work on a machine without Docker, so the asset is built locally: the
dependencies in ``requirements-lambda.txt`` are installed with ``pip --target`` for the
Lambda platform (manylinux x86_64, CPython 3.13, wheels only), then ``functions/`` is copied
beside them. Tests and caches never enter the asset. The installed dependencies are cached
under ``build/lambda-deps/<sha256 of requirements-lambda.txt>/`` because the tests
synthesize many times.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import aws_cdk as cdk
import jsii
from aws_cdk import aws_lambda as lambda_

ROOT = Path(__file__).resolve().parent.parent
FUNCTIONS_DIR = ROOT / "functions"
REQUIREMENTS = ROOT / "requirements-lambda.txt"
CACHE_DIR = ROOT / "build" / "lambda-deps"

#: The Lambda platform the wheels are chosen for; must match the function's runtime and
#: architecture in infra/consumer.py.
PYTHON_VERSION = "3.13"
PIP_PLATFORM = "manylinux2014_x86_64"
RUNTIME = lambda_.Runtime.PYTHON_3_13
ARCHITECTURE = lambda_.Architecture.X86_64

#: Never copied into the asset.
EXCLUDE = ("__pycache__", "*.pyc", "tests", "*.egg-info", ".pytest_cache")

#: Distributions the Lambda Python runtime already provides. They arrive only as
#: dependencies of dependencies (aws-xray-sdk pulls in botocore, 30 MB), and a bundled copy
#: would shadow the runtime's boto3/botocore pair with a mismatched botocore.
PROVIDED_BY_RUNTIME = ("boto3", "botocore", "s3transfer", "urllib3", "python_dateutil", "six")

#: Bumped when the way the cache is built changes, so an old cache is not reused.
_RECIPE = f"{PYTHON_VERSION} {PIP_PLATFORM} no:{','.join(PROVIDED_BY_RUNTIME)} v1"


def requirements_digest(path: Path = REQUIREMENTS) -> str:
    """sha256 of the requirements file (and of this recipe): the key of the dependency cache."""
    return hashlib.sha256(path.read_bytes() + _RECIPE.encode()).hexdigest()


def _prune(target: Path) -> None:
    """Remove what the runtime provides, console scripts and byte code from ``target``."""
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
    for pycache in list(target.rglob("__pycache__")):
        shutil.rmtree(pycache, ignore_errors=True)
    # Packages emptied by the removal above leave their directories behind.
    for directory in sorted(target.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        if directory.is_dir() and not any(directory.iterdir()):
            directory.rmdir()


def _pip_install(requirements: Path, target: Path) -> None:
    subprocess.run(
        [
            sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
            "-r", str(requirements), "--target", str(target),
            "--platform", PIP_PLATFORM, "--implementation", "cp",
            "--python-version", PYTHON_VERSION, "--only-binary=:all:", "--no-compile",
        ],
        check=True,
    )  # fmt: skip


def cached_dependencies(requirements: Path = REQUIREMENTS, cache_dir: Path = CACHE_DIR) -> Path:
    """The directory of installed runtime dependencies, installing them on first use."""
    cached = cache_dir / requirements_digest(requirements)
    if cached.is_dir():
        return cached
    cache_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="deps-", dir=cache_dir))
    try:
        _pip_install(requirements, staging)
        _prune(staging)
        os.replace(staging, cached)  # atomic: a concurrent synth sees all or nothing
    except OSError:
        if not cached.is_dir():
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return cached


def build_asset(output_dir: Path) -> None:
    """Fill ``output_dir`` with the dependencies, then ``functions/`` on top of them."""
    shutil.copytree(cached_dependencies(), output_dir, dirs_exist_ok=True)
    shutil.copytree(
        FUNCTIONS_DIR, output_dir, dirs_exist_ok=True, ignore=shutil.ignore_patterns(*EXCLUDE)
    )


@jsii.implements(cdk.ILocalBundling)
class LocalPipBundling:
    """CDK's local bundling hook: build the asset here instead of in a container."""

    def try_bundle(self, output_dir: str, _options: object) -> bool:
        build_asset(Path(output_dir))
        return True


def function_code() -> lambda_.Code:
    """The Lambda asset. The Docker image is never pulled: local bundling always succeeds."""
    return lambda_.Code.from_asset(
        str(FUNCTIONS_DIR),
        exclude=list(EXCLUDE),
        # Hash what was built, not functions/ alone: a new dependency pin must change the
        # asset, or `cdk deploy` would keep the old code.
        asset_hash_type=cdk.AssetHashType.OUTPUT,
        bundling=cdk.BundlingOptions(
            image=cdk.DockerImage.from_registry("unused"),
            # jsii hands the options over positionally; the stub spells them as keywords.
            local=LocalPipBundling(),  # type: ignore[arg-type]
        ),
    )
