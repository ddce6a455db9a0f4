"""The code blocks of the README and docs/*.md, their command lines and their not-run markers.

A code block is a fenced block (```) or an indented one (4 spaces more than the list item it
sits in, after a blank line), as Markdown renders them. A *command block* is one with at least
one command line: a line whose first word is a program a reader would type (`python`, `make`,
`pip`, `gcloud`, ...), a path to a script (`../scripts/x.sh`), an environment assignment
(`TPU=...`) or an elided command (`... --command`); a line ending in `\\` continues on the
next. Its other lines are what the commands print, or comments (`# ...`), and are not run.
A *Python block* is a fenced ```python block, or an indented block without command lines
whose text parses as Python with a statement beyond one lone expression (so a JSON example is
not one); it runs as a file of its own would.

A command or Python block that cannot run here carries a marker on the last non-blank line
before it:

    <!-- not run here: needs the real XM3600 release -->

whose reason starts with one of `REASONS`. CONTRIBUTING.md's documentation section states the
rule; tests/test_docs.py runs every other command and Python block."""

import ast
import dataclasses
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]

# What a marked block needs, or is, that the test cannot give it (the start of each reason).
REASONS = ("needs the real", "needs a GPU", "needs a TPU", "needs several hosts",
           "needs the network", "a long training", "a synopsis", "a fragment",
           "a user's own folder", "a full-size model")

_PROGRAMS = frozenset({
    "python", "python3", "python3.11", "make", "pip", "pip3", "gcloud", "gsutil", "sed",
    "img2dataset", "curl", "wget", "git", "cd", "export", "bash", "sh", "sudo", "apt-get",
    "docker", "tar", "unzip", "time", "env", "ls", "cat", "cp", "mv", "rm", "mkdir", "echo",
    "huggingface-cli",
})
_MARKER = re.compile(r"^<!--\s*not run here:\s*(?P<reason>.*?)\s*-->$")
_LIST_ITEM = re.compile(r"^(\s*)([-*+]|\d+[.)])\s+")
_ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=[^\s\"'(]*(\s|;|$)")  # TPU=xm3600; ...


@dataclasses.dataclass(frozen=True)
class Block:
    """A code block of `path` (relative to the repository) from its 1-based `line` (a fenced
    block's opening fence): its `lines` without indentation or fences, its `not run here`
    marker's reason or None, and a fenced block's `language` ("python" after ```python)."""
    path: str
    line: int
    lines: tuple
    marker: str | None
    fenced: bool = False
    language: str = ""

    @property
    def where(self):
        return f"{self.path}:{self.line}"

    def commands(self):
        """Its command lines, each joined with its `\\` continuations (list of str)."""
        commands, current = [], None
        for line in self.lines:
            if current is not None:
                current += " " + line.strip()
            elif is_command(line):
                current = line.strip()
            if current is not None and current.endswith("\\"):
                current = current[:-1].rstrip()
            elif current is not None:
                commands.append(current)
                current = None
        if current is not None:
            commands.append(current)
        return commands

    def python(self):
        """Its source if it is a Python block (module docstring), else None."""
        source = "\n".join(self.lines) + "\n"
        if self.language == "python":
            return source
        if self.fenced or self.language or self.commands():
            return None
        try:
            tree = ast.parse(source)
        except SyntaxError:
            return None
        lone_expression = len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr)
        return source if tree.body and not lone_expression else None


def is_command(line):
    """Whether `line` starts a command (see the module docstring)."""
    text = line.strip()
    if text.startswith("$ "):
        text = text[2:]
    if not text or text.startswith("#"):
        return False
    word = text.split()[0]
    return (word in _PROGRAMS or word.endswith((".sh", ".py")) and "/" in word
            or bool(_ASSIGNMENT.match(text)) or text.startswith("... --"))


def documents():
    """The Markdown files whose blocks are checked: README.md and docs/*.md (paths)."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks(path):
    """The code blocks of the Markdown file `path`, in order (list of Block)."""
    path = pathlib.Path(path).resolve()
    lines = path.read_text(encoding="utf-8").splitlines()
    name = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)
    found, i, list_indent, previous_blank = [], 0, 0, True
    while i < len(lines):
        line = lines[i]
        text = line.lstrip()
        indent = len(line) - len(text)
        if text.startswith("```"):
            end = next((j for j in range(i + 1, len(lines))
                        if lines[j].strip().startswith("```")), len(lines))
            body = [body_line[indent:] for body_line in lines[i + 1:end]]
            found.append(Block(name, i + 1, tuple(body), _marker(lines, i), fenced=True,
                               language=text[3:].strip()))
            i, previous_blank = end + 1, False
            continue
        if text and previous_blank and indent >= list_indent + 4:
            end = i
            while end < len(lines) and (not lines[end].strip()
                                        or _indent(lines[end]) >= list_indent + 4):
                end += 1
            while not lines[end - 1].strip():
                end -= 1
            body = [body_line[list_indent + 4:] for body_line in lines[i:end]]
            found.append(Block(name, i + 1, tuple(body), _marker(lines, i)))
            i, previous_blank = end, False
            continue
        item = _LIST_ITEM.match(line)
        if item:
            list_indent = item.end()
        elif text and previous_blank and indent < list_indent:
            list_indent = 0  # A paragraph after the list.
        previous_blank = not text
        i += 1
    return found


def _indent(line):
    return len(line) - len(line.lstrip())


def _marker(lines, start):
    """The reason of the marker on the last non-blank line before line index `start`."""
    for line in reversed(lines[:start]):
        if line.strip():
            match = _MARKER.match(line.strip())
            return match.group("reason") if match else None
    return None


def markers(path):
    """Every `not run here` marker of the file: [(line, reason)]."""
    lines = pathlib.Path(path).read_text(encoding="utf-8").splitlines()
    return [(number, match.group("reason")) for number, line in enumerate(lines, 1)
            if (match := _MARKER.match(line.strip()))]
