"""The shape of the package (docs/ARCHITECTURE.md): stages that import only themselves and the stages below,
no import circle, no import of another module's private name, the pure model free of the edge's libraries.

The graph is read from the source with :mod:`ast` (every ``import`` statement, at the top of a file or inside a
function: a lazy import is still a dependency), so the test needs nothing imported.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "gpusim"

#: the stages, lowest first; a module belongs to the first stage with a pattern that matches it (a pattern ending
#: in ".*" matches a package's modules). Keep in step with docs/ARCHITECTURE.md.
STAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("foundation", ("gpusim.errors", "gpusim.units", "gpusim.checks", "gpusim.fsutil", "gpusim.diskcache", "gpusim.hardware",
                    "gpusim.hwdb", "gpusim.hwdb_data", "gpusim.params", "gpusim.strategy", "gpusim.profile",
                    "gpusim.topology", "gpusim.nccl_tests", "gpusim.workload", "gpusim.workload.*",
                    "gpusim.checkpoint_sizing", "gpusim.textable", "gpusim.optimizers", "gpusim.stats",
                    "gpusim.heap")),
    ("model", ("gpusim.model", "gpusim.model.*")),
    ("scenario", ("gpusim.scenario", "gpusim.layout", "gpusim.rules")),
    ("rows", ("gpusim.rows",)),
    ("advice", ("gpusim.diagnose",)),
    ("simulate", ("gpusim.simulation",)),
    ("bulk", ("gpusim.sweeps", "gpusim.search", "gpusim.planning", "gpusim.parallelism", "gpusim.comparison",
              "gpusim.measurement", "gpusim.validation", "gpusim.validation_llm", "gpusim.validation_comm",
              "gpusim.validation_gemm", "gpusim.validation_runs", "gpusim.validation_fsdp", "gpusim.validation_search", "gpusim.validation_ep", "gpusim.validation_attention",
              "gpusim.validation_grouped", "gpusim.validation_ab",
              "gpusim.calibration", "gpusim.track_record")),
    ("front", ("gpusim", "gpusim.__main__", "gpusim.cli", "gpusim.api", "gpusim.results", "gpusim.viz",
               "gpusim.commands", "gpusim.commands.*",
               "gpusim.app_pages", "gpusim.app_pages.*")),
)

#: inside the foundation's workload package: the noun first, then its builders, then the catalogue, then the package
WORKLOAD_ORDER = (("gpusim.workload.core", "gpusim.workload.ssm"), ("gpusim.workload.transformer",),
                  ("gpusim.workload.flops", "gpusim.workload.cnn", "gpusim.workload.rnn", "gpusim.workload.from_config",
                   "gpusim.workload.from_torch", "gpusim.workload.catalogue_schema"), ("gpusim.workload.catalogue",), ("gpusim.workload",))

#: what the pure model may import besides numpy and the standard library
MODEL_MAY_IMPORT = ("gpusim.model", "gpusim.params", "gpusim.strategy", "gpusim.units", "gpusim.errors")


def _modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        parts = list(p.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


MODULES = _modules()


def _imports() -> tuple[dict[str, set[str]], list[tuple[str, str, str]], dict[str, set[str]]]:
    """(module -> gpusim modules it imports, (module, target, private name) triples, module -> third-party tops)."""
    edges: dict[str, set[str]] = defaultdict(set)
    private: list[tuple[str, str, str]] = []
    external: dict[str, set[str]] = defaultdict(set)
    for mod, path in MODULES.items():
        pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] == "gpusim":
                        edges[mod].add(a.name)
                    else:
                        external[mod].add(a.name.split(".")[0])
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if target.split(".")[0] != "gpusim":
                    external[mod].add(target.split(".")[0])
                    continue
                for a in node.names:
                    sub = f"{target}.{a.name}"
                    if sub in MODULES:
                        edges[mod].add(sub)
                    else:
                        edges[mod].add(target)
                        if a.name.startswith("_") and not a.name.startswith("__"):
                            private.append((mod, target, a.name))
    return edges, private, external


EDGES, PRIVATE, EXTERNAL = _imports()


def _stage(mod: str) -> int:
    for i, (_, patterns) in enumerate(STAGES):
        for pat in patterns:
            if mod == pat or (pat.endswith(".*") and mod.startswith(pat[:-1])):
                return i
    raise AssertionError(f"{mod} is in no stage: place it in docs/ARCHITECTURE.md and in STAGES of {__file__}")


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), and modules importing themselves."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in MODULES:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in edges.get(v, ()):
                out.append(sorted(comp))

    for v in sorted(MODULES):
        if v not in index:
            visit(v)
    return out


def test_the_finders_see_the_package():
    # the test itself can fail: the graph holds the modules and imports it must hold
    assert {"gpusim.simulation", "gpusim.rows", "gpusim.rules", "gpusim.search", "gpusim.model.step"} <= set(MODULES)
    assert "gpusim.rows" in EDGES["gpusim.simulation"]
    assert "gpusim.model.step" in EDGES["gpusim.rows"]


def test_no_import_circle():
    assert _cycles(EDGES) == []


def test_the_circle_finder_finds_a_circle():
    assert _cycles({"gpusim.rows": {"gpusim.simulation"}, "gpusim.simulation": {"gpusim.rows"}}) == [
        ["gpusim.rows", "gpusim.simulation"]]


def test_every_module_has_a_stage():
    for mod in MODULES:
        _stage(mod)


def test_no_upward_import():
    bad = [f"{m} ({STAGES[_stage(m)][0]}) imports {t} ({STAGES[_stage(t)][0]})"
           for m, ts in EDGES.items() for t in ts if t in MODULES and _stage(t) > _stage(m)]
    assert bad == []


def test_the_workload_noun_does_not_import_its_builders():
    rank = {m: i for i, group in enumerate(WORKLOAD_ORDER) for m in group}
    bad = [f"{m} imports {t}" for m, ts in EDGES.items() if m in rank for t in ts if t in rank and rank[t] > rank[m]]
    assert bad == []
    assert not {t for t in EDGES["gpusim.workload.core"] if t.startswith("gpusim.workload")}


def test_no_private_name_crosses_a_module():
    assert PRIVATE == []


def test_the_model_is_pure():
    bad = {m: sorted(t for t in ts if not any(t == p or t.startswith(p + ".") for p in MODEL_MAY_IMPORT))
           for m, ts in EDGES.items() if m.startswith("gpusim.model")}
    assert {m: v for m, v in bad.items() if v} == {}
    # DESIGN.md: no pydantic, no I/O, no logging inside the model (numpy and scipy's special functions are fine)
    forbidden = {"pydantic", "yaml", "json", "logging", "os", "io", "pathlib", "pandas", "torch", "streamlit", "plotly",
                 "rich", "requests"}
    third = {m: sorted(EXTERNAL[m] & forbidden) for m in MODULES if m.startswith("gpusim.model")}
    assert {m: v for m, v in third.items() if v} == {}


def _gpusim_module_of(frame) -> str | None:
    f = frame.f_code.co_filename
    try:
        rel = Path(f).resolve().relative_to(ROOT)
    except ValueError:
        return None
    parts = list(rel.with_suffix("").parts)
    if not parts or parts[0] != "gpusim":
        return None
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _trace_calls(fn):
    """Run ``fn`` and return every (caller module, callee module) pair of gpusim code, the caller being the
    nearest gpusim frame below the callee (so a pydantic validator calling back counts from gpusim's caller)."""
    pairs: set[tuple[str, str]] = set()

    def prof(frame, event, arg):
        if event != "call":
            return
        callee = _gpusim_module_of(frame)
        if callee is None:
            return
        f = frame.f_back
        while f is not None:
            caller = _gpusim_module_of(f)
            if caller is not None:
                if caller != callee:
                    pairs.add((caller, callee))
                return
            f = f.f_back

    old = sys.getprofile()
    sys.setprofile(prof)
    try:
        fn()
    finally:
        sys.setprofile(old)
    return pairs


@pytest.mark.parametrize("what", ["search", "simulate"])
def test_a_scenario_goes_down_the_road(db, what):
    """Following one scenario through the layout search never enters simulation.py, and no call climbs a stage
    (the issue's "climbing back up twelve times")."""
    from gpusim.scenario import Scenario
    from gpusim.search import search_layouts
    from gpusim.simulation import simulate

    scn = Scenario(model="llama2-7b", gpu="h100-sxm", gpus=16, nodes=2, seq_len=4096, tp=2, pp=2, micro_batch=1,
                   global_batch=64, precision="bf16")
    fn = (lambda: search_layouts(scn, db=db)) if what == "search" else (lambda: simulate(scn, db=db))
    pairs = _trace_calls(fn)
    assert pairs, "the tracer saw no gpusim call"
    entered = {c for _, c in pairs}
    assert "gpusim.rows" in entered and any(c.startswith("gpusim.model") for c in entered)
    if what == "search":
        assert "gpusim.simulation" not in entered
    up = sorted(f"{a} -> {b}" for a, b in pairs if _stage(b) > _stage(a))
    assert up == []
