"""Fits `data.max_target_len` to the training captions: their lengths and what padding costs.

    python -m tools.target_length --config configs/bb.py [--captions_per_lang 5000]

Training targets are padded to `data.max_target_len` positions, and the decoder
and the 250k-way logits layer work at every one of them: at the baselines' 64
positions and COCO captions of ~10-20 mT5 pieces, about a third of BB's model
FLOPs go to padding (benchmarks/train_step.py reports the share). This reads
the config's training captions from the release files (no images, no TFDS
build), tokenizes a deterministic sample of each language with the config's
vocabulary, and prints per language the percentiles of pieces + EOS and the
share of captions that `data.max_target_len` cuts (the pipeline truncates
longer ones and keeps their EOS), then the smallest multiple of 8 that holds
99.9% of all sampled captions, with the model FLOPs per training example
(training/flops.py) at both lengths. Pass the suggestion on as
`--config.data.max_target_len=N`; evaluators decode up to their own
`max_decode_len`.
"""

import sys

import numpy as np
from absl import flags, logging
from ml_collections import config_flags

import errors
from data import tokenizer
from data.releases import cc3m35l as cc3m35l_release
from data.releases import coco35l as coco35l_release
from model import captioner
from training import flops, run_config

PERCENTILES = (50, 90, 99, 99.9)
COVERAGE = 99.9  # Percent of captions the suggested length must hold whole.
MULTIPLE = 8  # Suggested lengths are multiples of 8 (tile-friendly shapes).


def read_captions(data_config, split="train"):
    """The captions of the configured dataset and languages: {lang: [caption, ...]}."""
    if data_config.dataset == "coco35l":
        examples, _ = coco35l_release.read_split(data_config.manual_dir, split,
                                                 data_config.langs, check_images=False)
        return {lang: [c for e in items for c in e.captions] for lang, items in examples.items()}
    if data_config.dataset == "cc3m35l":
        path = cc3m35l_release.translations_path(data_config.manual_dir, split)
        captions = {lang: [] for lang in data_config.langs}
        stream = cc3m35l_release.open_translations(path)
        for _, lang, caption in cc3m35l_release.stream_captions(stream, data_config.langs):
            captions[lang].append(caption)
        return captions
    raise ValueError(f"config.data.dataset: unknown dataset {data_config.dataset!r}; known: "
                     f"coco35l, cc3m35l")


def sample(captions, n, seed=0):
    """Up to `n` of `captions`, drawn without replacement in a fixed order."""
    if len(captions) <= n:
        return list(captions)
    picked = np.random.default_rng(seed).choice(len(captions), n, replace=False)
    return [captions[i] for i in np.sort(picked)]


def piece_lengths(vocab, captions):
    """Pieces + EOS of each caption: what a target needs, untruncated (int array)."""
    return np.array([len(ids) + 1 for ids in vocab.tokenizer.encode(list(captions))], np.int64)


def length_holding(lengths, percent):
    """The smallest length that at least `percent` percent of `lengths` fit in."""
    # The k-th smallest, k = ceil(percent% of n); rounded first so that 99.9% of 1000 is 999.
    k = max(1, int(np.ceil(round(percent * len(lengths) / 100, 9))))
    return int(np.partition(lengths, k - 1)[k - 1])


