"""XM3600 evaluation: decode captions in each language and score them with CIDEr-D.

`Evaluator` is the in-loop callback of `train.py`: it loads the evaluation
images once (shared by all languages), prepares each language's CIDEr
references once, and then each `run(params)` decodes every image in every
language with the jit-compiled decoder and returns `eval/cider_d/<lang>` and
`eval/cider_d/avg`. When the params live on a mesh with a 'data' axis, each
batch is split over it.

Run as a program it evaluates a checkpoint of a run:

    python -m eval.xm3600 --config configs/bb.py --workdir runs/bb [--step N] \
        [--langs all|config|en,es,...] [--decode greedy|beam] [--beam_size 4] \
        [--out DIR] [--config.evals.xm3600.max_images=100]

and writes a results folder (default `<workdir>/xm3600_step<N>/`):
`predictions_<lang>.jsonl` (lines {"image/key", "lang", "caption"}, the input
of `python -m eval.cider`), `predictions_coco_dev_<lang>.jsonl` when
`config.evals.coco_dev.manual_dir` is set, and the report of
eval/report.write_report: scores.json, scores.csv, per_image.jsonl, table.md
(the paper's Table 8 layout next to its baselines) and bars.png. Bad input
exits with status 2 and one `error: ...` line.
"""

import concurrent.futures
import dataclasses
import functools
import json
import os
import sys
import time

import jax
import numpy as np
from absl import flags, logging
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from ml_collections import config_flags

from data import coco35l, languages, pipeline, tokenizer
from data import images as image_lib
from data import xm3600 as xm3600_data
from eval import cider, report
from model import decode
from training import checkpointing, run_config
from training import state as state_lib

METRIC_PREFIX = "eval/cider_d/"


def detokenize(vocab, tokens):
    """Token ids [batch, length] -> strings, cut at the first EOS (id 1).

    Padding (0) and ids of the padded embedding rows beyond the vocabulary
    (see training/state.padded_vocab_size) are dropped.
    """
    texts = []
    for row in np.asarray(tokens):
        ids = row.tolist()
        if 1 in ids:
            ids = ids[:ids.index(1)]
        texts.append(vocab.decode([i for i in ids if 1 < i < vocab.vocab_size]))
    return texts


# ------------------------------------------------------------------ data ----
@dataclasses.dataclass
class CaptionSet:
    """Evaluation images shared by several languages, with each language's references.

    Attributes:
        name: what the set is ("xm3600", "coco_dev"), for messages.
        images: float32 [num_images, H, W, 3] in [-1, 1], each image once.
        rows: {lang: int array [n_lang]} rows of `images` that language scores.
        keys: {lang: [n_lang] image keys}.
        references: {lang: [n_lang] lists of raw reference captions}.
        prompts: {lang: int32 [Lp]} the LangId prompt ids.
    """
    name: str
    images: np.ndarray
    rows: dict
    keys: dict
    references: dict
    prompts: dict

    @property
    def langs(self):
        return tuple(self.keys)


def _read_images(paths, image_size, names, num_threads=None):
    """Decodes each path once: float32 [len(paths), size, size, 3]."""
    with concurrent.futures.ThreadPoolExecutor(num_threads or os.cpu_count() or 1) as pool:
        pixels = list(pool.map(lambda p, n: image_lib.read(p, image_size, name=n), paths, names))
    return np.stack(pixels)


def _caption_set(name, per_lang, paths, vocab, *, image_size, prompt_template, max_prompt_len):
    """Builds a CaptionSet from {lang: (keys, refs, image ids)} and {image id: path}."""
    order = {image_id: row for row, image_id in enumerate(paths)}
    images = _read_images(list(paths.values()), image_size, [str(i) for i in paths])
    return CaptionSet(
        name=name, images=images,
        rows={lang: np.array([order[i] for i in ids], np.int64)
              for lang, (_, _, ids) in per_lang.items()},
        keys={lang: list(keys) for lang, (keys, _, _) in per_lang.items()},
        references={lang: list(refs) for lang, (_, refs, _) in per_lang.items()},
        prompts={lang: pipeline.tokenize_prompt(vocab, lang, prompt_template, max_prompt_len)
                 for lang in per_lang})


