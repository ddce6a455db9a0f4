"""The command and Python blocks of README.md and docs/*.md run as written, or say why not.

Every command or Python block (tests/doc_blocks.py) runs here, on the tiny trained run and demo
data (`SUBSTITUTIONS`), or carries a `<!-- not run here: REASON -->` marker. Command lines must
exit 0 and write their `--out`; Python blocks run as `__main__` and must not raise."""

import contextlib
import logging
import os
import re
import runpy
import select
import shlex
import signal
import subprocess
import sys
import urllib.error
import urllib.request
import warnings

import jax
import pytest
from absl import logging as absl_logging

from tests import doc_blocks, tiny

REPO = tiny.REPO

# The folder a block runs in (`working_folder`), laid out as the repository after `make demo`:
# `demo_data/` (a link to the tiny demo data, tests/tiny.write_demo), `runs/demo/` (a copy of
# the four-step tiny run, checkpoints 2 and 4, which a block may write into) and
# `paper_tables/` (a link to the repository's).

# The one declared place where the docs' demo and the tiny run differ: (pattern, replacement)
# applied in order to each command line before it runs.
SUBSTITUTIONS = (
    # The demo's config -> a config file returning the tiny run's (tests/tiny.tiny_config).
    (r"\bconfigs/demo\.py\b", "{config}"),
    # The demo keeps checkpoints 750 and 1000; the tiny run 2 and 4.
    (r"(step ?)750\b", r"\g<1>2"),
    (r"(step ?)1000\b", r"\g<1>4"),
    # The demo's XM3600 split has 100 images, 8 of them named 0*.jpg; the tiny one 8 in all.
    (r"--subset-size 100\b", "--subset-size 8"),
    (r"images/0\*\.jpg", "images/*.jpg"),
)

# Commands that serve until stopped: `python -m <module> [<subcommand>]`.
SERVERS = (("tools.humaneval", "serve"), ("tools.captioning.web", None))
SERVER_START_SECONDS = 120
# Modules whose `__main__` tunes the process for itself alone (tools.cider: malloc's
# arenas, the garbage collector): they run as their own process.
OWN_PROCESS = ("tools.cider",)


def _command_blocks():
    return [block for path in doc_blocks.documents() for block in doc_blocks.blocks(path)
            if block.commands()]


def _runnable():
    """The unmarked command blocks, one pytest param per distinct list of command lines."""
    by_commands = {}
    for block in _command_blocks():
        if block.marker is None:
            by_commands.setdefault(tuple(block.commands()), []).append(block.where)
    return [pytest.param(commands, id="+".join(wheres)) for commands, wheres in by_commands.items()]


def _python_blocks():
    """The unmarked Python blocks, one pytest param each."""
    return [pytest.param(block.python(), id=block.where)
            for path in doc_blocks.documents() for block in doc_blocks.blocks(path)
            if block.marker is None and block.python()]


def test_every_command_block_runs_here_or_says_why_not():
    faults, unmarked = [], 0
    for path in doc_blocks.documents():
        found = doc_blocks.blocks(path)
        for block in found:
            if block.marker is None:
                unmarked += bool(block.commands() or block.python())
            elif not block.commands() and not block.python():
                faults.append(f"{block.where}: a marker before a block without a command "
                              f"or Python")
            elif not block.marker.startswith(doc_blocks.REASONS):
                faults.append(f"{block.where}: reason {block.marker!r} starts with none of "
                              f"{doc_blocks.REASONS}")
            for test in re.findall(r"\btests/[\w/]+\.py\b", block.marker or ""):
                if not (doc_blocks.ROOT / test).is_file():
                    faults.append(f"{block.where}: the marker names {test}, which does not "
                                  f"exist")
        starts = [block.line for block in found if block.marker is not None]
        for line, _ in doc_blocks.markers(path):
            if not any(0 < start - line <= 2 for start in starts):
                name = path.relative_to(doc_blocks.ROOT)
                faults.append(f"{name}:{line}: a marker before no block")
    assert not faults, "\n".join(faults)
    assert unmarked >= 8 and len(_python_blocks()) >= 2  # The parser finds the blocks that run.


