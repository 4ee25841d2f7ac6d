"""The import graph of npsco's modules has no cycle, and every module imports at module level, or says why not.

The graph is read from the source with `ast`: an edge A -> B for every `import B` / `from B import x` that runs when
A is imported (module level, including `try`/`if` blocks, excluding `if TYPE_CHECKING:`), plus A -> each package
above B that is not above A (importing npsco.methods.ipd runs npsco/methods/__init__.py first)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = "npsco"


def module_names() -> dict[str, Path]:
    """Every module of the package: dotted name -> file (a package is its __init__.py)."""
    out = {}
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _executed_statements(body: list[ast.stmt]):
    """The statements that run when the module is imported: not those in functions or `if TYPE_CHECKING:`."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _executed_statements(node.body)
            yield from _executed_statements(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                yield from _executed_statements(block)
        elif isinstance(node, (ast.With, ast.ClassDef)):
            yield from _executed_statements(node.body)
        else:
            yield node


def imported_modules(name: str, path: Path, modules: set[str]) -> set[str]:
    """The package's modules that importing `name` imports directly (see the module docstring)."""
    is_package = path.name == "__init__.py"
    here = name if is_package else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in _executed_statements(ast.parse(path.read_text(encoding="utf-8")).body):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            targets.add(base)
            targets.update(f"{base}.{alias.name}" for alias in node.names)
    above_self = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
    out = set()
    for target in targets:
        parts = target.split(".")
        for i in range(1, len(parts) + 1):  # the target and the packages above it
            module = ".".join(parts[:i])
            if module in modules and module != name and module not in above_self:
                out.add(module)
    return out


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of `graph` as [a, b, ..., a], or None if it is acyclic (depth-first search)."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def import_graph() -> dict[str, set[str]]:
    modules = module_names()
    return {name: imported_modules(name, path, set(modules)) for name, path in modules.items()}


def test_find_cycle_finds_a_cycle_and_only_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set(), "d": {"a", "c"}}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"a"}}) == ["a", "a"]


def test_the_graph_reads_module_level_imports_only():
    graph = import_graph()
    assert "npsco.ppo.trainer" in graph["npsco.ppo.train"]
    assert "npsco.methods" in graph["npsco.grid"]  # the registry's package runs first
    assert "npsco.ppo.learner" not in graph["npsco.ppo.hooks"]  # under `if TYPE_CHECKING:`
    assert "npsco.evaluation" not in graph["npsco.cli"]  # inside a command's function


def test_npsco_modules_import_each_other_without_a_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, f"import cycle: {' -> '.join(cycle)}"


def function_imports(source: str) -> list[ast.Import | ast.ImportFrom]:
    """The import statements inside functions (methods and nested functions included), in source order."""
    found = {
        node.lineno: node
        for fn in ast.walk(ast.parse(source))
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
        for node in ast.walk(fn)
        if isinstance(node, (ast.Import, ast.ImportFrom))
    }
    return [found[line] for line in sorted(found)]


def test_function_imports_are_found_in_methods_and_nested_functions():
    source = (
        "import os\nclass A:\n    def f(self):\n        def g():\n            import json\n"
        "        from sys import argv\n"
    )
    assert [node.lineno for node in function_imports(source)] == [5, 6]


@pytest.mark.parametrize("path", sorted((SRC / PACKAGE).rglob("*.py")), ids=lambda p: str(p.relative_to(SRC)))
def test_modules_import_at_module_level_or_say_why(path):
    lines = path.read_text(encoding="utf-8").splitlines()
    for node in function_imports("\n".join(lines)):
        assert "#" in lines[node.lineno - 1], (
            f"{path.relative_to(SRC)}:{node.lineno}: an import in a function needs "
            "a comment saying why it is not at module level (e.g. `# lazy: torch`)"
        )


def loaded_after(statement: str, modules: tuple[str, ...]) -> list[str]:
    """Which of `modules` a fresh interpreter has loaded after running `statement`."""
    import subprocess
    import sys

    code = f"import sys; {statement}; print(sorted(m for m in {modules!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return ast.literal_eval(out)


def test_the_report_command_loads_no_torch_and_the_sweep_no_report():
    # `npsco report` lists a sweep's runs and reads them without the training code; `npsco sweep` trains without the
    # report's plotting and statistics libraries
    report = "from npsco.manifest import population_dirs; import npsco.report.build"
    assert loaded_after(report, ("torch", "npsco.ppo.trainer")) == []
    assert loaded_after("import npsco.sweep", ("matplotlib", "npsco.report.build")) == []