def load_xm3600(data_dir, langs, vocab, *, image_size, prompt_template, max_prompt_len,
                max_images=None):
    """Loads the XM3600 split of `data_dir` for `langs`, decoding each image once.

    Args:
        data_dir: folder with captions.jsonl and images/<image/key>.jpg.
        langs: XM3600 language codes.
        vocab: the seqio vocabulary (for the prompts).
        image_size: side of the square model input.
        prompt_template: as in data/pipeline.prompt_text.
        max_prompt_len: prompt length with EOS and padding.
        max_images: per language, keep only the first this many images (file order).

    Returns:
        A `CaptionSet`; per language the same keys, references and pixels as
        data/pipeline.xm3600_eval_set.

    Raises:
        ValueError: a language without captions in the file (all such are named).
    """
    langs = languages.check_langs(langs)
    path = os.path.join(data_dir, "captions.jsonl")
    records = xm3600_data.read_captions(path)
    per_lang, paths, missing = {}, {}, []
    for lang in langs:
        keys, refs = xm3600_data.references(records, lang)
        if not keys:
            missing.append(lang)
            continue
        keys, refs = keys[:max_images], refs[:max_images]
        per_lang[lang] = (keys, refs, keys)
        for key in keys:
            paths.setdefault(key, xm3600_data.image_path(data_dir, key))
    if missing:
        present = sorted({lang for r in records for lang in r.captions})
        raise ValueError(f"{path} has no captions in {', '.join(missing)}; it has "
                         f"{', '.join(present)} (choose languages with --langs)")
    return _caption_set("xm3600", per_lang, paths, vocab, image_size=image_size,
                        prompt_template=prompt_template, max_prompt_len=max_prompt_len)


def load_coco_dev(manual_dir, langs, vocab, *, image_size, prompt_template, max_prompt_len,
                  max_images=None):
    """Loads COCO-35L's dev split (Karpathy val) with the translated references of `langs`.

    Args:
        manual_dir: the COCO-35L release folder (data/coco35l.py).
        langs: codes of the 35 training languages.
        vocab, image_size, prompt_template, max_prompt_len, max_images: as `load_xm3600`.

    Returns:
        A `CaptionSet` whose keys are COCO image ids (as strings).
    """
    examples, _ = coco35l.read_split(manual_dir, "dev", langs)
    per_lang, paths = {}, {}
    for lang in langs:
        chosen = examples[lang][:max_images]
        if not chosen:
            raise ValueError(f"COCO-35L dev in {manual_dir} has no examples in {lang!r}")
        ids = [e.cocoid for e in chosen]
        per_lang[lang] = ([str(i) for i in ids], [list(e.captions) for e in chosen], ids)
        for e in chosen:
            paths.setdefault(e.cocoid, e.image_path)
    return _caption_set("coco_dev", per_lang, paths, vocab, image_size=image_size,
                        prompt_template=prompt_template, max_prompt_len=max_prompt_len)


# -------------------------------------------------------------- decoding ----
@dataclasses.dataclass(frozen=True)
class Decoding:
    """How captions are decoded: "greedy", or "beam" with T5X's length penalty alpha."""
    method: str = "greedy"
    beam_size: int = 4
    alpha: float = 0.6

    def __post_init__(self):
        if self.method not in ("greedy", "beam"):
            raise ValueError(f"unknown decoding {self.method!r}; known: greedy, beam")
        if self.beam_size < 1:
            raise ValueError(f"beam size must be >= 1, got {self.beam_size}")


@functools.lru_cache(maxsize=8)
def make_decoder(model, max_len, decoding):
    """Returns a jit-compiled fn(params, images, prompt) -> tokens [batch, max_len].

    Cached, so that evaluators of the same model (the in-loop one, then the
    tool in the same process; XM3600 and COCO-dev) share their compilations.
    """
    if decoding.method == "greedy":
        def fn(params, images, prompt):
            return decode.greedy(model, params, images, prompt, max_len=max_len)
    else:
        def fn(params, images, prompt):
            tokens, _ = decode.beam_search(model, params, images, prompt, max_len=max_len,
                                           beam_size=decoding.beam_size, alpha=decoding.alpha)
            return tokens
    return jax.jit(fn)


