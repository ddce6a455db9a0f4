"""Derives VIFIDEL's function-word lists from Universal Dependencies treebanks (CoNLL-U).

    python -m tools.vifidel.derive_function_words \
        --treebank en=UD_English-EWT/en_ewt-ud-dev.conllu,UD_English-EWT/en_ewt-ud-test.conllu \
        [--treebank de=...] --out tools/vifidel/function_lists

Each occurrence (syntactic word) of a treebank is of one kind:

- a quantifier: a determiner (a DET, or a PRON in a det or nummod relation, as Finnish tags
  them) with PronType=Ind, Tot or Neg or with a NumType, unless it is an article (PronType=Art,
  or a language's `ARTICLES`): "many", "some", "all", "both", "each", "no";
  where a treebank gives its determiners no PronType, its quantifier tag (`QUANTIFIER_XPOS`);
- a content word's: tagged ADJ, NOUN, NUM or PROPN, or an affix of a content word that the
  treebank tags as a particle (`AFFIX_XPOS`: Chinese GSD's 车 of 火车, 大 of 大楼);
- a function word's: any other ADP, AUX, CCONJ, DET, PART, PRON or SCONJ (articles,
  demonstratives, adpositions, pronouns, conjunctions, auxiliaries, particles).

A lowercased form is listed when at least MIN_COUNT of its occurrences are a function word's,
those are more than half of them all, fewer than MIN_COUNT (or under AMBIGUOUS_SHARE) of them
are a quantifier's or a content word's (Spanish "bajo", French "été", Hindi "बीच" stay), and
it is none of the language's `QUANTIFIERS` (read off the determiners of treebanks that mark
no quantifier) or `EXCEPTIONS` (each with its reason). A multiword token (French "du" =
"de le") counts under its surface form, of the kind of its parts (content or quantifier when
one part is). Forms with a digit, and forms of punctuation only, are never listed. So "a",
"on", "the", "is" are listed, while "man", "big", "two", "many", "all", "top" or "front"
stay in a caption, as the VIFIDEL paper asks (Sec. 3.1: "only content words are retained").
Each list is written as `<lang>.txt` under a header that names the treebank files, their UD
commit (`--source`) and the rule.
"""

import argparse
import collections
import os
import sys
import unicodedata

import errors
import files
from data import languages

FUNCTION_TAGS = ("ADP", "AUX", "CCONJ", "DET", "PART", "PRON", "SCONJ")
CONTENT_TAGS = ("ADJ", "NOUN", "NUM", "PROPN")
QUANTIFIER_PRONTYPES = ("Ind", "Neg", "Tot")
MIN_COUNT = 2
AMBIGUOUS_SHARE = 0.05
# Language-specific tags (XPOS) that mark quantifiers in treebanks whose determiners carry no
# PronType, and affixes of content words that a treebank tags as particles.
QUANTIFIER_XPOS = {
    "hi": {"QF": "a quantifier (कई, कुछ, सभी, हर)"},
    "nl": {"VNW|onbep": "an indefinite pronoun or determiner (veel, alle, sommige)"},
    "tr": {"ANum": "a numeral determiner (bir, iki)"},
}
AFFIX_XPOS = {
    "zh": {"SFN": "a noun suffix (站 of 车站)", "SFA": "an adjective suffix",
           "SFV": "a verb suffix", "PFA": "a prefix (大, 小, 新)"},
}
# Indefinite articles that a treebank tags PronType=Ind like its quantifiers.
ARTICLES = {"da": ("en", "et"), "ro": ("un", "o", "unei", "unui", "unor", "niște")}
# The quantifiers (all, every, each, some, several, many, most, any, other, both...) among the
# determiners of treebanks that give them neither PronType nor a telling XPOS.
QUANTIFIERS = {
    "ar": "أحد,إحدى,أغلب,أي,بعض,جميع,عدة,غالبية,كل,معظم",
    "fa": "برخی,بعضی,تمامی,سراسر,کلیه,هر,همه,همهٔ",
    "fil": "ilan,ilang",
    "he": "הרבה,כל,כלשהו,כמה,מרבית,רוב,שאר",
    "ja": "あらゆる,全,各",
    "ko": "각,몇,모든,양",
    "ru": "весь,все,всего,всей,всем,всех,всё,каждого,каждый,некоторые",
    "te": "అంతా,అన్ని,ఎన్నో,ఎంతో,కొంత,కొన్ని,చాలా",
    "tr": "bazı,birkaç,birçok,her,hiçbir,tüm",
    "vi": "bao nhiêu,chút,cả,hàng loạt,mọi,muôn,một số,một vài,toàn bộ,toàn thể,tất cả,vài,"
          "vô số,đa số",
    "zh": "任何,全,全部,其他,其余,各,各种,另,所有,某,某些,每,每个,每天,每年,每日,每集",
}
# Forms never listed, whatever the treebank says.
EXCEPTIONS = {
    "bn": {"একটা": "the numeral one too, as Hindi एक (the treebank tags it DET only)"},
    "en": {"can": "a noun too (a trash can); the modal cannot be told from it in a caption"},
    "es": {"sobre": "a noun too (an envelope)"},
}


