"""The Lambda asset: functions/ plus runtime dependencies, built without Docker."""

from __future__ import annotations

import json

import pytest

from infra import bundling


@pytest.fixture(scope="module")
def asset_dir(dev):
    _, function = dev.one("AWS::Lambda::Function")
    key = function["Properties"]["Code"]["S3Key"].removesuffix(".zip")
    path = dev.outdir / f"asset.{key}"
    assert path.is_dir()
    return path


def test_asset_holds_the_layer_the_example_and_their_runtime_dependencies(asset_dir):
    assert (asset_dir / "once" / "constants.py").is_file()
    assert (asset_dir / "payments" / "handler.py").is_file()
    assert (asset_dir / "aws_lambda_powertools").is_dir()
    assert (asset_dir / "jmespath").is_dir()


def test_asset_leaves_out_what_the_lambda_runtime_already_has(asset_dir):
    for name in ("boto3", "botocore", "s3transfer", "urllib3", "dateutil", "six.py"):
        assert not (asset_dir / name).exists(), name


def test_asset_holds_no_tests_caches_or_dev_tools(asset_dir):
    names = {p.name for p in asset_dir.rglob("*")}
    assert "__pycache__" not in names
    assert not [n for n in names if n.endswith(".pyc")]
    assert "tests" not in names
    top = {p.name.split("-")[0].lower() for p in asset_dir.iterdir()}
    for tool in ("pytest", "ruff", "moto", "hypothesis", "cfn_lint", "cfnlint", "aws_cdk"):
        assert tool not in top, tool


def _runs_on_lambda(tag: str) -> bool:
    python, abi, platform = tag.split("-")
    on_platform = platform == "any" or ("manylinux" in platform and platform.endswith("x86_64"))
    on_python = "py3" in python.split(".") or python == "cp313" or abi == "abi3"
    return on_platform and on_python


def test_dependencies_are_installed_for_linux_x86_64_cpython_3_13(asset_dir):
    wheels = [p / "WHEEL" for p in asset_dir.glob("*.dist-info") if (p / "WHEEL").exists()]
    assert wheels
    for wheel in wheels:
        tags = [line.split(": ", 1)[1] for line in wheel.read_text().splitlines()
                if line.startswith("Tag: ")]  # fmt: skip
        assert any(_runs_on_lambda(tag) for tag in tags), (wheel.parent.name, tags)
    assert bundling.RUNTIME.name == f"python{bundling.PYTHON_VERSION}"


def test_dependencies_are_cached_by_the_requirements_digest(dev):
    cached = bundling.CACHE_DIR / bundling.requirements_digest()
    assert cached.is_dir()
    assert (cached / "aws_lambda_powertools").is_dir()


def test_the_asset_hash_follows_the_built_output(dev):
    # An OUTPUT hash changes when a dependency pin changes, not only when functions/ does.
    assets = json.loads((dev.outdir / f"{dev.stack.stack_name}.assets.json").read_text())
    [(asset_hash, asset)] = [
        (h, a) for h, a in assets["files"].items() if a["source"].get("packaging") == "zip"
    ]
    assert asset["source"]["path"] == f"asset.{asset_hash}"
