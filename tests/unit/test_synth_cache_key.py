"""The local cloud's synth cache is keyed by every input of the template: a change to the
Lambda asset's pinned dependencies (``once_cdk/requirements-lambda.txt``) synthesizes again
instead of deploying a stale asset."""

from __future__ import annotations

from pathlib import Path

import pytest

from oncecli.localcloud import template


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, text in {
        "app.py": "app\n",
        "cdk.json": "{}\n",
        "requirements-lambda.txt": "-r once_cdk/requirements-lambda.txt\n",
        "once_cdk/__init__.py": "",
        "once_cdk/requirements-lambda.txt": "jmespath==1.1.0\n",
        "infra/__init__.py": "",
        "functions/once/__init__.py": "",
    }.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.setattr(template, "ROOT", tmp_path)
    return tmp_path


def test_a_new_pin_of_the_lambda_dependencies_changes_the_synth_cache_key(project: Path) -> None:
    before = template._inputs_digest({"stage": "local"})
    (project / "once_cdk/requirements-lambda.txt").write_text("jmespath==1.0.1\n")
    assert template._inputs_digest({"stage": "local"}) != before


def test_compiled_caches_do_not_change_the_synth_cache_key(project: Path) -> None:
    before = template._inputs_digest({"stage": "local"})
    (project / "once_cdk/__pycache__").mkdir()
    (project / "once_cdk/__pycache__/x.cpython-311.pyc").write_bytes(b"\0")
    assert template._inputs_digest({"stage": "local"}) == before
