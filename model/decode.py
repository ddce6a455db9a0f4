"""Autoregressive caption decoding: greedy, beam search (T5X) and sampling.

Each encodes the images once, then runs the cached decoder in a lax.while_loop until every
sequence has produced EOS. Outputs are [batch, max_len] int32 ids, EOS kept, 0 after it;
`log_probs` scores any such output. `Decoding` holds and checks a decoding's settings.
"""

import dataclasses
import functools
import math
import numbers
import os
from typing import Any

import flax
import jax
import jax.numpy as jnp

import errors

# Log-probability of impossible continuations (finite, as T5X, to keep arithmetic NaN-free).
NEG_INF = -1.0e7


def _variables(params) -> dict:
    if hasattr(params, "keys") and "params" in params:
        return {"params": params["params"]}
    return {"params": params}


def _encode(model, params, images, prompt_tokens):
    """(variables, encoded, encoder mask): `params` (or {"params": params}) and the encoder's."""
    variables = _variables(params)
    return variables, *model.apply(variables, images, prompt_tokens, method="encode")


def init_cache(model, variables, encoded, encoder_mask, max_len: int):
    """Zero decoding cache ('cache' collection) for `max_len` positions of a batch."""
    tokens = jnp.zeros((encoded.shape[0], max_len), jnp.int32)
    shapes = jax.eval_shape(lambda: model.apply(variables, encoded, encoder_mask, tokens,
                                                decode=True, method="decode",
                                                mutable=["cache"])[1]["cache"])
    return jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)


def _step_logits(model, variables, cache, encoded, encoder_mask, tokens):
    """One cached decoder step: tokens [B] -> (logits [B, vocab] f32, cache)."""
    logits, state = model.apply({**variables, "cache": cache}, encoded, encoder_mask,
                                tokens[:, None], decode=True, method="decode",
                                mutable=["cache"])
    return logits[:, 0].astype(jnp.float32), state["cache"]


@flax.struct.dataclass
class SearchState:
    """Loop state of greedy decoding and sampling."""
    step: jax.Array       # [] int32: position written next
    tokens: jax.Array     # [batch, max_len] int32
    last: jax.Array       # [batch] int32: token fed at `step`
    ended: jax.Array      # [batch] bool: EOS already produced
    cache: Any            # the decoder's 'cache' collection
    rng: jax.Array        # PRNG key (unused by greedy)


@functools.partial(jax.jit, static_argnames=("model", "max_len", "eos_id"))
def greedy(model, params, images, prompt_tokens, max_len: int, eos_id: int = 1):
    """Greedy (argmax) decoding: [batch, max_len] int32 tokens, 0 after EOS."""
    return sample(model, params, images, prompt_tokens, max_len, jax.random.key(0),
                  temperature=0.0, eos_id=eos_id)


@functools.partial(jax.jit, static_argnames=("model", "max_len", "temperature", "top_k",
                                             "eos_id"))
def sample(model, params, images, prompt_tokens, max_len: int, rng: jax.Array,
           temperature: float = 1.0, top_k: int = 0, eos_id: int = 1):
    """Samples from softmax(logits / temperature) (0: argmax) among the top_k (0: all)."""
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")

    def pick(logits, step_rng):
        if temperature == 0.0:
            return jnp.argmax(logits, axis=-1)
        if top_k:
            if top_k > logits.shape[-1]:
                raise ValueError(f"top_k={top_k} exceeds the vocabulary ({logits.shape[-1]})")
            kth = jax.lax.top_k(logits, top_k)[0][..., -1:]  # Ties at the k-th are kept.
            logits = jnp.where(logits < kth, NEG_INF * 1e3, logits)
        return jax.random.categorical(step_rng, logits / temperature, axis=-1)

    variables, encoded, encoder_mask = _encode(model, params, images, prompt_tokens)
    batch = encoded.shape[0]

    def cond(state):
        return (state.step < max_len) & ~jnp.all(state.ended)

    def body(state):
        logits, cache = _step_logits(model, variables, state.cache, encoded, encoder_mask,
                                     state.last)
        rng, step_rng = jax.random.split(state.rng)
        token = jnp.where(state.ended, 0, pick(logits, step_rng)).astype(jnp.int32)
        tokens = jax.lax.dynamic_update_slice(state.tokens, token[:, None], (0, state.step))
        return SearchState(step=state.step + 1, tokens=tokens, last=token,
                           ended=state.ended | (token == eos_id), cache=cache, rng=rng)

    init = SearchState(
        step=jnp.zeros((), jnp.int32), tokens=jnp.zeros((batch, max_len), jnp.int32),
        last=jnp.zeros((batch,), jnp.int32), ended=jnp.zeros((batch,), bool),
        cache=init_cache(model, variables, encoded, encoder_mask, max_len), rng=rng)
    return jax.lax.while_loop(cond, body, init).tokens