def batch_sharding(params, batch_size):
    """NamedSharding splitting a batch over the 'data' axis of the params' mesh, or None.

    None (inputs replicated, as numpy) when the params are not on a mesh with
    a 'data' axis or `batch_size` does not divide by its size.
    """
    leaves = jax.tree.leaves(params)
    sharding = getattr(leaves[0], "sharding", None) if leaves else None
    if not isinstance(sharding, NamedSharding) or "data" not in sharding.mesh.axis_names:
        return None
    if batch_size % sharding.mesh.shape["data"]:
        logging.log_first_n(logging.WARNING, "eval batch %d does not divide by the %d data "
                            "devices: every device decodes the whole batch", 1, batch_size,
                            sharding.mesh.shape["data"])
        return None
    return NamedSharding(sharding.mesh, P("data"))


def _to_host(tokens):
    """A (possibly multi-process) global array as numpy on every process."""
    if getattr(tokens, "is_fully_addressable", True):
        return np.asarray(tokens)
    return np.asarray(multihost_utils.process_allgather(tokens, tiled=True))


@dataclasses.dataclass
class LangResult:
    """Captions and CIDEr-D of one language (per_image follows keys)."""
    keys: list
    captions: list
    per_image: np.ndarray
    corpus: float


class Evaluator:
    """Decodes and scores the XM3600 split of `config.evals.xm3600`.

    Args:
        eval_config: `config.evals.xm3600` (data_dir, langs, batch_size,
            max_decode_len, max_images).
        data_config: `config.data` (prompt template and length).
        model: the Captioner.
        vocab: the seqio vocabulary of the targets.
        image_size: the model's input resolution.
        langs: languages to evaluate instead of `eval_config.langs`.
        decoding: a `Decoding` (default: greedy).
    """

    def __init__(self, eval_config, data_config, model, vocab, image_size, *, langs=None,
                 decoding=None):
        langs = languages.check_langs(eval_config.langs if langs is None else langs)
        caption_set = load_xm3600(
            eval_config.data_dir, langs, vocab, image_size=image_size,
            prompt_template=data_config.get("prompt_template", pipeline.DEFAULT_PROMPT_TEMPLATE),
            max_prompt_len=data_config.max_prompt_len,
            max_images=eval_config.get("max_images", None))
        self._setup(caption_set, model, vocab, eval_config.batch_size,
                    eval_config.max_decode_len, decoding)

    @classmethod
    def for_caption_set(cls, caption_set, model, vocab, *, batch_size, max_decode_len,
                        decoding=None):
        """An Evaluator of any `CaptionSet` (e.g. `load_coco_dev`'s)."""
        self = cls.__new__(cls)
        self._setup(caption_set, model, vocab, batch_size, max_decode_len, decoding)
        return self

    def _setup(self, caption_set, model, vocab, batch_size, max_decode_len, decoding):
        if batch_size < 1:
            raise ValueError(f"evaluation batch_size must be >= 1, got {batch_size}")
        self.data = caption_set
        self.langs = caption_set.langs
        self.batch_size = batch_size
        self.vocab = vocab
        self.decoding = decoding or Decoding()
        self.scorers = dict(zip(self.langs, cider.map_languages(
            lambda lang: cider.CiderScorer(caption_set.references[lang], lang), self.langs),
            strict=True))
        self._decode = make_decoder(model, max_decode_len, self.decoding)

    @property
    def num_images(self):
        """{lang: number of images scored}."""
        return {lang: len(self.data.keys[lang]) for lang in self.langs}

    def predict(self, params, lang, progress=None):
        """Captions (strings) for every image of `lang`, in the split's order.

        Args:
            params: the model parameters (sharded or not).
            lang: one of `self.langs`.
            progress: optional callback(lang, images done, images of lang) after each batch.
        """
        rows = self.data.rows[lang]
        prompt = self.data.prompts[lang]
        n, bs = len(rows), self.batch_size
        sharding = batch_sharding(params, bs)
        captions = []
        for start in range(0, n, bs):
            batch_rows = rows[start:start + bs]
            valid = len(batch_rows)
            # Pad the last batch (repeating its last image) so one compiled shape serves all.
            batch_rows = np.concatenate([batch_rows, np.repeat(batch_rows[-1:], bs - valid)])
            images = self.data.images[batch_rows]  # [bs, H, W, 3]
            prompts = np.tile(prompt[None], (bs, 1))  # [bs, Lp]
            if sharding is not None:
                images, prompts = (
                    jax.make_array_from_callback(x.shape, sharding, lambda i, x=x: x[i])
                    for x in (images, prompts))
            tokens = _to_host(self._decode(params, images, prompts))  # [bs, max_len]
            captions += detokenize(self.vocab, tokens)[:valid]
            if progress is not None:
                progress(lang, len(captions), n)
        return captions

    def evaluate(self, params, progress=None):
        """Decodes and scores every language: {lang: LangResult}.

        A language is scored on a CPU thread while the next one decodes.
        """
        captions, scored = {}, {}
        with concurrent.futures.ThreadPoolExecutor(1) as scoring:
            for lang in self.langs:
                captions[lang] = self.predict(params, lang, progress)
                scored[lang] = scoring.submit(self.scorers[lang].score, captions[lang])
            return {lang: LangResult(self.data.keys[lang], captions[lang],
                                     scored[lang].result().per_image, scored[lang].result().corpus)
                    for lang in self.langs}

    def run(self, params):
        """Returns {"eval/cider_d/<lang>": score, ..., "eval/cider_d/avg": mean}."""
        scores = {f"{METRIC_PREFIX}{lang}": r.corpus
                  for lang, r in self.evaluate(params).items()}
        scores[f"{METRIC_PREFIX}avg"] = float(np.mean(list(scores.values())))
        logging.info("XM3600 CIDEr-D: %s", scores)
        return scores


