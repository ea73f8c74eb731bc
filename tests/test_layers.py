"""The layers import in one direction: every import in the package (lazy ones and those under TYPE_CHECKING included)
is read from the source and checked against the layer order of docs/architecture.md."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = "airflow_provider_deltalite"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE

# Bottom to top. A module may import modules of its own layer and of the layers below it, never above.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("version", "engine.errors", "engine.crash_points")),
    ("storage", ("engine.storage",)),
    ("engine", ("engine",)),
    ("maintenance", ("maintenance",)),
    ("executors", ("executors",)),
    ("public API", ("table", "cli", "demo", "report")),
    ("jobs", ("jobs",)),
    ("airflow", ("hooks", "operators", "sensors", "triggers")),
    ("package root", ("", "__main__")),
]
# Layers that must run without a JVM, Airflow or a Spark client installed.
NO_FRAMEWORKS = ("base", "storage", "engine", "maintenance")
FRAMEWORKS = ("airflow", "pyspark", "py4j")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def layer_of(name: str) -> int:
    """The index in LAYERS of a module named relative to the package ("" is the package itself)."""
    best, best_len = None, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            matches = name == prefix or (prefix != "" and name.startswith(prefix + "."))
            if matches and len(prefix) > best_len:
                best, best_len = index, len(prefix)
    if best is None:
        raise AssertionError(f"module {name!r} belongs to no layer: add it to LAYERS and docs/architecture.md")
    return best


def imports_of(path: Path) -> list[tuple[int, str]]:
    """Every module ``path`` imports, absolute names, with the line (relative imports resolved)."""
    return imports_in(path.read_text(encoding="utf-8"), module_name(path), path.name == "__init__.py")


def imports_in(source: str, here: str, is_package: bool) -> list[tuple[int, str]]:
    """Every module the source of module ``here`` imports, wherever the import stands (functions, TYPE_CHECKING)."""
    package_parts = (here.split(".") if is_package else here.split(".")[:-1]) if here else []
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package_parts[: len(package_parts) - node.level + 1]
                module = ".".join(p for p in (PACKAGE, *base, node.module or "") if p)
            else:
                module = node.module or ""
            # `from package import module` depends on the module, `from module import name` on the module
            submodules = [f"{module}.{a.name}" for a in node.names if _internal(f"{module}.{a.name}") is not None]
            found.extend((node.lineno, name) for name in submodules or [module])
    return found


def package_modules() -> list[Path]:
    return sorted(ROOT.rglob("*.py"))


def _internal(name: str) -> str | None:
    """``airflow_provider_deltalite.x.y`` -> ``x.y`` if such a module or package exists, else None."""
    if name != PACKAGE and not name.startswith(PACKAGE + "."):
        return None
    rel = name[len(PACKAGE) + 1 :] if name != PACKAGE else ""
    candidate = ROOT.joinpath(*rel.split(".")) if rel else ROOT
    if candidate.with_suffix(".py").is_file() or (candidate / "__init__.py").is_file():
        return rel
    return None  # a name imported from a module (`from x import func`), not a module


def upward_imports(sources: list[tuple[str, str, bool]] | None = None) -> list[str]:
    """``path:line: <layer> imports <layer> (module)`` for every upward import of the package (or of ``sources``:
    ``(module name, source, is_package)``)."""
    if sources is None:
        sources = [(module_name(p), p.read_text(encoding="utf-8"), p.name == "__init__.py") for p in package_modules()]
    problems = []
    for here, source, is_package in sources:
        mine = layer_of(here)
        for line, imported in imports_in(source, here, is_package):
            target = _internal(imported)
            if target is None:
                continue
            theirs = layer_of(target)
            if theirs > mine:
                problems.append(f"{PACKAGE}.{here}:{line}: {LAYERS[mine][0]} imports {LAYERS[theirs][0]} ({imported})")
    return problems


def test_no_module_imports_a_layer_above_its_own() -> None:
    assert upward_imports() == []


def test_the_engine_and_maintenance_import_neither_airflow_nor_spark() -> None:
    problems = []
    for path in package_modules():
        if LAYERS[layer_of(module_name(path))][0] not in NO_FRAMEWORKS:
            continue
        for line, imported in imports_of(path):
            if imported.split(".")[0] in FRAMEWORKS:
                problems.append(f"{path.relative_to(ROOT.parent)}:{line}: {imported}")
    assert problems == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from airflow_provider_deltalite.maintenance.optimize import optimize\n", ["engine imports maintenance"]),
        ("def f():\n    from airflow_provider_deltalite.table import DeltaTable\n", ["engine imports public API"]),
        (
            "if TYPE_CHECKING:\n    from airflow_provider_deltalite import operators\n",
            ["engine imports airflow"],
        ),
        ("from ..maintenance import options\n", ["engine imports maintenance"]),
        ("from airflow_provider_deltalite.engine.errors import DeltaLiteError\n", []),
    ],
)
def test_the_check_sees_lazy_type_only_and_relative_imports(source: str, expected: list[str]) -> None:
    # the walk over a module of the engine that holds the import: it reports exactly the upward one
    found = [p.split(": ", 1)[1].split(" (")[0] for p in upward_imports([("engine.probe", source, False)])]
    assert found == expected


def test_every_module_has_a_layer() -> None:
    assert {LAYERS[layer_of(module_name(p))][0] for p in package_modules()} == {name for name, _ in LAYERS}


def test_the_order_is_the_one_docs_architecture_shows() -> None:
    # the diagram's first column, top to bottom: each layer's name starts a line (continuation lines start blank)
    text = (ROOT.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    diagram = text.split("```")[1]
    names = {name for name, _ in LAYERS}
    shown = [
        next(name for name in names if line[1:].startswith(name + " "))
        for line in diagram.splitlines()
        if line.startswith(" ") and any(line[1:].startswith(name + " ") for name in names)
    ]
    assert shown == [name for name, _ in reversed(LAYERS)]