def brevity_penalty(alpha: float, length) -> jax.Array:
    """T5X's length normalization ((5 + length) / 6) ** alpha."""
    return jnp.power((5.0 + length) / 6.0, alpha)


@flax.struct.dataclass
class BeamState:
    """Loop state of beam search; beams sorted best first."""
    step: jax.Array              # [] int32: tokens generated so far
    live_tokens: jax.Array       # [batch, beam, max_len] int32, no EOS yet
    live_log_probs: jax.Array    # [batch, beam] float32
    last: jax.Array              # [batch, beam] int32: token fed at `step`
    finished_tokens: jax.Array   # [batch, beam, max_len] int32, ending in EOS
    finished_scores: jax.Array   # [batch, beam] float32: length-normalized
    finished_flags: jax.Array    # [batch, beam] bool: slot holds a sequence
    cache: Any                   # decoder cache, batch axis = batch * beam


def _gather_beams(x: jax.Array, indices: jax.Array) -> jax.Array:
    """x [batch, old_beams, ...], indices [batch, new_beams] -> [batch, new_beams, ...]."""
    return jnp.take_along_axis(x, indices.reshape(indices.shape + (1,) * (x.ndim - 2)), axis=1)


def _gather_cache(cache, parents: jax.Array, beam_size: int):
    """Reorders cache rows (batch * beam on axis 0) by parent beam [batch, beam]."""
    rows = (jnp.arange(parents.shape[0])[:, None] * beam_size + parents).reshape(-1)
    # Position counters are scalars shared by all rows.
    return jax.tree_util.tree_map(lambda x: x if x.ndim == 0 else x[rows], cache)


@functools.partial(jax.jit, static_argnames=("model", "max_len", "beam_size", "alpha",
                                             "eos_id"))
def beam_search(model, params, images, prompt_tokens, max_len: int, beam_size: int = 4,
                alpha: float = 0.6, eos_id: int = 1):
    """Beam search as t5x/decoding.py: returns (tokens [batch, max_len], scores [batch]).
    Each step keeps the 2 * beam_size best extensions; those ending in EOS compete for the finished
    set with score log_prob / ((5 + length) / 6) ** alpha (length counts the EOS), the others for
    the live set. Stops at max_len or when no live beam could still beat the worst finished one. An
    example with no finished sequence gets its best live beam with its raw log-probability.
    `Decoding` checks beam_size (>= 1) where it is given."""
    variables, encoded, encoder_mask = _encode(model, params, images, prompt_tokens)
    batch = encoded.shape[0]
    # [batch * beam, ...]: every beam of an example sees the same encoding.
    encoded, encoder_mask = (jnp.repeat(x, beam_size, axis=0) for x in (encoded, encoder_mask))
    # The largest length normalization a live beam can still get (+ 1: T5X's start token).
    max_penalty = brevity_penalty(alpha, max_len + 1)

    def cond(state):
        best_live = state.live_log_probs[:, :1] / max_penalty
        worst_finished = jnp.where(state.finished_flags,
                                   jnp.min(state.finished_scores, axis=1, keepdims=True),
                                   NEG_INF)
        return (state.step < max_len) & ~jnp.all(worst_finished > best_live)

    def body(state):
        """Extends every live beam by every token and keeps the best (T5X rules)."""
        logits, cache = _step_logits(model, variables, state.cache, encoded, encoder_mask,
                                     state.last.reshape(-1))
        log_probs = jax.nn.log_softmax(logits).reshape(batch, beam_size, -1)
        vocab = log_probs.shape[-1]
        # [batch, beam * vocab]: log-probability of every one-token extension.
        candidates = (state.live_log_probs[:, :, None] + log_probs).reshape(batch, -1)
        # Keep 2 * beam so that beam live ones remain even if beam of them end now.
        top_log_probs, top_index = jax.lax.top_k(candidates, 2 * beam_size)
        parents, tokens = top_index // vocab, top_index % vocab
        seqs = _gather_beams(state.live_tokens, parents)  # [batch, 2 * beam, max_len]
        seqs = jax.lax.dynamic_update_slice(
            seqs, tokens[:, :, None].astype(jnp.int32), (0, 0, state.step))
        ends = tokens == eos_id

        # Live: the best `beam` extensions that did not end.
        alive_log_probs, alive = jax.lax.top_k(top_log_probs + ends * NEG_INF, beam_size)
        cache = _gather_cache(cache, jnp.take_along_axis(parents, alive, axis=1), beam_size)

        # Finished: merge the ones ending now (length-normalized) into the old set.
        new_scores = top_log_probs / brevity_penalty(alpha, state.step + 1) + (~ends) * NEG_INF
        finished_scores, best = jax.lax.top_k(
            jnp.concatenate([state.finished_scores, new_scores], axis=1), beam_size)
        return BeamState(
            step=state.step + 1,
            live_tokens=_gather_beams(seqs, alive),
            live_log_probs=alive_log_probs,
            last=jnp.take_along_axis(tokens, alive, axis=1).astype(jnp.int32),
            finished_tokens=_gather_beams(jnp.concatenate([state.finished_tokens, seqs], 1),
                                          best),
            finished_scores=finished_scores,
            finished_flags=_gather_beams(jnp.concatenate([state.finished_flags, ends], 1), best),
            cache=cache)

    shape = (batch, beam_size)
    init = BeamState(
        step=jnp.zeros((), jnp.int32),
        live_tokens=jnp.zeros(shape + (max_len,), jnp.int32),
        # Only the first beam is live, lest the first step fill the beams with copies.
        live_log_probs=jnp.tile(jnp.array([0.0] + [NEG_INF] * (beam_size - 1)), (batch, 1)),
        last=jnp.zeros(shape, jnp.int32),
        finished_tokens=jnp.zeros(shape + (max_len,), jnp.int32),
        finished_scores=jnp.full(shape, NEG_INF),
        finished_flags=jnp.zeros(shape, bool),
        cache=init_cache(model, variables, encoded, encoder_mask, max_len))
    final = jax.lax.while_loop(cond, body, init)

    any_finished = jnp.any(final.finished_flags, axis=1)
    tokens = jnp.where(any_finished[:, None], final.finished_tokens[:, 0], final.live_tokens[:, 0])
    scores = jnp.where(any_finished, final.finished_scores[:, 0], final.live_log_probs[:, 0])
    return tokens, scores


