"""Speed of evaluation.cider against pycocoevalcap on an XM3600-sized synthetic corpus.

Per language, the number of references per image and the words (or, for ja,
th and zh, characters) per caption follow the paper's Table 1
(paper_tables/caption_stats.csv); words are drawn from a
Zipf-like vocabulary in the language's script, capitalized and punctuated, and
each prediction is a noisy copy of one of its image's references or a fresh
caption. Times, in one process:

  (a) pycocoevalcap `Cider` over all languages, on the already normalized,
      space-joined strings (its own tokenizer needs Java and is not counted);
  (b) evaluation.cider end to end from raw strings: normalization, tokenization,
      document frequencies, scores, jit compilation included;
  (c) the in-loop path: references prepared once, new predictions each call,
      kernel already compiled (normalization of the predictions included);
  (d) the command line as a user runs it, `python -m tools.cider --json` in a
      subprocess, on the same corpus written as files (an XM3600-layout
      captions.jsonl and a predictions JSONL): process start, imports, file
      reading and validation, scoring and printing, wall clock of the whole
      process (median of --cli-runs runs); its per-language scores must equal
      the means of (b)'s.

(b) counts XLA's compilation, which every process repeats; numba's (the
compiled loops of evaluation.cider.ngram_match) happens once per machine and is cached on
disk, so it is measured apart, in a subprocess with an empty cache, and shown
added to (b) as well.

(b) and (c) run the languages on one thread per core (`cider.map_languages`,
as `python -m tools.cider` and the in-loop evaluator do); pycocoevalcap is
single-threaded. Each time is reported as wall-clock and as CPU time of this
process (all threads): the CPU ratio is what one core would give; for (d),
the CPU time of the subprocess.

Usage: python benchmarks/cider_speed.py [--langs N] [--images N] [--seed S] [--cli-runs N]
"""

import argparse
import csv
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import typing

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import paper_tables  # noqa: E402
from data import languages  # noqa: E402
from evaluation.cider import text  # noqa: E402
from formats import predictions as predictions_format  # noqa: E402

STATS = paper_tables.FOLDER / paper_tables.CAPTION_STATS
# First code point and size of an alphabet per script, for synthetic words.
_SCRIPTS = {
    "ar": (0x0628, 26), "fa": (0x0628, 26), "bn": (0x0995, 30), "el": (0x03B1, 24),
    "he": (0x05D0, 27), "hi": (0x0915, 30), "ko": (0xAC00, 400), "ru": (0x0430, 32),
    "uk": (0x0430, 32), "te": (0x0C15, 30), "th": (0x0E01, 46), "ja": (0x3041, 86),
    "zh": (0x4E00, 3000),
}
_KANJI = (0x4E00, 2000)


def read_stats(path=STATS):
    """Returns {lang: row} from caption_stats.csv."""
    with open(path, encoding="utf-8") as f:
        return {row["lang"]: row for row in csv.DictReader(f)}


def references_per_image(row, num_images):
    """Reference counts per image matching the paper's mix of 1 / 2 / 3+ captions."""
    n1, n2, n3 = (int(row[k]) for k in ("images_with_1", "images_with_2", "images_with_3plus"))
    total = n1 + n2 + n3
    counts = np.repeat([1, 2, 3], [n1, n2, n3])
    extra = int(row["num_captions"]) - counts.sum()
    if n3 and extra > 0:
        counts[n1 + n2 + np.arange(extra) % n3] += 1
    pick = np.linspace(0, total - 1, num_images).round().astype(int)
    return counts[pick]


class CaptionMaker:
    """Random captions for one language, with a Zipf-like word distribution."""

    def __init__(self, lang, row, rng, vocab_size=6000):
        self.rng = rng
        self.segmented = lang in text.SEGMENTED_LANGS
        start, size = _SCRIPTS.get(lang, (ord("a"), 26))
        avg_words, avg_chars = float(row["avg_words"]), float(row["avg_chars"])
        if self.segmented:
            self.length = avg_chars
            inventory = size if lang != "ja" else size + _KANJI[1]
            self.words = [chr(start + i) if i < size else chr(_KANJI[0] + i - size)
                          for i in range(inventory)]
        else:
            self.length = avg_words
            letters = [chr(start + i) for i in range(size)]
            word_len = max(1.5, avg_chars / avg_words - 1)
            seen, words = set(), []
            while len(words) < vocab_size:
                n = max(1, rng.poisson(word_len))
                word = "".join(rng.choice(letters, n))
                if word not in seen:
                    seen.add(word)
                    words.append(word)
            self.words = words
        self.words = np.array(self.words, dtype=object)
        p = 1.0 / np.arange(1, len(self.words) + 1) ** 1.05
        self.cdf = np.cumsum(p / p.sum())

    def draw(self, n):
        """`n` words from the Zipf-like distribution."""
        return self.words[np.minimum(np.searchsorted(self.cdf, self.rng.random(n)),
                                     len(self.words) - 1)]

    def _join(self, words):
        if self.segmented:
            return "".join(words) + "。"
        words = list(words)
        if words:
            words[0] = words[0].capitalize()
            if len(words) > 4 and self.rng.random() < 0.3:
                words[2] += ","
        return " ".join(words) + "."

    def caption(self):
        n = max(1, self.rng.poisson(self.length))
        return self._join(self.draw(n))

    def prediction(self, refs):
        """A noisy copy of a reference (70%) or a fresh caption."""
        if self.rng.random() < 0.3:
            return self.caption()
        ref = refs[self.rng.integers(len(refs))].rstrip(".。").replace(",", "")
        words = list(ref) if self.segmented else ref.lower().split()
        keep = [w for w in words if self.rng.random() > 0.15]
        replace = self.rng.random(len(keep)) < 0.2
        for i, word in zip(np.flatnonzero(replace), self.draw(int(replace.sum())),
                           strict=True):
            keep[i] = word
        return self._join(keep)