# ------------------------------------------------------------------ tool ----
class UsageError(ValueError):
    """Bad command-line input; main() prints it as `error: ...` and exits with status 2."""


def _duration(seconds):
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class Progress:
    """Prints decoding progress with an ETA, at most every `interval` seconds.

    The rate is measured from the end of the first batch on, so that
    compilation does not inflate the ETA.
    """

    def __init__(self, total_images, num_langs, what, stream=None, interval=10.0):
        self.total, self.num_langs, self.what = total_images, num_langs, what
        self.interval = interval
        self.stream = stream or sys.stdout
        self._done_before = 0   # images of finished languages
        self._langs_done = 0
        self._start = time.time()
        self._rate_start = None  # (time, images) after the first batch
        self._last_print = 0.0

    def __call__(self, lang, done, count):
        now = time.time()
        total_done = self._done_before + done
        if self._rate_start is None:
            self._rate_start = (now, total_done)
        finished = done == count
        if finished or now - self._last_print >= self.interval:
            t0, n0 = self._rate_start
            rate = (total_done - n0) / (now - t0) if now > t0 and total_done > n0 else None
            eta = _duration((self.total - total_done) / rate) if rate else "?"
            speed = f"{rate:.1f} images/s" if rate else "first batch"
            print(f"{self.what} [{lang} {self._langs_done + 1}/{self.num_langs}] {done}/{count} "
                  f"images | {speed} | elapsed {_duration(now - self._start)} | ETA {eta}",
                  file=self.stream, flush=True)
            self._last_print = now
        if finished:
            self._done_before += count
            self._langs_done += 1


def resolve_langs(spec, config):
    """--langs: "all" (the 36 XM3600 languages), "config" (evals.xm3600.langs) or a list."""
    if spec == "all":
        return tuple(languages.XM3600_LANGS)
    if spec == "config":
        return languages.check_langs(config.evals.xm3600.langs)
    return languages.check_langs(spec)


def write_predictions(path, keys, lang, captions):
    """Writes {"image/key", "lang", "caption"} lines (the eval.cider CLI's input)."""
    with open(path, "w", encoding="utf-8") as f:
        for key, caption in zip(keys, captions, strict=True):
            f.write(json.dumps({"image/key": key, "lang": lang, "caption": caption},
                               ensure_ascii=False) + "\n")


