"""The shape of the house: the library's rooms import only from the rooms above them, nothing imports in a circle,
the library knows nothing of Streamlit or the UI, a function-local import says why it is one, every module is on
the map (docs/ARCHITECTURE.md), every fragment and widget callback is the UI's guarded one; and app.py's own imports
load no torch."""

from __future__ import annotations

import ast
import re
import functools
from pathlib import Path

import pytest

from helpers.repo import ROOT, fresh_python

# The library's rooms, in the order docs/ARCHITECTURE.md gives: each may import only from the rooms before it.
ROOMS = ("settings", "i18n", "network", "tasks", "bundle", "analysis", "training", "store", "runs", "charts", "cli")
PACKAGES = ("transformer", "ui")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def sources() -> dict[str, Path]:
    return {module_name(p): p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))}


def imports(path: Path) -> list[tuple[str, ast.stmt, bool]]:
    """(module imported, the statement, whether it is inside a function) for every import outside an
    `if TYPE_CHECKING:` block; relative imports resolved."""
    tree = ast.parse(path.read_text())
    skipped = {id(n) for node in ast.walk(tree)
               if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test) for n in ast.walk(node)}
    local = {id(n) for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
             for n in ast.walk(node)}
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found += [(alias.name, node, id(node) in local) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join([*base, node.module] if node.module else base)
            found += [(f"{target}.{alias.name}" if f"{target}.{alias.name}" in sources() else target, node,
                       id(node) in local) for alias in node.names]
    return found


def internal_edges() -> dict[str, set[str]]:
    known = sources()
    return {name: {target for target, _, _ in imports(path) if target in known} for name, path in known.items()}


def room(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "transformer" and len(parts) > 1 else None


def test_the_library_never_imports_streamlit_or_the_ui():
    offenders = [(name, target) for name, path in sources().items() if name.startswith("transformer")
                 for target, _, _ in imports(path) if target.split(".")[0] in ("streamlit", "ui", "pages")]
    assert offenders == []


def test_each_room_imports_only_from_the_rooms_above_it():
    assert {room(name) for name in sources() if room(name)} == set(ROOMS) | {"__main__"}
    upward = [(name, target) for name, targets in internal_edges().items() for target in targets
              if room(name) in ROOMS and room(target) in ROOMS and ROOMS.index(room(target)) > ROOMS.index(room(name))]
    assert upward == []


def test_no_module_imports_in_a_circle():
    edges, state, cycles = internal_edges(), {}, []

    def visit(name: str, path: list[str]) -> None:
        state[name] = "open"
        for target in sorted(edges.get(name, ())):
            if state.get(target) == "open":
                cycles.append(path[path.index(target):] + [target])
            elif target not in state:
                visit(target, [*path, target])
        state[name] = "done"

    for name in sorted(edges):
        if name not in state:
            visit(name, [name])
    assert cycles == []


def test_a_function_local_import_says_why_it_is_one():
    """Only where it buys start-up time (or an optional package), with a comment on its line that says so."""
    unexplained = []
    for name, path in sources().items():
        lines = path.read_text().splitlines()
        for target, node, local in imports(path):
            if local and "function-local" not in lines[node.lineno - 1]:
                unexplained.append(f"{name}:{node.lineno} {target}")
    assert unexplained == []


@pytest.mark.parametrize("package", PACKAGES)
def test_every_module_is_on_the_map(package):
    """docs/ARCHITECTURE.md names every module of the library and the UI by its path."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    missing = [str(path.relative_to(ROOT)) for path in sorted((ROOT / package).rglob("*.py"))
               if path.name != "__init__.py" and str(path.relative_to(ROOT)) not in text]
    assert missing == []


@functools.cache
def ui_scripts() -> list[tuple[Path, ast.Module]]:
    """app.py, the UI's modules and the page scripts, each with its parsed tree."""
    paths = [ROOT / "app.py", *sorted((ROOT / "ui").rglob("*.py")), *sorted((ROOT / "pages").rglob("*.py"))]
    return [(path, ast.parse(path.read_text())) for path in paths]


def test_every_fragment_ends_an_unexpected_error_in_the_note():
    """A fragment's own runs are outside app.py's guard: every page and panel makes its fragments with
    `ui.failure.fragment`, never `st.fragment` itself."""
    bare = [f"{path.relative_to(ROOT)}:{node.lineno}" for path, tree in ui_scripts() if path.name != "failure.py"
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr == "fragment" and isinstance(node.value, ast.Name)
            and node.value.id == "st"]
    assert bare == []


def test_every_widget_callback_ends_an_unexpected_error_in_the_note():
    """Streamlit calls a widget's on_click / on_change, and a component's on_<event>_change, before the page's run,
    outside app.py's guard: every one is wrapped in `ui.failure.callback`, or given to `View.widget`, which wraps its
    own (or names no function)."""
    bare = [f"{path.relative_to(ROOT)}:{node.lineno} {keyword.arg}" for path, tree in ui_scripts()
            for node in ast.walk(tree) if isinstance(node, ast.Call)
            and not (isinstance(node.func, ast.Attribute) and node.func.attr == "widget")
            for keyword in node.keywords if re.fullmatch(r"on_click|on_change|on_\w+_change", keyword.arg or "")
            and not isinstance(keyword.value, ast.Constant)
            and not (isinstance(keyword.value, ast.Call) and getattr(keyword.value.func, "id", None) == "callback")]
    assert bare == []


def test_what_app_py_imports_before_its_first_page_loads_no_torch():
    """app.py's own imports (the page catalog with its titles, the preload, the warm-up) must leave torch alone: its
    import holds the server for a second, and the preload's element, sent before it, would wait behind it (the
    `transformer` package imported the network, and torch, with every submodule: the chart chunk was asked for a
    second later and a fresh server's first chart came 0.9 s later)."""
    tree = ast.parse((ROOT / "app.py").read_text())
    modules = [node.module for node in tree.body if isinstance(node, ast.ImportFrom)]
    assert fresh_python(f"import sys; import {', '.join(modules)}; print('torch' in sys.modules)").strip() == "False", \
        modules