def build_corpus(langs, num_images, seed):
    """Returns {lang: (references per image, predictions A, predictions B)}."""
    stats = read_stats()
    rng = np.random.default_rng(seed)
    corpus = {}
    for lang in langs:
        maker = CaptionMaker(lang, stats[lang], rng)
        refs = [[maker.caption() for _ in range(k)]
                for k in references_per_image(stats[lang], num_images)]
        preds_a = [maker.prediction(r) for r in refs]
        preds_b = [maker.prediction(r) for r in refs]
        corpus[lang] = (refs, preds_a, preds_b)
    return corpus


def image_keys(num_images):
    """16 hex digits per image, like XM3600's `image/key`s."""
    return [f"{(i * 0x9E3779B97F4A7C15) % (1 << 64):016x}" for i in range(num_images)]


def write_files(corpus, folder):
    """Writes the corpus as the command line reads it; returns (references, predictions) paths.

    References: an XM3600-layout captions.jsonl, one line per image with
    "image/key", "image/locale" and, per language, "caption",
    "caption/tokenized" (the normalized tokens, case kept) and
    "caption/tokenized/lowercase". Predictions: one JSONL of
    {"image/key", "lang", "caption"} lines (the first predictions of each
    language), written by formats/predictions.py.
    """
    langs = list(corpus)
    keys = image_keys(len(corpus[langs[0]][0]))
    cased = text.Options(lowercase=False)
    tokenized = {}
    for lang, (refs, _, _) in corpus.items():
        flat = [caption for captions in refs for caption in captions]
        per_caption = text.normalize_batch(flat, lang, options=cased).split()
        tokens = iter(" ".join(t) for t in per_caption)
        tokenized[lang] = [[next(tokens) for _ in captions] for captions in refs]
    references = os.path.join(folder, "captions.jsonl")
    with open(references, "w", encoding="utf-8") as f:
        for i, key in enumerate(keys):
            line = {"image/key": key, "image/locale": langs[i % len(langs)]}
            for lang, (refs, _, _) in corpus.items():
                line[lang] = {"caption": refs[i], "caption/tokenized": tokenized[lang][i],
                              "caption/tokenized/lowercase": [t.lower()
                                                              for t in tokenized[lang][i]]}
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
    predictions = os.path.join(folder, "predictions.jsonl")
    predictions_format.write(predictions, {lang: dict(zip(keys, preds, strict=True))
                                           for lang, (_, preds, _) in corpus.items()})
    return references, predictions


class Timer:
    """Wall-clock and process CPU seconds of a `with` block."""

    def __enter__(self):
        self._wall, self._cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self._wall
        self.cpu = time.process_time() - self._cpu


def run_pycocoevalcap(corpus):
    """(a): returns (Timer, {lang: per-image scores}) on pre-normalized strings."""
    from pycocoevalcap.cider.cider import Cider
    inputs = {}
    for lang, (refs, preds, _) in corpus.items():
        gts = {i: [" ".join(text.normalize(r, lang)) for r in rs] for i, rs in enumerate(refs)}
        res = {i: [" ".join(text.normalize(p, lang))] for i, p in enumerate(preds)}
        inputs[lang] = (gts, res)
    scores = {}
    with Timer() as timer:
        for lang, (gts, res) in inputs.items():
            scores[lang] = Cider().compute_score(gts, res)[1]
    return timer, scores


_FIRST_USE = """
import time
from evaluation import cider
start = time.perf_counter()
cider.CiderScorer([["a b c", "a b"], ["b c d"]], "en").score(["a b", "c d"])
print(time.perf_counter() - start)
"""


class CliTime(typing.NamedTuple):
    """Median wall-clock and CPU seconds of the command line's runs, and its last scores."""
    wall: float
    cpu: float
    scores: dict