def _define_flags(flag_values):
    config = config_flags.DEFINE_config_file(
        "config", None, "The run's config file (`file.py:variant` and --config.x=y work).",
        flag_values=flag_values, lock_config=True)
    flags.DEFINE_string("workdir", None, "The run's folder (holds checkpoints/).",
                        flag_values=flag_values)
    flags.DEFINE_integer("step", None, "Checkpoint step (default: the latest).",
                         flag_values=flag_values)
    flags.DEFINE_string("langs", "all", "all | config | comma-separated codes.",
                        flag_values=flag_values)
    flags.DEFINE_enum("decode", "greedy", ["greedy", "beam"], "Decoding.",
                      flag_values=flag_values)
    flags.DEFINE_integer("beam_size", None, "Beams (default: evals.xm3600.beam_size or 4).",
                         flag_values=flag_values)
    flags.DEFINE_float("alpha", 0.6, "Beam search length-penalty exponent (T5X).",
                       flag_values=flag_values)
    flags.DEFINE_string("out", None, "Results folder (default <workdir>/xm3600_step<N>).",
                        flag_values=flag_values)
    flags.DEFINE_string("name", None, "This model's column in table.md (default: the "
                        "workdir's name).", flag_values=flag_values)
    return config


def _check_has_checkpoint(workdir):
    ckpt_dir = checkpointing.checkpoint_dir(workdir)
    if not os.path.isdir(ckpt_dir) or not any(n.isdigit() for n in os.listdir(ckpt_dir)):
        raise UsageError(f"no checkpoint in {ckpt_dir}: train first, or pass the --workdir "
                         f"of a run")


def _restore(config, workdir, vocab, step):
    """(model, params, step) of the run's checkpoint, with bad input as UsageError."""
    ckpt_dir = checkpointing.checkpoint_dir(workdir)
    saved = run_config.load(workdir)
    changed = [c for c in run_config.incompatible_changes(saved or {}, config.to_dict())
               if c.startswith(("model.", "vocab."))] if saved else []
    try:
        return state_lib.restore_params(config, workdir, vocab.vocab_size, step)
    except FileNotFoundError as e:
        raise UsageError(str(e)) from None
    except (ValueError, TypeError) as e:
        hint = f" (fields that differ from {workdir}/config.json: {'; '.join(changed)})" \
            if changed else ""
        raise UsageError(f"the checkpoint in {ckpt_dir} does not fit the model of --config"
                         f"{hint}: {e}") from None


def _evaluate_set(evaluator, params, out_dir, prefix, what):
    """Decodes and scores a set, writes its prediction files; returns {lang: LangResult}."""
    progress = Progress(sum(evaluator.num_images.values()), len(evaluator.langs), what)
    results = evaluator.evaluate(params, progress)
    for lang, r in results.items():
        write_predictions(os.path.join(out_dir, f"{prefix}{lang}.jsonl"), r.keys, lang,
                          r.captions)
    return results


def evaluate_checkpoint(config, workdir, *, step=None, langs="all", decoding=None, out=None,
                        name=None, config_name=None):
    """Evaluates a run's checkpoint on XM3600 (and COCO-dev) and writes the results folder.

    Args:
        config: the run's ConfigDict.
        workdir: the run's folder.
        step: checkpoint step, None for the latest.
        langs: "all", "config" or comma-separated codes (see `resolve_langs`).
        decoding: a `Decoding` (default greedy).
        out: the results folder (default <workdir>/xm3600_step<step>).
        name: this model's column heading in table.md.
        config_name: recorded in scores.json.

    Returns:
        (results folder, {lang: CIDEr-D on XM3600}, {lang: CIDEr-D on COCO-dev} or {}).

    Raises:
        UsageError: bad input (no checkpoint, unknown step or language, missing data).
    """
    try:
        langs = resolve_langs(langs, config)
    except ValueError as e:
        raise UsageError(str(e)) from None
    _check_has_checkpoint(workdir)
    try:
        vocab = tokenizer.get_vocabulary(config.vocab.path)
    except (FileNotFoundError, ValueError) as e:
        raise UsageError(f"config.vocab.path: {e}") from None
    model, params, step = _restore(config, workdir, vocab, step)
    out = out or os.path.join(workdir, f"xm3600_step{step}")
    os.makedirs(out, exist_ok=True)
    decoding = decoding or Decoding()
    image_size, data = config.model.image_size, config.data
    template = data.get("prompt_template", pipeline.DEFAULT_PROMPT_TEMPLATE)
    print(f"Evaluating step {step} of {workdir} ({decoding.method} decoding) in "
          f"{len(langs)} languages", flush=True)

    sets = []
    eval_config = config.evals.xm3600
    try:
        xm = Evaluator(eval_config, data, model, vocab, image_size, langs=langs,
                       decoding=decoding)
    except (FileNotFoundError, ValueError) as e:
        raise UsageError(str(e)) from None
    sets.append((xm, "predictions_", "XM3600"))
    coco_config = config.evals.get("coco_dev", None)
    dev_langs = [lang for lang in langs if lang in languages.TRAIN_35L_LANGS]
    if coco_config is not None and coco_config.get("manual_dir") and dev_langs:
        try:
            dev_set = load_coco_dev(coco_config.manual_dir, dev_langs, vocab,
                                    image_size=image_size, prompt_template=template,
                                    max_prompt_len=data.max_prompt_len,
                                    max_images=coco_config.get("max_images", None))
        except (FileNotFoundError, ValueError) as e:
            raise UsageError(f"config.evals.coco_dev: {e}") from None
        sets.append((Evaluator.for_caption_set(
            dev_set, model, vocab, batch_size=eval_config.batch_size,
            max_decode_len=eval_config.max_decode_len, decoding=decoding),
            "predictions_coco_dev_", "COCO-dev"))

    results = []
    for evaluator, prefix, what in sets:
        results.append(_evaluate_set(evaluator, params, out, prefix, what))
    scores = {lang: r.corpus for lang, r in results[0].items()}
    dev_scores = {lang: r.corpus for lang, r in results[1].items()} if len(results) > 1 else {}
    per_image = {lang: dict(zip(r.keys, r.per_image.tolist(), strict=True))
                 for lang, r in results[0].items()}
    report.write_report(out, scores, xm.num_images, per_image=per_image,
                        coco_dev_scores=dev_scores or None,
                        name=name or os.path.basename(os.path.abspath(workdir)), step=step,
                        config=config_name)
    _add_summary(out, scores, dev_scores, decoding, workdir)
    return out, scores, dev_scores