def smallest_length(lengths, coverage=COVERAGE, multiple=MULTIPLE):
    """The smallest multiple of `multiple` that holds `coverage` percent of `lengths` whole."""
    return -(-length_holding(lengths, coverage) // multiple) * multiple


def cut_share(lengths, max_len):
    """Share of captions longer than `max_len` positions (truncated by the pipeline)."""
    return float(np.mean(lengths > max_len)) if len(lengths) else 0.0


def format_table(lengths_by_lang, max_len):
    """Per-language percentiles, maximum and cut share, and a pooled last row."""
    head = f"{'lang':<6}{'captions':>9}" + "".join(f"{'p' + format(q, 'g'):>7}"
                                                   for q in PERCENTILES)
    lines = [head + f"{'max':>6}{f'cut at {max_len}':>12}"]
    rows = list(lengths_by_lang.items())
    rows.append(("all", np.concatenate([v for _, v in rows])))
    for lang, lengths in rows:
        if not len(lengths):
            lines.append(f"{lang:<6}{0:>9}  (no captions)")
            continue
        cells = "".join(f"{length_holding(lengths, q):>7}" for q in PERCENTILES)
        lines.append(f"{lang:<6}{len(lengths):>9}{cells}{int(lengths.max()):>6}"
                     f"{cut_share(lengths, max_len):>11.2%}")
    return lines


def summary(config, vocab_size, lengths, max_len):
    """What the current and the suggested max_target_len cost, in lines."""
    suggested = smallest_length(lengths)
    model_config = captioner.from_config(config.model, vocab_size).config
    prompt_len = config.data.max_prompt_len
    now = flops.train_step_flops(model_config, 1, prompt_len, max_len)
    then = flops.train_step_flops(model_config, 1, prompt_len, suggested)
    return [
        f"data.max_target_len={max_len} cuts {cut_share(lengths, max_len):.2%} of the sampled "
        f"captions; {suggested}, the smallest multiple of {MULTIPLE} holding {COVERAGE:g}% of "
        f"them whole, cuts {cut_share(lengths, suggested):.2%}.",
        f"Model FLOPs per training example: {now / 1e9:.4g} GFLOP at {max_len} target "
        f"positions, {then / 1e9:.4g} GFLOP at {suggested} ({then / now - 1:+.0%}).",
        f"To train at that length: --config.data.max_target_len={suggested}",
    ]


def _define_flags(flag_values, argv):
    """The tool's flags; returns (config flag, captions-per-language flag)."""
    # sys_argv: ml_collections finds the --config.x overrides in it (default sys.argv).
    config = config_flags.DEFINE_config_file(
        "config", None, "The experiment's config file (its data and vocab fields are used).",
        flag_values=flag_values, sys_argv=argv)
    per_lang = flags.DEFINE_integer("captions_per_lang", 5000, "Captions sampled per language.",
                                    lower_bound=1, flag_values=flag_values)
    return config, per_lang


def main(argv=None):
    """The command-line tool; returns 0, or 2 with one `error: ...` line on bad input."""
    errors.quiet_native_logs()
    argv = list(sys.argv if argv is None else argv)
    flag_values = flags.FlagValues()
    config_flag, per_lang_flag = _define_flags(flag_values, argv)
    if any(arg in ("-h", "--help", "-help", "--helpfull") for arg in argv[1:]):
        print(__doc__ + "\nFlags:\n" + flag_values.get_help())
        return 0
    logging.set_verbosity(logging.WARNING)
    try:
        run_config.parse_flags(flag_values, argv)
        config = config_flag.value
        if config is None:
            raise run_config.ConfigError("--config is required (e.g. --config configs/bb.py)")
        try:
            vocab = tokenizer.get_vocabulary(config.vocab.path)
        except (OSError, ValueError) as e:
            raise run_config.ConfigError(f"config.vocab.path: {e}") from None
        captions = read_captions(config.data)
    except (run_config.ConfigError, OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    per_lang = per_lang_flag.value
    max_len = config.data.max_target_len
    lengths = {lang: piece_lengths(vocab, sample(caps, per_lang))
               for lang, caps in captions.items()}
    print(f"Caption lengths in pieces of {config.vocab.path} + EOS: {config.data.dataset} "
          f"train, up to {per_lang} captions per language")
    print("\n".join(format_table(lengths, max_len)))
    pooled = np.concatenate(list(lengths.values()))
    if not len(pooled):
        print("No captions read.")
        return 0
    print("\n".join(summary(config, vocab.vocab_size, pooled, max_len)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
