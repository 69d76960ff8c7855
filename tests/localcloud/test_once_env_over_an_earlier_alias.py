"""``eval \"$(once env)\"`` works in a shell that still holds the ``awsonce`` alias an earlier
``once env`` defined: the alias is removed before the function is defined, where bash would
expand it (https://www.gnu.org/software/bash/manual/html_node/Aliases.html). Proved by the
adversarial review of issue 42 (a syntax error, ``awsonce`` left on the old endpoint)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ONCE = str(Path(sys.executable).with_name("once"))
OLD_ALIAS = "alias awsonce='aws --endpoint-url http://127.0.0.1:4566'"


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_eval_once_env_in_a_terminal_that_evaluated_the_previous_one(tmp_path: Path) -> None:
    # An interactive shell expands aliases; -c with expand_aliases reads as it does.
    script = (
        "shopt -s expand_aliases\n"
        f"{OLD_ALIAS}\n"
        f'eval "$({ONCE} env --endpoint-url http://127.0.0.1:4577)"\n'
        "status=$?\n"
        "type awsonce\n"
        "exit $status\n"
    )
    run = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, f"eval failed (exit {run.returncode}):\n{run.stderr}"
    assert "awsonce is a function" in run.stdout and "4566" not in run.stdout, run.stdout