def _add_summary(out, scores, dev_scores, decoding, workdir):
    """Adds the paper's averages and the decoding settings to scores.json."""
    path = os.path.join(out, "scores.json")
    summary = report.read_scores_json(path)
    averages = report.averages(scores)
    summary["avg_35"], summary["avg_36"] = averages["avg_35"], averages["avg_36"]
    if dev_scores:
        summary["coco_dev_avg_35"] = report.averages(dev_scores)["avg_35"]
    summary["decoding"] = dataclasses.asdict(decoding)
    summary["workdir"] = os.path.abspath(workdir)
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(summary, indent=2, ensure_ascii=False) + "\n")


def _print_summary(out, scores, dev_scores):
    fmt = lambda v: "–" if v is None else f"{v:.3f}"  # noqa: E731
    for lang, value in scores.items():
        dev = f"   COCO-dev {dev_scores[lang]:.3f}" if lang in dev_scores else ""
        print(f"  {lang:>4}  XM3600 {value:.3f}{dev}")
    avg = report.averages(scores)
    print(f"XM3600 CIDEr-D average: 35 languages {fmt(avg['avg_35'])}, 36 languages "
          f"{fmt(avg['avg_36'])}, these {len(scores)} {np.mean(list(scores.values())):.3f}")
    print(f"Results: {out}/table.md")


def main(argv=None):
    """The command-line tool; returns 0, or exits with status 2 and `error: ...`."""
    argv = list(sys.argv if argv is None else argv)
    flag_values = flags.FlagValues()
    config_flag = _define_flags(flag_values)
    try:
        flag_values(argv)
        if flag_values.config is None:
            raise UsageError("--config is required (e.g. --config configs/bb.py)")
        if not flag_values.workdir:
            raise UsageError("--workdir is required (the run's folder)")
        config = config_flag.value
        beam_size = flag_values.beam_size or config.evals.xm3600.get("beam_size", 4)
        try:
            decoding = Decoding(flag_values.decode, beam_size, flag_values.alpha)
        except ValueError as e:
            raise UsageError(str(e)) from None
        out, scores, dev_scores = evaluate_checkpoint(
            config, flag_values.workdir, step=flag_values.step, langs=flag_values.langs,
            decoding=decoding, out=flag_values.out, name=flag_values.name,
            config_name=flag_values["config"].config_filename)
    except (UsageError, flags.Error) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    _print_summary(out, scores, dev_scores)
    return 0


if __name__ == "__main__":
    main()