@functools.partial(jax.jit, static_argnames=("model", "eos_id"))
def log_probs(model, params, images, prompt_tokens, tokens, eos_id: int = 1):
    """[batch] log-probability of decoded `tokens` (teacher-forced, up to the first EOS included).
    What beam search ranks by before its length penalty, at temperature 1."""
    # [batch, length]: the decoder input is the output shifted right, from token 0.
    inputs = jnp.pad(tokens[:, :-1], ((0, 0), (1, 0)))
    variables, encoded, encoder_mask = _encode(model, params, images, prompt_tokens)
    logits = model.apply(variables, encoded, encoder_mask, inputs, method="decode")  # [b, L, V]
    token_log_probs = jnp.take_along_axis(jax.nn.log_softmax(logits.astype(jnp.float32)),
                                          tokens[:, :, None], axis=-1)[:, :, 0]
    is_eos = tokens == eos_id
    after_eos = (jnp.cumsum(is_eos, axis=1) - is_eos) > 0
    return jnp.sum(jnp.where(after_eos, 0.0, token_log_probs), axis=1)


METHODS = ("greedy", "beam", "sample")
# Each setting: its decoding, default, name in messages, kind, and range. Beyond alpha 10
# ((5 + length) / 6) ** alpha nears float32's overflow (at 36 for length 64); temperatures
# under 0.01 are argmax in all but name (say 0), over 100 uniform noise; jax.random.key folds
# seeds over 2**32 - 1 onto smaller ones.
_SETTINGS = {"beam_size": ("beam", 4, "beam size", int, 1, None),
             "alpha": ("beam", 0.6, "length-penalty alpha", float, 0, 10),
             "temperature": ("sample", 1.0, "temperature", float, 0, 100),
             "top_k": ("sample", 0, "top-k", int, 0, None),
             "seed": ("sample", 0, "seed", int, 0, 2**32 - 1)}
SETTINGS = tuple(_SETTINGS)
MIN_TEMPERATURE = 0.01


class DecodingError(errors.InputError):
    """A decoding setting of the wrong kind, out of range, or of another decoding."""

    def __init__(self, setting, problem):
        super().__init__(f"{setting}: {problem}")
        self.setting, self.problem = setting, problem


def _shown(value):
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def _checked(name, value):
    """A setting's value checked and made an int or a float, or DecodingError."""
    _, _, label, kind, low, high = _SETTINGS[name]
    what = "an integer" if kind is int else "a finite number"
    ok = not isinstance(value, bool) and isinstance(
        value, numbers.Integral if kind is int else numbers.Real)
    if not ok or not (kind is int or math.isfinite(value)) or value < low:
        raise DecodingError(name, f"{label} must be {what} >= {low}, got {_shown(value)}")
    if high is not None and value > high:
        raise DecodingError(name, f"{label} must be at most {high}, got {_shown(value)}")
    if name == "temperature" and 0 < value < MIN_TEMPERATURE:
        raise DecodingError(name, f"temperature must be 0 (argmax) or at least "
                                  f"{MIN_TEMPERATURE:g}, got {value!r}")
    return kind(value)


