"""The proof runs the example app of the checkout it lives in (the wheel ships neither), and
refuses clearly to run another ``payments`` in the example's place."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from oncecli.errors import CliError
from proof import errors, example
from proof.chaos import command
from proof.demo.__main__ import build_parser as demo_parser

ROOT = Path(__file__).resolve().parents[3]


def test_the_example_is_the_checkouts_own():
    assert example.ROOT == ROOT
    assert (example.FUNCTIONS / example.PACKAGE / "handler.py").is_file()


def test_require_puts_the_checkouts_functions_on_the_path_once(monkeypatch):
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(ROOT / "functions")])
    assert example.require() == ROOT / "functions"
    assert example.require() == ROOT / "functions"
    assert sys.path.count(str(ROOT / "functions")) == 1
    # Appended: what is installed comes first, the example is found after it.
    assert sys.path[-1] == str(ROOT / "functions")
    from payments.ledger import ENTRY_PREFIX

    assert ENTRY_PREFIX


def test_another_payments_first_on_the_path_is_refused(monkeypatch, tmp_path):
    team = tmp_path / "team"
    (team / "payments").mkdir(parents=True)
    (team / "payments" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(team))
    for name in [n for n in sys.modules if n == "payments" or n.startswith("payments.")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(errors.ExampleShadowed, match="another 'payments' comes first") as caught:
        example.require()
    assert isinstance(caught.value, CliError)


@pytest.mark.parametrize("error", [errors.ExampleShadowed, errors.HarnessFailed])
def test_the_proofs_exit_codes_are_their_own_and_its_commands_list_them(error):
    commands = [cls for cls in CliError.__subclasses__() if cls.__module__ == "oncecli.errors"]
    assert error.exit_code not in {cls.exit_code for cls in commands}
    assert f"  {error.exit_code:<4} {error.meaning}" in command.EPILOG


def test_the_demo_lists_its_exit_codes():
    shown = demo_parser().format_help()
    assert f"  {errors.ExampleShadowed.exit_code:<4} " in shown
    assert errors.DemoFailed.meaning.split(",")[0] in shown.replace("\n", " ")
