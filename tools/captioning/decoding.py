"""How captions are decoded: the settings, and the function that the run and the export share.

`predict_fn` is the whole prediction of a batch (decode, then score the result) as one
jittable function of (params, images, prompts, rng). The in-repository captioner jits it;
tools/captioning/export.py serializes the very same function with `jax.export`, which is why an
exported model's captions equal the run's token for token.
"""

import dataclasses

import jax

from errors import InputError
from model import decode

METHODS = ("greedy", "beam", "sample")


@dataclasses.dataclass(frozen=True)
class Decoding:
    """A decoding and its settings.

    Attributes:
        method: "greedy" (argmax), "beam" (T5X beam search) or "sample" (ancestral).
        beam_size: beams, for "beam".
        alpha: T5X's length-penalty exponent, for "beam" (0: plain log-probability).
        temperature: softmax temperature, for "sample" (0: argmax).
        top_k: sample among the k most likely tokens only, for "sample" (0: all).
        seed: the sampling seed; batch b draws from fold_in(key(seed), b).
    """
    method: str = "greedy"
    beam_size: int = 4
    alpha: float = 0.6
    temperature: float = 1.0
    top_k: int = 0
    seed: int = 0

    def __post_init__(self):
        if self.method not in METHODS:
            raise InputError(f"unknown decoding {self.method!r}; known: {', '.join(METHODS)}")
        if self.beam_size < 1:
            raise InputError(f"beam size must be >= 1, got {self.beam_size}")
        if self.temperature < 0:
            raise InputError(f"temperature must be >= 0, got {self.temperature}")
        if self.top_k < 0:
            raise InputError(f"top_k must be >= 0, got {self.top_k}")

    @classmethod
    def of(cls, decoding):
        """A Decoding from a Decoding or a method name ("beam": its default settings)."""
        return decoding if isinstance(decoding, cls) else cls(method=decoding)

    @property
    def program(self):
        """This decoding with only the settings its compiled program depends on (no seed)."""
        if self.method == "beam":
            return Decoding("beam", beam_size=self.beam_size, alpha=self.alpha)
        if self.method == "sample":
            return Decoding("sample", temperature=self.temperature, top_k=self.top_k)
        return Decoding("greedy")

    def describe(self, seed=True):
        """E.g. "beam search (4 beams, alpha 0.6)"; `seed`: say the sampling seed."""
        if self.method == "beam":
            return f"beam search ({self.beam_size} beams, alpha {self.alpha:g})"
        if self.method == "sample":
            top = f", top-{self.top_k}" if self.top_k else ""
            seed = f", seed {self.seed}" if seed else ""
            return f"sampling (temperature {self.temperature:g}{top}{seed})"
        return "greedy"

    def check_logits(self, num_logits):
        """Raises InputError when top-k sampling asks for more than the model's logits."""
        if self.method == "sample" and self.top_k > num_logits:
            raise InputError(f"top_k={self.top_k} exceeds the model's {num_logits} logits")


def rng_data(seed, batch_index):
    """The uint32 key data of batch `batch_index`'s sampling key (threefry, [2])."""
    return jax.random.key_data(jax.random.fold_in(jax.random.key(seed), batch_index))


def predict_fn(model, decoding, max_len, eos_id=1):
    """fn(params, images, prompts, rng) -> (tokens, log_probs) for `decoding`'s program.

    Args:
        model: the Captioner module.
        decoding: a `Decoding` (the seed is not used: it comes in as `rng`).
        max_len: decoding length.
        eos_id: end-of-sequence id.

    Returns:
        A pure function: params (the parameter tree), images float32 [b, H, W, 3] in
        [-1, 1], prompts int32 [b, Lp], rng uint32 [2] key data (unused but by sampling)
        -> tokens int32 [b, max_len] (0 after EOS), log_probs float32 [b] (model
        log-probability of the tokens, see model/decode.log_probs).
    """
    def fn(params, images, prompts, rng):
        if decoding.method == "greedy":
            tokens = decode.greedy(model, params, images, prompts, max_len, eos_id)
        elif decoding.method == "beam":
            tokens, _ = decode.beam_search(model, params, images, prompts, max_len,
                                           decoding.beam_size, decoding.alpha, eos_id)
        else:
            tokens = decode.sample(model, params, images, prompts, max_len,
                                   jax.random.wrap_key_data(rng), decoding.temperature,
                                   decoding.top_k, eos_id)
        return tokens, decode.log_probs(model, params, images, prompts, tokens, eos_id)
    return fn