def test_blocks_are_read_as_markdown_renders_them(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("\n".join([
        "Text.", "",
        "    python -m tools.a --x 1 \\", "        --y 2   # a comment", "", "    printed output",
        "", "- An item:", "", "      python -m tools.b", "  its paragraph,", "    continued.", "",
        "<!-- not run here: needs a GPU -->", "", "```python", "import x", "```", "",
        "    TPU=v4; gcloud compute ssh $TPU", "    ... --command 'python x.py'", "", "Text.",
        "", "    error: output only, python -m x", "    (what a block prints)", "", "Text.",
        "", "    x = {'a': 1}", "    print(x)", "", "Text.", "", '    {"a": 1, "b": ...}', "",
        "```json", "x = 1", "```", ""]))
    found = doc_blocks.blocks(page)
    assert [(b.line, b.marker, b.fenced) for b in found] == [
        (3, None, False), (10, None, False), (16, "needs a GPU", True), (20, None, False),
        (25, None, False), (30, None, False), (35, None, False), (37, None, True)]
    assert [b.python() for b in found] == [
        None, None, "import x\n", None, None, "x = {'a': 1}\nprint(x)\n", None, None]
    assert found[0].commands() == ["python -m tools.a --x 1 --y 2   # a comment"]
    assert found[1].commands() == ["python -m tools.b"]
    assert found[2].commands() == []
    assert found[3].commands() == ["TPU=v4; gcloud compute ssh $TPU", "... --command 'python x.py'"]
    assert found[4].commands() == []


@pytest.fixture
def working_folder(four_step_run, tmp_path):
    """The folder a block runs in (above), and the tiny run's config file."""
    folder = tmp_path / "repo"
    (folder / "runs").mkdir(parents=True)
    os.symlink(four_step_run.data_dir, folder / "demo_data")
    four_step_run.copy_to(folder / "runs" / "demo")
    os.symlink(os.path.join(REPO, "paper_tables"), folder / "paper_tables")
    config = tiny.write_config_file(tmp_path / "tiny_config.py", four_step_run.data_dir,
                                    **four_step_run.overrides)
    return folder, config


@pytest.mark.parametrize("commands", _runnable())
def test_command_block_runs_as_written(commands, working_folder, capfd):
    folder, config = working_folder
    for command in commands:
        line = substitute(command, config=config)
        status, output = run(line, folder, capfd)
        assert status == 0, f"{line}\nexit status {status}\n{output[-4000:]}"
        for out in _outputs(shlex.split(line, comments=True)):
            assert (folder / out).exists(), f"{line}\nwrote no {out}\n{output[-4000:]}"


@pytest.mark.parametrize("source", _python_blocks())
def test_python_block_runs_as_written(source, working_folder, capfd, request):
    folder, config = working_folder
    where = request.node.callspec.id
    code = compile(substitute(source, config=config), where, "exec")
    status, output = _in_process(lambda: exec(code, {"__name__": "__main__"}), [where],
                                 folder, capfd)
    assert status == 0, f"{where}\nexit status {status}\n{output[-4000:]}"


def substitute(command, **paths):
    for pattern, replacement in SUBSTITUTIONS:
        command = re.sub(pattern, replacement.format(**paths), command)
    return command


def _outputs(argv):
    return [value for flag, value in zip(argv, argv[1:], strict=False) if flag == "--out"]


def run(line, folder, capfd):
    """Runs one command line in `folder`; returns (exit status, what it printed)."""
    argv = shlex.split(line, comments=True)
    if argv[0] in ("python", "python3") and len(argv) > 2 and argv[1] == "-m":
        module, args = argv[2], argv[3:]
        if any(module == name and (sub is None or args[:1] == [sub]) for name, sub in SERVERS):
            return _serve(argv[1:], folder)
        if module in OWN_PROCESS:
            return _process([sys.executable, *argv[1:]], folder)
        return _in_process(lambda: runpy.run_module(module, run_name="__main__",
                                                    alter_sys=True), [module, *args],
                           folder, capfd)
    if argv[0] in ("python", "python3") and len(argv) > 1 and argv[1].endswith(".py"):
        script = argv[1] if os.path.isfile(folder / argv[1]) else os.path.join(REPO, argv[1])
        if argv[1] == "train.py":  # Its absl flags are defined once a process.
            return _process([sys.executable, script, *argv[2:]], folder)
        return _in_process(lambda: runpy.run_path(script, run_name="__main__"),
                           [script, *argv[2:]], folder, capfd)
    return _process(["bash", "-c", line], folder)


def _process(argv, folder):
    result = subprocess.run(argv, cwd=folder, env=_env(), capture_output=True, text=True,
                            timeout=600, check=False)
    return result.returncode, result.stdout + result.stderr


def _env():
    path = os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")]))
    return tiny.cli_env(PYTHONPATH=path)


def _in_process(main, argv, folder, capfd):
    """Runs `main()` as a process started with `argv` would, in `folder`."""
    capfd.readouterr()
    with _process_state(), contextlib.chdir(folder):
        sys.argv = list(argv)
        try:
            main()
            status = 0
        except SystemExit as e:
            status = e.code if isinstance(e.code, int) else int(e.code is not None)
    out, err = capfd.readouterr()
    return status, out + err


@contextlib.contextmanager
def _process_state():
    """Puts back after the block what a command line may change for the whole process."""
    saved_argv, saved_environ = list(sys.argv), dict(os.environ)
    saved_jax = {name: getattr(jax.config, name) for name in (
        "jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs")}
    root = logging.getLogger()
    saved_root = root.level, list(root.handlers)
    verbosity = absl_logging.get_verbosity()
    # A tool run as `__main__` may ignore late signals; children would inherit that.
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        with warnings.catch_warnings():
            # runpy's note that the module was imported before (`python -m` imports it once).
            warnings.filterwarnings("ignore", r".* found in sys.modules after import of "
                                    r"package", RuntimeWarning)
            yield
    finally:
        sys.argv = saved_argv
        os.environ.clear()
        os.environ.update(saved_environ)
        for name, value in saved_jax.items():
            jax.config.update(name, value)
        root.setLevel(saved_root[0])
        root.handlers[:] = saved_root[1]
        absl_logging.set_verbosity(verbosity)
        for signum, handler in handlers.items():
            signal.signal(signum, handler)


def _serve(args, folder):
    """Starts a server command with `--port 0`, waits until it answers, and stops it."""
    proc = subprocess.Popen([sys.executable, *args, "--port", "0"], cwd=folder, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], SERVER_START_SECONDS)
        first = proc.stdout.readline() if ready else ""
        if not first.startswith("serving http://"):
            proc.terminate()
            return proc.wait(timeout=30) or 1, first + proc.stdout.read()
        address = first.split()[1]
        try:
            with urllib.request.urlopen(address, timeout=SERVER_START_SECONDS) as response:
                response.read()
        except urllib.error.HTTPError:
            pass  # An answer (the root of a session is no page): the server runs.
        return 0, first
    finally:
        proc.terminate()
        proc.wait(timeout=30)
