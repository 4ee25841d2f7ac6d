"""npsco's modules import each other down a list of layers (`LAYERS`), without a cycle; every module imports at module
level, or says why not.

The graph is read from the source with `ast`, every import statement counted wherever it stands: at module level
(`try`/`if` blocks included), under `if TYPE_CHECKING:` (an annotation ties two modules as much as a call does) and in
functions. An import gives an edge A -> B for the module B it names (`from B import x`: B.x where that is a module),
plus A -> each package above B that is not above A (importing npsco.methods.ipd runs npsco/methods/__init__.py
first). The `import_graph(where=("module",))` subset is what importing a module runs."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = "npsco"
EVERYWHERE = ("module", "type_checking", "function")
"""Where an import statement may stand: run on import, under `if TYPE_CHECKING:`, inside a function."""


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


def import_statements(body: list[ast.stmt], where: str = "module"):
    """(statement, where) for every import statement in `body`, at any depth: `where` is `module` for those that run
    when the module is imported, `type_checking` under `if TYPE_CHECKING:`, `function` inside a function."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, where
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield from import_statements(node.body, "function")
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from import_statements(node.body, "type_checking" if where == "module" else where)
            yield from import_statements(node.orelse, where)
        else:
            for field in ("body", "orelse", "finalbody", "handlers"):
                block = getattr(node, field, None)
                if isinstance(block, list):
                    yield from import_statements([b for b in block if isinstance(b, ast.AST)], where)


@dataclass(frozen=True)
class Edge:
    """One module importing another."""

    source: str
    target: str
    line: int
    where: str
    """`module`, `type_checking` or `function` (`import_statements`)."""


def module_edges(name: str, source: str, is_package: bool, modules: set[str]) -> list[Edge]:
    """The package's modules that the module `name` (its `source`) imports, one edge per statement and module."""
    here = name if is_package else name.rpartition(".")[0]
    above_self = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
    edges = []
    for node, where in import_statements(ast.parse(source).body):
        if isinstance(node, ast.Import):
            named = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            submodules = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in modules]
            named = submodules if len(submodules) == len(node.names) else [base, *submodules]
        targets = set()
        for module in named:
            parts = module.split(".")
            targets.add(module)
            targets.update(p for p in (".".join(parts[:i]) for i in range(1, len(parts))) if p not in above_self)
        edges += [Edge(name, t, node.lineno, where) for t in sorted(targets) if t in modules and t != name]
    return edges


def all_edges() -> list[Edge]:
    modules = module_names()
    return [
        edge
        for name, path in modules.items()
        for edge in module_edges(name, path.read_text(encoding="utf-8"), path.name == "__init__.py", set(modules))
    ]


def import_graph(where: tuple[str, ...] = EVERYWHERE) -> dict[str, set[str]]:
    """module -> the modules it imports by statements standing `where`."""
    graph: dict[str, set[str]] = {name: set() for name in module_names()}
    for edge in all_edges():
        if edge.where in where:
            graph[edge.source].add(edge.target)
    return graph


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


def test_find_cycle_finds_a_cycle_and_only_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set(), "d": {"a", "c"}}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"a"}}) == ["a", "a"]


def test_the_edges_count_every_import_and_say_where_it_stands():
    source = (
        "from typing import TYPE_CHECKING\nimport p.a\ntry:\n    from p.b import x\nexcept ImportError:\n    pass\n"
        "if TYPE_CHECKING:\n    from p.c import Y\nclass K:\n    def f(self):\n        from p import d  # lazy\n"
        "from p import e, f\n"
    )
    modules = {"p", "p.a", "p.b", "p.c", "p.d", "p.e", "p.f", "p.q"}
    edges = {(e.target, e.line, e.where) for e in module_edges("p.q", source, False, modules)}
    assert edges == {
        ("p.a", 2, "module"),
        ("p.b", 4, "module"),
        ("p.c", 8, "type_checking"),
        ("p.d", 11, "function"),
        ("p.e", 12, "module"),
        ("p.f", 12, "module"),
    }
    # a package above the target runs first, unless it is above the importing module too; naming it counts
    assert {e.target for e in module_edges("r.q", "import p.a\nimport r\n", False, modules | {"r", "r.q"})} == {
        "p",
        "p.a",
        "r",
    }


def test_the_graph_reads_npsco_s_imports():
    graph, running = import_graph(), import_graph(where=("module",))
    assert "npsco.ppo.trainer" in running["npsco.ppo.train"]
    assert "npsco.methods" in running["npsco.grid"]  # the registry's package runs first
    assert "npsco.ppo.learner" in graph["npsco.ppo.hooks"]
    assert "npsco.ppo.learner" not in running["npsco.ppo.hooks"]  # under `if TYPE_CHECKING:`
    assert "npsco.evaluation.evaluate" in graph["npsco.cli"]
    assert "npsco.evaluation" not in running["npsco.cli"]  # inside a command's function