@dataclasses.dataclass(frozen=True)
class Decoding:
    """A decoding and its settings, checked when made (DecodingError naming the setting).
    Unset settings of the chosen method take `_SETTINGS`' defaults; another method's must be None (a
    beam size given to greedy decoding is an error, never ignored)."""
    method: str = "greedy"
    beam_size: int | None = None
    alpha: float | None = None
    temperature: float | None = None
    top_k: int | None = None
    seed: int | None = None

    def __post_init__(self):
        if self.method not in METHODS:
            raise DecodingError("decode", f"unknown decoding {self.method!r}; known: "
                                          f"{', '.join(METHODS)}")
        for name, (method, default, *_) in _SETTINGS.items():
            value = getattr(self, name)
            if method == self.method:
                object.__setattr__(self, name, _checked(name, default if value is None else value))
            elif value is not None:
                raise DecodingError(name, f"applies to {method} decoding only, not to "
                                          f"{self.method}")

    @classmethod
    def create(cls, method, settings, spell="{}"):
        """Decoding(method, **non-None settings); errors name a setting as `spell.format(name)`."""
        given = {k: v for k, v in settings.items() if v is not None}
        if unknown := [k for k in given if k not in _SETTINGS]:
            raise DecodingError(spell.format(unknown[0]), f"unknown decoding setting; known: "
                                                          f"{', '.join(SETTINGS)}")
        try:
            return cls(method, **given)
        except DecodingError as e:
            raise DecodingError(spell.format(e.setting), e.problem) from None

    @classmethod
    def from_config(cls, eval_config, spell="{}"):
        """The decoding of `config.evals.<name>`; sampling is refused (its score is chance)."""
        method = eval_config.get("decode", None) or "greedy"
        if method == "sample":
            raise DecodingError(spell.format("decode"), "an evaluation decodes greedy or beam "
                                                        "(sampled captions score by chance)")
        return cls.create(method, {k: eval_config.get(k, None) for k in SETTINGS}, spell)

    def as_dict(self):
        """{"method", and this decoding's settings}: what a results file records."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}

    def describe(self, seed=True):
        """E.g. "beam search (4 beams, alpha 0.6)"; `seed`: say the sampling seed."""
        if self.method == "beam":
            return f"beam search ({self.beam_size} beams, alpha {self.alpha:g})"
        if self.method == "sample":
            top = f", top-{self.top_k}" if self.top_k else ""
            seed = f", seed {self.seed}" if seed else ""
            return f"sampling (temperature {self.temperature:g}{top}{seed})"
        return "greedy"

    def check_size(self, model_config, batch_size, max_len, max_len_bound, memory_bytes):
        """DecodingError naming "max_len", "batch_size" or "beam_size" when decoding
        `batch_size` images of a `model_config` (a CaptionerConfig) to `max_len` tokens goes
        beyond the longest the run trained or evaluated at (`max_len_bound`), or its working
        memory (the logits of every beam, the decoder's cache, the images) beyond
        `memory_bytes`: refused before anything is allocated."""
        if too_long := length_problem(max_len, max_len_bound):
            raise DecodingError("max_len", too_long)
        need = decode_bytes(model_config, batch_size, self.beam_size or 1, max_len)
        if need > memory_bytes:
            beams = f"{self.beam_size} beams x " if self.beam_size else ""
            raise DecodingError("beam_size" if self.beam_size else "batch_size", (
                f"{beams}batch {batch_size} x {max_len} tokens: decoding needs about "
                f"{need / 2**30:.1f} GiB, more than the {memory_bytes / 2**30:.1f} GiB of "
                f"memory here; give fewer"))


def length_problem(max_len, max_len_bound):
    """Why decoding to `max_len` tokens is refused for a run whose longest trained or evaluated
    length is `max_len_bound` (None: it is not)."""
    if max_len <= max_len_bound:
        return None
    return (f"{max_len} is longer than the run was trained or evaluated for (at most "
            f"{max_len_bound}: its data.max_target_len and evals' max_decode_len)")


def decode_bytes(model_config, batch_size, beams, max_len, prompt_len=16):
    """Bytes of a decoding's largest buffers: per row (an image's beam) the float32 logits
    and their log-softmax, the decoder's self-attention cache and the encoder output with
    its cross-attention keys and values; the images as float32."""
    t5, rows = model_config.t5, batch_size * beams
    kv = t5.num_heads * t5.head_dim
    encoder_len = prompt_len + model_config.image_tokens
    per_row = 4 * (2 * t5.vocab_size + 2 * t5.num_decoder_layers * max_len * kv
                   + encoder_len * (t5.emb_dim + 2 * t5.num_decoder_layers * kv))
    return rows * per_row + batch_size * 4 * 3 * model_config.image_size ** 2


def memory_bytes():
    """Bytes of memory of the first device, or the machine's for a CPU (it reports none)."""
    stats = jax.devices()[0].memory_stats() or {}
    return stats.get("bytes_limit") or os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
