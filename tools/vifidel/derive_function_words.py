"""Derives VIFIDEL's function-word lists from Universal Dependencies treebanks (CoNLL-U).

    python -m tools.vifidel.derive_function_words \
        --treebank en=UD_English-EWT/en_ewt-ud-dev.conllu,UD_English-EWT/en_ewt-ud-test.conllu \
        [--treebank de=...] --out tools/vifidel/function_lists

A word form (lowercased) is a function word of its language when, in the language's
treebank files, at least MIN_COUNT of its occurrences carry a closed-class part-of-speech tag
of UD (`CLOSED_CLASSES`: adpositions, auxiliaries, conjunctions, determiners, particles,
pronouns) and those are more than half of all its occurrences. UD's other closed class,
numerals (NUM), is left out on purpose: "two dogs" says something about the image. A
multiword token (French "du" = "de le") counts under its surface form, closed-class when
every one of its parts is. Forms with a digit, and forms of punctuation only, are never
listed.

So "a", "on", "the", "is" are function words, while "man" (NOUN), "big" (ADJ), "two" (NUM),
"top" or "front" (NOUN in "on top of", "in front of") are kept as content words, which is
what the VIFIDEL paper asks of its stop-word removal (Sec. 3.1: "only content words are
retained"). Each list is written as `<lang>.txt`, one word per line, under a header that
names the treebank files, their UD release commit when given (`--source`), and the rule.
"""

import argparse
import collections
import os
import sys
import unicodedata

import errors
import files
from data import languages

CLOSED_CLASSES = ("ADP", "AUX", "CCONJ", "DET", "PART", "PRON", "SCONJ")
MIN_COUNT = 2


def read_tokens(path):
    """(surface form, closed-class) of every token of a CoNLL-U file, multiword tokens whole.

    Raises:
        InputError: a token line without the 10 columns of CoNLL-U (file and line named).
    """
    out = []
    word = None  # the multiword token being read: [last id, form, closed-class of each part]
    try:
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, start=1):
                line = line.rstrip("\n")
                if not line or line.startswith("#"):
                    continue
                columns = line.split("\t")
                if len(columns) != 10:
                    raise errors.InputError(f"{path}:{number}: expected 10 tab-separated "
                                            f"columns of CoNLL-U, found {len(columns)}")
                token_id, form, upos = columns[0], columns[1], columns[3]
                if "." in token_id:  # an empty node: no word of the sentence
                    continue
                if "-" in token_id:
                    word = [int(token_id.split("-")[1]), form, []]
                    continue
                closed = upos in CLOSED_CLASSES
                out.append((form, closed))
                if word is not None:
                    word[2].append(closed)
                    if int(token_id) == word[0]:
                        out.append((word[1], all(word[2])))
                        word = None
    except FileNotFoundError:
        raise errors.InputError(f"treebank file not found: {path}") from None
    except UnicodeDecodeError as e:
        raise errors.InputError(f"{path}: not UTF-8 ({e.reason})") from None
    return out


def _listable(form):
    return not any(c.isdigit() for c in form) and any(
        not unicodedata.category(c).startswith(("P", "S", "Z")) for c in form)


def function_words(paths, min_count=MIN_COUNT):
    """The function words of one language's treebank files (the module docstring's rule).

    Returns:
        (sorted words, {word: (closed-class occurrences, all occurrences)}).
    """
    closed, total = collections.Counter(), collections.Counter()
    for path in paths:
        for form, is_closed in read_tokens(path):
            form = form.lower()
            total[form] += 1
            closed[form] += is_closed
    words = sorted(w for w, n in closed.items()
                   if n >= min_count and 2 * n > total[w] and _listable(w))
    return words, {w: (closed[w], total[w]) for w in words}


def header(lang, paths, source, count):
    """The comment lines on top of a list: where it comes from and by which rule."""
    names = ", ".join(os.path.basename(p) for p in paths)
    return [f"# Function words of {lang!r} for VIFIDEL ({count} words), derived by",
            "# python -m tools.vifidel.derive_function_words from Universal Dependencies:",
            f"# {names}" + (f" ({source})" if source else ""),
            f"# rule: lowercased forms with at least {MIN_COUNT} occurrences tagged "
            f"{', '.join(CLOSED_CLASSES)},",
            "# more than half of all their occurrences (numerals, nouns, adjectives are "
            "never closed-class here)."]


def _treebank_flag(value):
    lang, sep, paths = value.partition("=")
    if not sep or not paths:
        raise errors.InputError(f"--treebank {value!r}: expected LANG=FILE[,FILE...]")
    try:
        languages.check_langs([lang])
    except ValueError as e:
        raise errors.InputError(f"--treebank {value!r}: {e}") from None
    return lang, paths.split(",")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tools.vifidel.derive_function_words",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--treebank", action="append", required=True,
                        metavar="LANG=FILE[,FILE...]", help="CoNLL-U files of a language")
    parser.add_argument("--source", action="append", default=[], metavar="LANG=TEXT",
                        help="where a language's files come from (repository and commit)")
    parser.add_argument("--out", required=True, help="folder for the <lang>.txt lists")
    args = parser.parse_args(argv)
    sources = dict(v.partition("=")[::2] for v in args.source)
    os.makedirs(args.out, exist_ok=True)
    for lang, paths in map(_treebank_flag, args.treebank):
        words, _ = function_words(paths)
        lines = header(lang, paths, sources.get(lang), len(words)) + words
        files.write_text(os.path.join(args.out, f"{lang}.txt"), "\n".join(lines) + "\n")
        print(f"{lang}: {len(words)} function words", file=sys.stdout)
    return 0


if __name__ == "__main__":
    errors.run_main(main)
