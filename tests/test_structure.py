"""The repository's structure (imports read with `ast`): the core never imports the tools,
imports run downwards, no circles."""

import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("benchmarks", "configs", "data", "evaluation", "formats", "model", "paper_tables",
            "tools", "training")
TOP_MODULES = ("train.py", "errors.py", "files.py", "crash_points.py")

# The core is what train.py and the checkpoint tool (evaluation.evaluate) reach; the tools and
# the benchmarks use it, and it never imports them.
CORE = ("train", "configs", "model", "training", "data", "evaluation", "formats", "errors",
        "files", "paper_tables", "crash_points")
TOOLS = ("tools", "benchmarks")
EVERYTHING = CORE + TOOLS

# Who may not import whom: (importer prefix, forbidden prefixes); the first rule that matches
# an importer decides.
FORBIDDEN = [
    # The roots everything imports.
    ("errors", EVERYTHING),
    ("paper_tables", EVERYTHING),
    ("crash_points", EVERYTHING),
    ("files", tuple(p for p in EVERYTHING if p != "crash_points")),
    # The exchanged file formats stand on data (languages, JSON Lines) alone.
    ("formats", tuple(p for p in EVERYTHING if p not in ("data", "formats", "errors", "files"))),
    ("tools.formats", ("train", "configs", "model", "training", "evaluation", "paper_tables",
                       "benchmarks", "tools.analysis", "tools.captioning", "tools.humaneval",
                       "tools.vifidel")),
    ("model", ("training", "evaluation", "data", "train", "configs") + TOOLS),
    # data/ in three parts: the release readers read files; the build reads the releases;
    # the training input reads the build (or the releases), and builds on request.
    ("data.releases", ("data.build", "data.pipeline", "data.eval_sets",
                       "training", "evaluation", "model", "train", "configs") + TOOLS),
    ("data.build", ("data.pipeline", "data.eval_sets", "training", "evaluation",
                    "model", "train", "configs") + TOOLS),
    ("data", ("training", "evaluation", "model", "train", "configs") + TOOLS),
    ("training", ("evaluation", "train", "configs") + TOOLS),
    ("evaluation.cider", ("evaluation.evaluators", "evaluation.evaluate", "evaluation.report",
                          "evaluation.results_folder", "training", "train", "model") + TOOLS),
    # Evaluators return numbers and predictions; the tool that asked writes the files.
    ("evaluation.evaluators", ("evaluation.evaluate", "evaluation.report",
                               "evaluation.results_folder", "train") + TOOLS),
    ("evaluation", ("train",) + TOOLS),
    ("configs", ("train",) + TOOLS),
    ("train", TOOLS),
    # The exported runner imports nothing of the project (it runs without it).
    ("tools.captioning.run_exported", EVERYTHING),
    # The tools use the core, each other only where said, never the trainer or benchmarks.
    ("tools.vifidel", ("tools.analysis", "tools.captioning", "tools.humaneval", "train",
                       "training", "benchmarks")),
    ("tools.analysis", ("tools.captioning", "tools.humaneval", "train", "training",
                        "benchmarks")),
    ("tools.captioning", ("tools.analysis", "tools.humaneval", "tools.vifidel", "evaluation",
                          "train", "benchmarks")),
    ("tools.humaneval", ("tools.captioning", "tools.vifidel", "train", "training", "model",
                         "benchmarks")),
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


def test_imports_run_downwards_without_circles():
    graph, bad = import_graph(), []
    for importer, targets in graph.items():
        for prefix, forbidden in FORBIDDEN:
            if not within(importer, prefix):
                continue
            bad += [f"{importer} imports {t}" for t in sorted(targets)
                    if any(within(t, f) for f in forbidden)]
            break  # The most specific rule (listed first) decides.
    assert not bad, "\n".join(bad)
    # A module's package __init__ importing its submodules is not a circle of the design.
    edges = {a: {b for b in bs if not within(a, b) and not within(b, a)} for a, bs in graph.items()}
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


def test_the_core_names_no_tool_module_to_import():
    """A module path in a string (importlib's, an evaluator table's "module:Class") is an import
    this file's graph cannot see: the core names no tools/ or benchmarks/ module in code."""
    bad = []
    for name, path in project_modules().items():
        if not any(within(name, prefix) for prefix in CORE):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
        bad += [f"{name}:{node.lineno}: {node.value!r}" for node in ast.walk(tree)
                if isinstance(node, ast.Constant) and isinstance(node.value, str)
                and id(node) not in docstrings and re.match(r"(tools|benchmarks)\.\w", node.value)]
    assert not bad, "\n".join(bad)


def test_the_core_has_no_command_line_but_train_and_the_checkpoint_tool():
    """The core is what they reach: every other command line (the CIDEr scorer, the report, the
    build, ...) is a tool, under tools/."""
    mains = sorted(name for name, path in project_modules().items()
                   if any(within(name, prefix) for prefix in CORE)
                   and (path.name == "__main__.py"
                        or '__name__ == "__main__"' in path.read_text(encoding="utf-8")))
    assert mains == ["evaluation.evaluate", "train"]
