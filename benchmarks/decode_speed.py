"""Caption decoding speed: greedy and beam search, cached vs uncached.

    python benchmarks/decode_speed.py [--sizes tiny,bb] [--bb_batch 2 --bb_max_len 8]

Runs on jax's default backend (this CPU, or a GPU when there is one) with
random weights (the speed does not depend on their values). For each size
it reports captions per second of
- greedy decoding with the key/value cache (model/decode.py),
- greedy decoding without a cache: the image is encoded once, then the
  decoder reruns on the whole prefix buffer for every new token,
- beam search (T5X semantics) with the cache,
and the speed-up of cached over uncached greedy. EOS is disabled
(eos_id=-1) so that every run decodes exactly max_len tokens. Compilation is
timed apart from the runs (the best of --repeats runs is reported).

Sizes: 'tiny' (ViT mu/8 at 32 px + t5-tiny) and 'bb' (the paper's BB:
ViT-B/16 at 224 px + mT5-base, 250k vocabulary); on a CPU keep BB's batch
and length small, the defaults are batch 2 and 8 tokens.
"""

import argparse
import functools
import os
import sys
import time

import jax
import jax.numpy as jnp
import ml_collections

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from model import (
    captioner,  # noqa: E402
    decode,  # noqa: E402
    layers,  # noqa: E402
)

SIZES = {
    "tiny": dict(vit=dict(variant="mu/8"), t5=dict(variant="t5-tiny"), image_size=32),
    "bb": dict(vit=dict(variant="B/16"), t5=dict(variant="mt5-base"), image_size=224),
}
NO_EOS = -1


@functools.partial(jax.jit, static_argnames=("model", "max_len"))
def uncached_greedy(model, params, images, prompt_tokens, max_len: int):
    """Greedy decoding that reruns the decoder on the full prefix every step.

    Returns:
        [batch, max_len] int32 tokens (no EOS handling).
    """
    variables = {"params": params}
    encoded, mask = model.apply(variables, images, prompt_tokens, method="encode")
    # [batch, max_len + 1]: position 0 is the start token 0.
    tokens = jnp.zeros((images.shape[0], max_len + 1), jnp.int32)

    def body(i, tokens):
        # The decoder is causal, so positions after i do not change logits[:, i].
        logits = model.apply(variables, encoded, mask, tokens[:, :-1], method="decode")
        next_token = jnp.argmax(jax.lax.dynamic_index_in_dim(logits, i, 1, False), -1)
        return jax.lax.dynamic_update_slice(tokens, next_token[:, None].astype(jnp.int32),
                                            (0, i + 1))

    return jax.lax.fori_loop(0, max_len, body, tokens)[:, 1:]


def _time(fn, repeats: int):
    """(compile + first run seconds, best run seconds) of a jitted call."""
    start = time.perf_counter()
    jax.block_until_ready(fn())
    first = time.perf_counter() - start
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - start)
    return first, best


def bench_size(name: str, batch: int, max_len: int, beam_size: int, repeats: int,
               methods=None, model_config=None) -> list:
    """Times the decoders at one model size; returns table rows.

    Args:
        name: the size's name in the rows (a key of SIZES unless `model_config` is given).
        batch, max_len, beam_size, repeats: as the flags.
        methods: the row names to time (default: all three).
        model_config: a `config.model`-like dict instead of SIZES[name] (e.g. bf16).
    """
    model = captioner.from_config(ml_collections.ConfigDict(model_config or SIZES[name]))
    params = layers.random_params(captioner.abstract_params(model), seed=0)
    size = model.config.image_size
    images = jax.random.uniform(jax.random.key(0), (batch, size, size, 3), minval=-1, maxval=1)
    prompt = jnp.full((batch, 3), 5, jnp.int32)
    runs = {
        "greedy (cache)": lambda: decode.greedy(model, params, images, prompt, max_len,
                                                eos_id=NO_EOS),
        "greedy (no cache)": lambda: uncached_greedy(model, params, images, prompt, max_len),
        f"beam {beam_size} (cache)": lambda: decode.beam_search(
            model, params, images, prompt, max_len, beam_size=beam_size, eos_id=NO_EOS)[0],
    }
    rows = []
    for method, fn in runs.items():
        if methods is not None and method not in methods:
            continue
        first, best = _time(fn, repeats)
        rows.append(dict(size=name, method=method, batch=batch, tokens=max_len,
                         compile_s=first - best, run_s=best, captions_per_s=batch / best))
        print(f"  {name:5s} {method:18s} done ({best:.3f} s per batch)", file=sys.stderr)
    return rows


def format_table(rows: list) -> str:
    """The printed table, with cached/uncached greedy ratios per size."""
    lines = [f"{'size':6s}{'method':20s}{'batch':>6s}{'tokens':>7s}{'compile s':>11s}"
             f"{'run s':>9s}{'captions/s':>12s}"]
    for row in rows:
        lines.append(f"{row['size']:6s}{row['method']:20s}{row['batch']:>6d}{row['tokens']:>7d}"
                     f"{row['compile_s']:>11.2f}{row['run_s']:>9.3f}{row['captions_per_s']:>12.2f}")
    for size in dict.fromkeys(row["size"] for row in rows):
        by_method = {row["method"]: row for row in rows if row["size"] == size}
        if not {"greedy (cache)", "greedy (no cache)"} <= set(by_method):
            continue
        cached, uncached = by_method["greedy (cache)"], by_method["greedy (no cache)"]
        lines.append(f"{size}: cached greedy is {uncached['run_s'] / cached['run_s']:.2f}x "
                     f"as fast as uncached greedy")
    return "\n".join(lines)


def main(argv=None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="tiny,bb", help="comma-separated: tiny, bb")
    parser.add_argument("--batch", type=int, default=16, help="tiny batch size")
    parser.add_argument("--max_len", type=int, default=32, help="tiny decode length")
    parser.add_argument("--bb_batch", type=int, default=2, help="BB batch size")
    parser.add_argument("--bb_max_len", type=int, default=8, help="BB decode length")
    parser.add_argument("--beam_size", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    unknown = [s for s in sizes if s not in SIZES]
    if unknown:
        parser.error(f"unknown size(s) {', '.join(unknown)}; known: {', '.join(SIZES)}")

    print(f"backend: {jax.default_backend()} ({jax.devices()[0].device_kind}), "
          f"{jax.device_count()} device(s); random weights, EOS disabled", flush=True)
    rows = []
    for name in sizes:
        batch, max_len = ((args.bb_batch, args.bb_max_len) if name == "bb"
                          else (args.batch, args.max_len))
        if name == "bb" and jax.default_backend() == "cpu":
            print(f"BB on CPU: small batch {batch} and {max_len} tokens only", flush=True)
        rows += bench_size(name, batch, max_len, args.beam_size, args.repeats)
    print(format_table(rows))


if __name__ == "__main__":
    main()
