"""The runtime's size rules, read from its source with ``ast``: no class over about 300 lines,
no function over 6 parameters (issue 44).

A class past that size does several jobs (the batch processor was a scheduler, two modes'
runners and the invocation's plumbing in 843 lines); a function past that many parameters
is threading what one object should hold (``_quarantined`` took nine). The runtime is
``functions/once`` without its testing kit (``once.testing``). ``self`` and ``cls`` are not
counted; keyword-only parameters are.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
RUNTIME = ROOT / "functions" / "once"

MAX_CLASS_LINES = 300
MAX_PARAMETERS = 6

#: Past the parameter rule, and why. A team's configuration, given as keyword arguments:
#: ``make_handler``'s are the public face (docs/handler.md), and ``Handler`` takes them as
#: they are. The quarantine's request names its fields one by one; it may shrink,
#: never grow.
PARAMETERS_ALLOWED = {
    "handler.py:make_handler": 17,
    "handler.py:Handler.__init__": 14,
    "quarantine.py:Quarantine._request": 7,
}


def _runtime() -> list[tuple[str, ast.Module]]:
    return [
        (path.relative_to(RUNTIME).as_posix(), ast.parse(path.read_text(), filename=str(path)))
        for path in sorted(RUNTIME.rglob("*.py"))
        if "testing" not in path.relative_to(RUNTIME).parts
    ]


def _classes() -> dict[str, int]:
    """Each class of the runtime and its length in lines, decorators included."""
    return {
        f"{name}:{node.name}": node.end_lineno
        - min([node.lineno, *(d.lineno for d in node.decorator_list)])
        + 1
        for name, tree in _runtime()
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and node.end_lineno is not None
    }


def _functions() -> dict[str, int]:
    """Each function of the runtime (``module:Class.method`` or ``module:function``) and how
    many parameters it takes, ``self`` and ``cls`` aside."""
    found: dict[str, int] = {}

    def visit(module: str, node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(module, child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                args = child.args
                named = [*args.posonlyargs, *args.args, *args.kwonlyargs]
                extra = [a for a in (args.vararg, args.kwarg) if a is not None]
                count = len([a for a in named if a.arg not in ("self", "cls")]) + len(extra)
                found[f"{module}:{prefix}{child.name}"] = count
                visit(module, child, f"{prefix}{child.name}.")
            else:
                visit(module, child, prefix)

    for module, tree in _runtime():
        visit(module, tree, "")
    return found


def test_the_reader_sees_the_runtime() -> None:
    classes, functions = _classes(), _functions()
    assert "processor.py:BatchProcessor" in classes
    assert "store.py:RecordStore" in classes
    assert functions["invocation.py:Invocation.quarantined"] == 3
    assert not any(name.startswith("testing/") for name in classes)


def test_no_class_of_the_runtime_is_over_about_300_lines() -> None:
    long = {name: lines for name, lines in _classes().items() if lines > MAX_CLASS_LINES}
    assert not long, f"classes over {MAX_CLASS_LINES} lines: split them by job: {long}"


def test_no_function_of_the_runtime_takes_over_6_parameters() -> None:
    over = {
        name: count
        for name, count in _functions().items()
        if count > PARAMETERS_ALLOWED.get(name, MAX_PARAMETERS)
    }
    assert not over, f"functions over {MAX_PARAMETERS} parameters: give them an object: {over}"


def test_every_function_allowed_more_parameters_still_needs_it() -> None:
    """The allowance names functions that exist and are still past the rule: one that shrank
    leaves the list."""
    functions = _functions()
    stale = {
        name
        for name in PARAMETERS_ALLOWED
        if name not in functions or functions[name] <= MAX_PARAMETERS
    }
    assert not stale, f"no longer past the rule: take them off PARAMETERS_ALLOWED: {stale}"