def _kind(form, columns, lang):
    """"function", "quantifier", "content" or "other" for one (syntactic) word."""
    upos, xpos, feats, deprel = columns[3], columns[4], columns[5], columns[7]
    if upos in CONTENT_TAGS or any(xpos.startswith(t) for t in AFFIX_XPOS.get(lang, ())):
        return "content"
    if upos not in FUNCTION_TAGS:
        return "other"
    determiner = upos == "DET" or (upos == "PRON" and deprel.startswith(("det", "nummod")))
    if determiner and form.lower() not in ARTICLES.get(lang, ()):
        feats = dict(f.partition("=")[::2] for f in feats.split("|") if "=" in f)
        if feats.get("PronType") != "Art" and (
                feats.get("PronType") in QUANTIFIER_PRONTYPES or "NumType" in feats):
            return "quantifier"
    if any(xpos.startswith(t) for t in QUANTIFIER_XPOS.get(lang, ())):
        return "quantifier"
    return "function"


def read_tokens(path, lang=None):
    """(surface form, kind) of every token of a CoNLL-U file, multiword tokens whole; kind is
    "function", "content" (a noun, proper noun, adjective or numeral) or "other".

    Raises:
        InputError: a token line without the 10 columns of CoNLL-U (file and line named).
    """
    out = []
    word = None  # the multiword token being read: [last id, form, kinds of its parts]
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
                token_id, form = columns[0], columns[1]
                if "." in token_id:  # an empty node: no word of the sentence
                    continue
                if "-" in token_id:
                    word = [int(token_id.split("-")[1]), form, []]
                    continue
                kind = _kind(form, columns, lang)
                out.append((form, kind))
                if word is not None:
                    word[2].append(kind)
                    if int(token_id) == word[0]:
                        kinds = set(word[2])
                        whole = next((k for k in ("content", "quantifier") if k in kinds),
                                     "function" if kinds == {"function"} else "other")
                        out.append((word[1], whole))
                        word = None
    except FileNotFoundError:
        raise errors.InputError(f"treebank file not found: {path}") from None
    except UnicodeDecodeError as e:
        raise errors.InputError(f"{path}: not UTF-8 ({e.reason})") from None
    return out


def _listable(form):
    return not any(c.isdigit() for c in form) and any(
        not unicodedata.category(c).startswith(("P", "S", "Z")) for c in form)


def function_words(paths, lang=None, min_count=MIN_COUNT):
    """The function words of one language's treebank files (the module docstring's rule).

    Returns:
        (sorted words, {word: (function-word occurrences, all occurrences)}).
    """
    counts = collections.defaultdict(collections.Counter)
    for path in paths:
        for form, kind in read_tokens(path, lang):
            counts[form.lower()][kind] += 1
    never = {*QUANTIFIERS.get(lang, "").split(","), *EXCEPTIONS.get(lang, {})}
    words = sorted(w for w, c in counts.items()
                   if c["function"] >= min_count and 2 * c["function"] > c.total()
                   and c["quantifier"] + c["content"] < max(min_count,
                                                            AMBIGUOUS_SHARE * c.total())
                   and w not in never and _listable(w))
    return words, {w: (counts[w]["function"], counts[w].total()) for w in words}


def header(lang, paths, source, count):
    """The comment lines on top of a list: where it comes from and by which rule."""
    names = ", ".join(os.path.basename(p) for p in paths)
    lines = [f"# Function words of {lang!r} for VIFIDEL ({count} words), derived by",
             "# python -m tools.vifidel.derive_function_words from Universal Dependencies:",
             f"# {names}" + (f" ({source})" if source else ""),
             f"# rule: lowercased forms with at least {MIN_COUNT} occurrences tagged "
             f"{', '.join(FUNCTION_TAGS)} (no quantifier),",
             "# more than half of all their occurrences, and tagged a quantifier (a determiner "
             "with "
             f"PronType={'/'.join(QUANTIFIER_PRONTYPES)}",
             f"# or NumType, not an article) or {', '.join(CONTENT_TAGS)} in fewer than "
             f"{MIN_COUNT} or under {AMBIGUOUS_SHARE:.0%} of them,",
             "# so that numerals, quantifiers, nouns and adjectives are kept."]
    lines += [f"# XPOS {tag}: {why}, not a function word"
              for table in (QUANTIFIER_XPOS, AFFIX_XPOS)
              for tag, why in table.get(lang, {}).items()]
    if lang in ARTICLES:
        lines.append(f"# articles although tagged PronType=Ind: {', '.join(ARTICLES[lang])}")
    if lang in QUANTIFIERS:
        words = QUANTIFIERS[lang].replace(",", ", ")
        lines.append(f"# quantifiers (determiners without PronType here): {words}")
    lines += [f"# never listed: {word}, {why}" for word, why in EXCEPTIONS.get(lang, {}).items()]
    return lines


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
        words, _ = function_words(paths, lang)
        lines = header(lang, paths, sources.get(lang), len(words)) + words
        files.write_text(os.path.join(args.out, f"{lang}.txt"), "\n".join(lines) + "\n")
        print(f"{lang}: {len(words)} function words", file=sys.stdout)
    return 0


if __name__ == "__main__":
    errors.run_main(main)