def run_cli(references, predictions, runs):
    """(d): times `python -m tools.cider --json` as a user runs it, whole process."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "tools.cider", "--references", references,
                              "--predictions", predictions, "--json"],
                             cwd=root, check=True, capture_output=True, text=True)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return CliTime(float(np.median(walls)), float(np.median(cpus)),
                   json.loads(out.stdout)["scores"])


def numba_compile_seconds():
    """Seconds a machine's first use of evaluation.cider spends compiling its numba loops.

    The same tiny scoring runs in two subprocesses, with numba's cache as it
    is (after this process's own runs) and with an empty one.
    """
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    times = []
    with tempfile.TemporaryDirectory() as empty_cache:
        for extra in ({}, {"NUMBA_CACHE_DIR": empty_cache}):
            out = subprocess.run([sys.executable, "-c", _FIRST_USE], cwd=root, check=True,
                                 capture_output=True, text=True, env={**os.environ, **extra})
            times.append(float(out.stdout.split()[-1]))
    return times[1] - times[0]


def per_call_times(scorers, corpus, langs=("en", "zh", "th")):
    """Median ms of one `score()` call and of its normalization, per language, on one thread."""
    def median_ms(fn, *args):
        times = []
        for _ in range(5):
            start = time.perf_counter()
            fn(*args)
            times.append(time.perf_counter() - start)
        return 1e3 * float(np.median(times))

    return {lang: (median_ms(scorers[lang].score, corpus[lang][1]),
                   median_ms(text.normalize_spans, corpus[lang][1], lang))
            for lang in langs if lang in scorers}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--langs", type=int, default=len(languages.XM3600_LANGS),
                        help="number of languages (first N of XM3600's order)")
    parser.add_argument("--images", type=int, default=3600, help="images per language")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cli-runs", type=int, default=3,
                        help="runs of the command line (d); the median is reported")
    args = parser.parse_args(argv)
    langs = languages.XM3600_LANGS[:args.langs]
    corpus = build_corpus(langs, args.images, args.seed)
    num_refs = sum(len(r) for refs, _, _ in corpus.values() for r in refs)
    from evaluation import cider
    print(f"{len(langs)} languages x {args.images} images: {num_refs} references, "
          f"{len(langs) * args.images} predictions per pass; "
          f"{cider.num_cores()} cores")

    def prepare_and_score(lang):
        refs, preds, _ = corpus[lang]
        scorer = cider.CiderScorer(refs, lang)
        return scorer, scorer.score(preds).per_image

    with Timer() as time_b:
        scorers, ours = zip(*cider.map_languages(prepare_and_score, langs), strict=True)
    scorers, ours = dict(zip(langs, scorers, strict=True)), dict(zip(langs, ours, strict=True))

    time_a, reference = run_pycocoevalcap(corpus)

    with Timer() as time_c:
        cider.map_languages(lambda lang: scorers[lang].score(corpus[lang][2]), langs)
        in_loop = dict(zip(langs, cider.map_languages(
            lambda lang: scorers[lang].score(corpus[lang][1]).per_image, langs), strict=True))
    time_c.wall /= 2
    time_c.cpu /= 2

    with tempfile.TemporaryDirectory() as folder:
        time_d = run_cli(*write_files(corpus, folder), args.cli_runs)
    # The command line's corpus score is the mean of the same per-image scores.
    cli_mismatch = [lang for lang in langs if time_d.scores[lang] != float(ours[lang].mean())]

    compile_s = numba_compile_seconds()
    diff_b = max(np.abs(ours[k] - reference[k]).max() for k in langs)
    diff_c = max(np.abs(in_loop[k] - reference[k]).max() for k in langs)
    corpus_diff = max(abs(ours[k].mean() - reference[k].mean()) for k in langs)
    print(f"{'':40}{'wall s':>9}{'ratio':>8}{'cpu s':>9}{'ratio':>8}")
    for name, t in [("(a) pycocoevalcap Cider", time_a),
                    ("(b) evaluation.cider end to end", time_b),
                    ("(c) evaluation.cider in-loop, per pass", time_c),
                    ("(d) python -m tools.cider, whole process", time_d)]:
        print(f"{name:40}{t.wall:9.3f}{time_a.wall / t.wall:7.1f}x"
              f"{t.cpu:9.3f}{time_a.cpu / t.cpu:7.1f}x")
    first = time_b.wall + compile_s
    print(f"{'(b) + numba compilation, first run':40}{first:9.3f}{time_a.wall / first:7.1f}x"
          f"   (compiled once per machine: {compile_s:.2f} s, then loaded from disk)")
    per_call = per_call_times(scorers, corpus)
    if per_call:
        print("one score() call, one thread: " + ", ".join(
            f"{lang} {total:.1f} ms (normalizing {norm:.1f} ms)"
            for lang, (total, norm) in per_call.items()))
    print(f"largest per-image difference: (b) {diff_b:.2e}, (c) {diff_c:.2e}; "
          f"largest corpus difference {corpus_diff:.2e}")
    print(f"(d) per-language scores equal to (b)'s: "
          f"{'yes' if not cli_mismatch else 'NO: ' + ', '.join(cli_mismatch)}; "
          f"(d) is the median of {args.cli_runs} runs")
    if cli_mismatch:
        sys.exit(1)


if __name__ == "__main__":
    main()