def test_no_cycle_counting_every_import():
    """Not at import time, nor through an annotation under `if TYPE_CHECKING:`, nor through a function's import."""
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
            "npsco.version",
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
            "npsco.seeds",
            "npsco.parallel",
        ),
    ),
    ("envs", ("npsco.envs",)),
    ("policy", ("npsco.forward", "npsco.policy")),
    ("episodes", ("npsco.episodes",)),
    ("novelty", ("npsco.novelty",)),
    ("ppo", ("npsco.ppo",)),
    ("methods", ("npsco.methods",)),
    (
        "runs",
        (
            "npsco.settings",
            "npsco.manifest",
            "npsco.population_config",
            "npsco.options",
            "npsco.population_jobs",
            "npsco.population",
            "npsco.grid",
            "npsco.sweep",
            "npsco.training",
        ),
    ),
    ("evaluation", ("npsco.evaluation",)),
    ("analysis", ("npsco.evaluation.scoring", "npsco.evaluation.evaluate")),
    ("report", ("npsco.report",)),
    ("importers", ("npsco.importers", "npsco.export")),
    ("commands", ("npsco.experiment", "npsco.api", "npsco.cli", "npsco.cli_parser", "npsco.cli_config")),
]
"""npsco's layers, lowest first, each a list of module prefixes (the longest prefix naming a module decides its layer):
a module imports only modules of its own layer or below, by any import statement. The package `npsco` itself is the
public API, above them all."""


def layer_of(module: str) -> int:
    """The index in `LAYERS` of the longest prefix naming `module` (`len(LAYERS)` for the package `npsco`)."""
    if module == PACKAGE:
        return len(LAYERS)
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


def layer_name(module: str) -> str:
    return "api" if module == PACKAGE else LAYERS[layer_of(module)][0]


WHERE = {"module": "", "type_checking": " (under TYPE_CHECKING)", "function": " (in a function)"}


def upward(edges: list[Edge]) -> list[str]:
    """The edges that run up the layers, each said as `file:line: A (layer) imports B (higher layer)`."""
    modules = module_names()
    return [
        f"{modules[e.source].relative_to(SRC)}:{e.line}: {e.source} ({layer_name(e.source)}) imports {e.target} "
        f"({layer_name(e.target)}), a higher layer{WHERE[e.where]}"
        for e in edges
        if layer_of(e.target) > layer_of(e.source)
    ]


def test_every_module_is_in_a_layer_and_no_import_runs_up():
    for module in module_names():
        layer_of(module)
    bad = upward(all_edges())
    assert bad == [], "imports that run up the layers (LAYERS, lowest first):\n" + "\n".join(bad)


def test_the_layers_catch_an_upward_import_wherever_it_stands():
    assert layer_of("npsco.ppo.trainer") < layer_of("npsco.methods.ipd") < layer_of("npsco.population")
    assert layer_of("npsco.episodes") < layer_of("npsco.novelty.threshold") < layer_of("npsco.evaluation")
    assert layer_of("npsco.evaluation") < layer_of("npsco.evaluation.evaluate")
    assert layer_of("npsco.parallel") < layer_of("npsco.methods.registry")
    modules = set(module_names())
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from npsco.ppo.trainer import Trainer\n"
    assert upward(module_edges("npsco.policy", source, False, modules)) == [
        f"npsco/policy.py:3: npsco.policy (policy) imports {m} (ppo), a higher layer (under TYPE_CHECKING)"
        for m in ("npsco.ppo", "npsco.ppo.trainer")
    ]
    assert upward(module_edges("npsco.evaluation.rows", "import npsco\n", False, modules)) == [
        "npsco/evaluation/rows.py:1: npsco.evaluation.rows (evaluation) imports npsco (api), a higher layer"
    ]


def test_the_ppo_core_and_the_ground_floor_import_no_method():
    graph = import_graph()
    low = [n for n in graph if layer_of(n) < layer_of("npsco.methods")]
    assert "npsco.ppo.trainer" in low and "npsco.tasks" in low and "npsco.parallel" in low
    reached = {t for n in low for t in graph[n]}
    assert not any(t.startswith("npsco.methods") for t in reached)


def test_training_imports_no_analysis():
    """Training runs episodes (`npsco.episodes`), not the evaluation of runs (scipy, numba)."""
    graph = import_graph()
    for module in ("npsco.ppo.trainer", "npsco.novelty.threshold", "npsco.population", "npsco.population_jobs"):
        assert "npsco.episodes" in graph[module]
        assert not any(t.startswith("npsco.evaluation") for t in graph[module]), module
