"""The one error hierarchy (errors.py): a single root, no duplicate classes, one error line."""

import ast
import builtins
import functools

import pytest

import errors
from tests import test_structure

BUILTIN_EXCEPTIONS = {name for name, value in vars(builtins).items()
                      if isinstance(value, type) and issubclass(value, BaseException)}


@functools.cache
def _classes():
    """(module, class name, [base names]) of every class in the repository's modules."""
    found = []
    for name, path in test_structure.project_modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                found.append((name, node.name, [ast.unparse(base).rpartition(".")[2]
                                                for base in node.bases]))
    return found


def test_only_errors_py_derives_from_a_builtin_exception():
    # Every other exception class derives from errors.Error's branches, so that a command
    # line catching errors.Error catches them all.
    rooted = [f"{module}.{cls}({', '.join(bases)})" for module, cls, bases in _classes()
              if module != "errors" and set(bases) & BUILTIN_EXCEPTIONS]
    assert not rooted, rooted


def test_no_error_class_is_defined_twice():
    names = [(cls, module) for module, cls, _ in _classes() if cls.endswith("Error")]
    by_name = {}
    for cls, module in names:
        by_name.setdefault(cls, []).append(module)
    assert {cls: modules for cls, modules in by_name.items() if len(modules) > 1} == {}
    assert by_name["InputError"] == ["errors"]


def test_the_branches_of_the_error_hierarchy():
    assert issubclass(errors.InputError, ValueError) and issubclass(errors.InputError, errors.Error)
    assert issubclass(errors.RunError, RuntimeError) and issubclass(errors.RunError, errors.Error)
    from data import jsonl
    from training import checkpointing, run_config
    assert issubclass(jsonl.FormatError, errors.InputError)
    assert issubclass(run_config.ConfigError, errors.InputError)
    assert issubclass(checkpointing.IncompatibleCheckpoint, errors.RunError)


def test_fail_prints_one_line_exiting_with_status_2(capsys):
    with pytest.raises(SystemExit) as info:
        errors.fail(errors.InputError("data.jsonl:3: not valid JSON"))
    assert info.value.code == 2 and str(info.value) == "data.jsonl:3: not valid JSON"
    assert capsys.readouterr().err == "error: data.jsonl:3: not valid JSON\n"
    assert errors.print_error(errors.RunError("x")) == 2


_RUN_MAIN = """
import os, signal, sys
import errors
def main(kind):
    if kind == "error":
        raise errors.InputError("bad.csv:3: no caption")
    if kind == "interrupt":
        raise KeyboardInterrupt
    for i in range(200_000):
        print("line", i)
    return 0
errors.run_main(main, sys.argv[1])
"""


@pytest.mark.parametrize("kind, status, stderr", [
    ("error", 2, "error: bad.csv:3: no caption\n"),
    ("interrupt", 130, "stopped (Ctrl-C)\n"),
    ("pipe", 0, ""),
])
def test_run_main_ends_a_command_line_in_one_line(tmp_path, kind, status, stderr):
    import subprocess
    import sys
    script = tmp_path / "cli.py"
    script.write_text(_RUN_MAIN)
    env = {"PYTHONPATH": str(test_structure.ROOT), "PATH": "/usr/bin:/bin"}
    # `| head -1`: the reader closes the pipe after one line.
    proc = subprocess.run(f"{sys.executable} {script} {kind} | head -1; exit ${{PIPESTATUS[0]}}",
                          shell=True, executable="/bin/bash", capture_output=True, text=True,
                          env=env, timeout=60)
    assert proc.returncode == status
    assert proc.stderr == stderr
    assert proc.stdout == ("line 0\n" if kind == "pipe" else "")


@pytest.mark.parametrize("argv, quiet", [(["tool"], True), (["tool", "--verbosity=1"], False)])
def test_quiet_native_logs_silences_tensorflow_unless_verbosity_is_asked(argv, quiet):
    import subprocess
    import sys
    script = (f"import errors; errors.quiet_native_logs({argv!r}); import os, tensorflow; "
              f"print(os.environ.get('TF_CPP_MIN_LOG_LEVEL'))")
    env = {"PYTHONPATH": str(test_structure.ROOT), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    if quiet:
        assert (proc.stdout, proc.stderr) == ("3\n", "")
    else:
        assert proc.stdout != "3\n"
