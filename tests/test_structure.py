"""The repository's structure: imports run downwards only, and no module imports in a circle.

Reads every module's imports with `ast` (nothing is imported), so the test is fast and sees
imports inside functions too.
"""

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("benchmarks", "captioning", "configs", "data", "evaluation", "formats", "humaneval",
            "model", "paper_tables", "training")
TOP_MODULES = ("train.py", "errors.py", "files.py")

# Who may not import whom: (importer prefix, forbidden prefixes).
EVERYTHING = ("benchmarks", "captioning", "configs", "data", "evaluation", "formats",
              "humaneval", "model", "training", "train")
FORBIDDEN = [
    # The error hierarchy is the root everything imports.
    ("errors", EVERYTHING),
    ("paper_tables", EVERYTHING + ("errors", "files")),
    ("files", EVERYTHING + ("errors", "paper_tables")),
    # The exchanged file formats stand on data (languages, JSON Lines) alone.
    ("formats", tuple(p for p in EVERYTHING if p not in ("data", "formats"))),
    ("model", ("training", "evaluation", "humaneval", "data", "train", "benchmarks",
               "captioning")),
    # data/ in three parts: the release readers read files; the build reads the releases;
    # the training input reads the build (or the releases), and builds on request.
    ("data.releases", ("data.build", "data.pipeline", "data.eval_sets", "data.demo",
                       "training", "evaluation", "humaneval", "model", "train", "benchmarks",
                       "captioning")),
    ("data.build", ("data.pipeline", "data.eval_sets", "data.demo", "training", "evaluation",
                    "humaneval", "model", "train", "benchmarks", "captioning")),
    ("data", ("training", "evaluation", "humaneval", "model", "train", "benchmarks",
              "captioning")),
    ("training", ("evaluation", "humaneval", "train", "benchmarks", "captioning")),
    ("evaluation.cider", ("evaluation.evaluators", "evaluation.analysis", "evaluation.evaluate",
                          "evaluation.vifidel", "training", "humaneval", "train", "model")),
    ("evaluation.vifidel", ("evaluation.evaluators", "evaluation.analysis",
                            "evaluation.evaluate", "training", "humaneval", "train", "model")),
    ("evaluation.analysis", ("evaluation.evaluators", "evaluation.evaluate", "training",
                             "humaneval", "train", "model")),
    ("evaluation.evaluators", ("evaluation.evaluate", "humaneval", "train")),
    ("evaluation", ("humaneval", "train", "benchmarks", "captioning")),
    ("humaneval", ("training", "train", "model", "benchmarks", "captioning")),
    # Using a trained model: the model, its data handling and the checkpoints, nothing of
    # the evaluators or the trainer (the exported runner imports nothing at all).
    ("captioning.run_exported", EVERYTHING + ("errors",)),
    ("captioning", ("evaluation", "humaneval", "train", "benchmarks")),
    ("configs", ("train", "benchmarks", "humaneval", "captioning")),
]


def module_name(path):
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def project_modules():
    paths = [ROOT / name for name in TOP_MODULES]
    for package in PACKAGES:
        paths += sorted((ROOT / package).rglob("*.py"))
    return {module_name(p): p for p in paths}


def imports_of(path, name, known):
    """The project modules `path` imports (absolute and relative, at any depth)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_graph():
    known = project_modules()
    return {name: imports_of(path, name, known) for name, path in known.items()}


def within(name, prefix):
    return name == prefix or name.startswith(prefix + ".")


def test_imports_run_downwards():
    bad = []
    for importer, targets in import_graph().items():
        for prefix, forbidden in FORBIDDEN:
            if not within(importer, prefix):
                continue
            bad += [f"{importer} imports {t}" for t in sorted(targets)
                    if any(within(t, f) for f in forbidden)]
            break  # The most specific rule (listed first) decides.
    assert not bad, "\n".join(bad)


def test_no_import_circles():
    graph = import_graph()
    # A module's package __init__ importing its submodules is not a circle of the design.
    edges = {a: {b for b in bs if not within(a, b) and not within(b, a)}
             for a, bs in graph.items()}
    circles, state = [], {}

    def visit(node, stack):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                circles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node, [])
    assert not circles, "\n".join(circles)


def test_no_module_shadows_a_builtin_or_standard_module():
    import builtins
    import sys
    reserved = set(sys.stdlib_module_names) | set(dir(builtins))
    names = {part for name in project_modules() for part in name.split(".")}
    assert not names & reserved, sorted(names & reserved)