# ------------------------------------------------------------------------------------------------------ the layers
LAYERS = [
    (
        "core",
        (
            "npsco.errors",
            "npsco.layout",
            "npsco.limits",
            "npsco.io",
            "npsco.paths",
            "npsco.filecheck",
            "npsco.locks",
            "npsco.task_ids",
            "npsco.fields",
            "npsco.tasks",
            "npsco.logger",
            "npsco.stats",
            "npsco.compat",
            "npsco.selection",
        ),
    ),
    ("envs", ("npsco.envs",)),
    ("policy", ("npsco.policy",)),
    ("episodes", ("npsco.evaluation.episodes",)),  # running a policy; the package's __init__ exposes only this
    ("novelty", ("npsco.novelty",)),
    ("ppo", ("npsco.ppo",)),
    ("methods", ("npsco.methods",)),
    (
        "runs",
        (
            "npsco.settings",
            "npsco.manifest",
            "npsco.population_config",
            "npsco.population_jobs",
            "npsco.population",
            "npsco.parallel",
            "npsco.grid",
            "npsco.sweep",
            "npsco.training",
        ),
    ),
    (
        "evaluation",
        ("npsco.evaluation.runs", "npsco.evaluation.measure", "npsco.evaluation.rows", "npsco.evaluation.descriptors"),
    ),
    ("analysis", ("npsco.evaluation.scoring", "npsco.evaluation.evaluate")),
    ("report", ("npsco.report",)),
    ("importers", ("npsco.importers", "npsco.export")),
    ("commands", ("npsco.experiment", "npsco.api", "npsco.cli", "npsco.cli_parser", "npsco.cli_config")),
]
"""npsco's layers, lowest first: a module imports only modules of its own layer or below (the package `npsco` itself
is the public API, above them all; `npsco.evaluation`'s __init__ belongs with the episodes it re-exports)."""


def layer_of(module: str) -> int:
    """The index in `LAYERS` of the longest prefix naming `module`."""
    if module == "npsco":
        return len(LAYERS)
    if module == "npsco.evaluation":
        return next(i for i, (name, _) in enumerate(LAYERS) if name == "episodes")
    best = max(
        (
            (len(p), i)
            for i, (_, prefixes) in enumerate(LAYERS)
            for p in prefixes
            if module == p or module.startswith(p + ".")
        ),
        default=None,
    )
    assert best is not None, f"{module} is in no layer of LAYERS: add it"
    return best[1]


def all_imports(name: str, path: Path, modules: set[str]) -> set[str]:
    """The package's modules that `name` imports anywhere: at module level (`imported_modules`) or in a function."""
    out = imported_modules(name, path, modules)
    here = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in function_imports(path.read_text(encoding="utf-8")):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        out |= {t for t in targets if t in modules and t != name}
    return out


def test_every_module_is_in_a_layer_and_imports_point_down():
    modules = module_names()

    def named(module: str) -> str:
        return f"{module} ({'api' if module == 'npsco' else LAYERS[layer_of(module)][0]})"

    upward = [
        f"{named(name)} -> {named(target)}"
        for name, path in modules.items()
        for target in sorted(all_imports(name, path, set(modules)))
        if target != "npsco" and layer_of(target) > layer_of(name)
    ]
    assert upward == []


def test_no_cycle_even_through_imports_inside_functions():
    modules = module_names()
    graph = {name: all_imports(name, path, set(modules)) - {"npsco"} for name, path in modules.items()}
    cycle = find_cycle(graph)
    assert cycle is None, f"import cycle: {' -> '.join(cycle)}"


def test_the_ppo_core_and_the_ground_floor_import_no_method():
    modules = module_names()
    low = [n for n in modules if layer_of(n) < layer_of("npsco.methods") and n != "npsco"]
    assert "npsco.ppo.trainer" in low and "npsco.tasks" in low
    reached = {t for n in low for t in all_imports(n, modules[n], set(modules))}
    assert not any(t.startswith("npsco.methods") for t in reached)


def test_the_layers_catch_an_upward_import():
    assert layer_of("npsco.ppo.trainer") < layer_of("npsco.methods.ipd") < layer_of("npsco.population")
    assert layer_of("npsco.evaluation") < layer_of("npsco.novelty.threshold") < layer_of("npsco.evaluation.evaluate")
