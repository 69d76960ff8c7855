"""The asset an OnceConsumer ships: the user's code, the once runtime beside it and the
runtime's dependencies, built without Docker."""

from __future__ import annotations

import json

import pytest

from once_cdk import bundling


@pytest.fixture(scope="module")
def asset_dir(bare_standard):
    path = bare_standard.asset_dir()
    assert path.is_dir()
    return path


def test_asset_holds_the_users_code_the_runtime_and_its_dependencies(asset_dir):
    assert (asset_dir / "orders" / "handler.py").is_file()
    assert (asset_dir / "once" / "constants.py").is_file()
    assert (asset_dir / "once" / "handler.py").is_file()
    assert (asset_dir / "aws_lambda_powertools").is_dir()
    assert (asset_dir / "jmespath").is_dir()


def test_the_runtime_shipped_is_the_installed_one(asset_dir):
    for module in bundling.RUNTIME_DIR.glob("*.py"):
        if module.stem != "testing":
            assert (asset_dir / "once" / module.name).read_bytes() == module.read_bytes()


def test_asset_leaves_out_what_the_lambda_runtime_already_has(asset_dir):
    for name in ("boto3", "botocore", "s3transfer", "urllib3", "dateutil", "six.py"):
        assert not (asset_dir / name).exists(), name


def test_asset_holds_no_tests_caches_test_kit_or_dev_tools(asset_dir):
    names = {p.name for p in asset_dir.rglob("*")}
    assert "__pycache__" not in names
    assert not [n for n in names if n.endswith(".pyc")]
    assert "tests" not in names  # the user's code folder had one
    assert not (asset_dir / "once" / "testing").exists()
    assert not (asset_dir / "once" / "testing.py").exists()
    top = {p.name.split("-")[0].lower() for p in asset_dir.iterdir()}
    for tool in ("pytest", "ruff", "moto", "hypothesis", "cfn_lint", "cfnlint", "aws_cdk",
                 "once_cdk"):  # fmt: skip
        assert tool not in top, tool


def test_asset_holds_no_type_stubs_only_a_type_checker_reads(asset_dir):
    assert not list(asset_dir.glob("*-stubs")), "stub packages"
    assert not list(asset_dir.rglob("*.pyi")), ".pyi files"


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


def test_dependencies_are_cached_by_the_requirements_digest(bare_standard):
    cached = bundling.cache_dir() / bundling.requirements_digest()
    assert (cached / "aws_lambda_powertools").is_dir()


def test_the_cache_goes_where_once_cdk_cache_dir_says(monkeypatch, tmp_path):
    monkeypatch.setenv("ONCE_CDK_CACHE_DIR", str(tmp_path))
    assert bundling.cache_dir() == tmp_path
    monkeypatch.delenv("ONCE_CDK_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert bundling.cache_dir() == tmp_path / "once-cdk" / "lambda-deps"


def test_the_asset_hash_follows_the_built_output(bare_standard):
    # An OUTPUT hash changes when the runtime or a pin changes, not only the user's code.
    manifest = bare_standard.outdir / f"{bare_standard.stack.stack_name}.assets.json"
    assets = json.loads(manifest.read_text())
    [(asset_hash, asset)] = [
        (h, a) for h, a in assets["files"].items() if a["source"].get("packaging") == "zip"
    ]
    assert asset["source"]["path"] == f"asset.{asset_hash}"


def test_a_project_folder_as_code_dir_ships_neither_its_output_nor_its_environments(tmp_path):
    # code_dir="." in an app folder: the asset is built inside it, beside .venv and cdk.out.
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "handler.py").write_text("lambda_handler = None\n")
    for folder in (".venv/lib", "cdk.out/old", "node_modules/x", "build/out"):
        (tmp_path / folder).mkdir(parents=True)
    output = tmp_path / "build" / "out" / "asset"
    output.mkdir()
    bundling.build_asset(tmp_path, output)
    assert (output / "shop" / "handler.py").is_file()
    assert (output / "once" / "handler.py").is_file()
    for name in (".venv", "cdk.out", "node_modules"):
        assert not (output / name).exists(), name
    assert not (output / "build" / "out").exists()  # never copied into itself
