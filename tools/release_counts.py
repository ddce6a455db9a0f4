"""Per-language counts of an XM3600 copy next to the paper's Table 1.

    python -m tools.release_counts xm3600 --data_dir ~/data/xm3600 \
        [--reference_dir paper_tables] [--tolerance 0.05]

Prints, per language, the images with captions, the captions, and the average
words and characters per caption of the local copy and of Table 1
(caption_stats.csv), and flags a language whose caption count differs from the
paper's or whose averages differ by more than the tolerance (relative), so a
user can tell whether their copy is complete. Exit status 1 if any is flagged.

Counting follows the paper's numbers: words are whitespace-separated tokens of
the raw `caption` field, so unspaced scripts (zh, ja, th) count about one word
per caption, as in Table 1 (zh 1.0, ja 1.0, th 1.2); characters are Unicode
code points of the raw caption, spaces included.
"""

import argparse
import csv
import dataclasses
import os
import sys

import errors
import paper_tables
from data import languages
from data.releases import xm3600

DEFAULT_REFERENCE_DIR = str(paper_tables.FOLDER)
STATS_FILE = paper_tables.CAPTION_STATS


@dataclasses.dataclass(frozen=True)
class LangStats:
    """Caption statistics of one language."""
    images: int
    captions: int
    avg_words: float
    avg_chars: float


def caption_stats(records):
    """{lang: LangStats} of the XM3600 records (data/releases/xm3600.read_captions)."""
    stats = {}
    for lang in languages.XM3600_LANGS:
        caps = [c for r in records for c in r.captions.get(lang, [])]
        images = sum(1 for r in records if r.captions.get(lang))
        if not caps:
            stats[lang] = LangStats(images, 0, 0.0, 0.0)
            continue
        stats[lang] = LangStats(images, len(caps), sum(len(c.split()) for c in caps) / len(caps),
                                sum(len(c) for c in caps) / len(caps))
    return stats


def read_paper_stats(reference_dir):
    """{lang: LangStats} from Table 1 (images = images with 1, 2 or 3+ captions)."""
    path = os.path.join(reference_dir, STATS_FILE)
    if not os.path.exists(path):
        raise FileNotFoundError(f"paper statistics not found: {path} (pass --reference_dir)")
    stats = {}
    with open(path, encoding="utf-8") as f:
        for lineno, row in enumerate(csv.DictReader(f), start=2):
            try:
                images = sum(int(row[k]) for k in ("images_with_1", "images_with_2",
                                                   "images_with_3plus"))
                stats[row["lang"]] = LangStats(images, int(row["num_captions"]),
                                               float(row["avg_words"]), float(row["avg_chars"]))
            except (KeyError, TypeError, ValueError) as e:
                raise ValueError(f"{path}:{lineno}: malformed row ({e!r})") from None
    return stats


def compare(local, paper, tolerance):
    """Rows (lang, local LangStats, paper LangStats, list of problems)."""
    rows = []
    for lang in languages.XM3600_LANGS:
        mine, theirs = local[lang], paper.get(lang)
        problems = []
        if theirs is None:
            problems.append("not in Table 1")
        elif mine.captions == 0:
            problems.append("no captions in this copy")
        else:
            if mine.captions != theirs.captions:
                problems.append(f"captions {mine.captions} != {theirs.captions}")
            if mine.images != theirs.images:
                problems.append(f"images {mine.images} != {theirs.images}")
            for field in ("avg_words", "avg_chars"):
                a, b = getattr(mine, field), getattr(theirs, field)
                if abs(a - b) > tolerance * max(b, 1e-9):
                    problems.append(f"{field} {a:.1f} vs {b:.1f}")
        rows.append((lang, mine, theirs, problems))
    return rows


RELEASE_IMAGES = 3600  # Images in the XM3600 release (every language captions all of them).


def format_table(rows):
    """The comparison as aligned text lines."""
    lines = [f"{'lang':<5}{'images':>8}{'paper':>7}{'captions':>10}{'paper':>7}"
             f"{'words':>7}{'paper':>7}{'chars':>7}{'paper':>7}  status"]
    for lang, mine, theirs, problems in rows:
        theirs = theirs or LangStats(0, 0, 0.0, 0.0)
        status = "ok" if not problems else "DIFFERS: " + "; ".join(problems)
        lines.append(f"{lang:<5}{mine.images:>8}{theirs.images:>7}{mine.captions:>10}"
                     f"{theirs.captions:>7}{mine.avg_words:>7.1f}{theirs.avg_words:>7.1f}"
                     f"{mine.avg_chars:>7.1f}{theirs.avg_chars:>7.1f}  {status}")
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tools.release_counts",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("dataset", choices=["xm3600"])
    parser.add_argument("--data_dir", required=True, help="folder with captions.jsonl")
    parser.add_argument("--reference_dir", default=DEFAULT_REFERENCE_DIR)
    parser.add_argument("--tolerance", type=float, default=0.05,
                        help="relative tolerance of the per-caption averages")
    args = parser.parse_args(argv)
    try:
        records = xm3600.read_captions(os.path.join(args.data_dir, "captions.jsonl"))
        paper = read_paper_stats(args.reference_dir)
    except (OSError, ValueError) as e:
        errors.fail(e)
    rows = compare(caption_stats(records), paper, args.tolerance)
    print("\n".join(format_table(rows)))
    flagged = [lang for lang, _, _, problems in rows if problems]
    total = sum(r[1].captions for r in rows)
    print(f"{len(records)} images, {total} captions; "
          + (f"{len(flagged)} languages differ from Table 1: {', '.join(flagged)}"
             if flagged else "every language matches Table 1"))
    if flagged and len(records) != RELEASE_IMAGES:
        print(f"Note: the release has {RELEASE_IMAGES} images and this copy {len(records)}: "
              f"a partial copy, or the demo's synthetic split (python -m tools.demo), which "
              f"differs from Table 1 by design (exit status 1 all the same).")
    return 1 if flagged else 0


if __name__ == "__main__":
    sys.exit(main())
