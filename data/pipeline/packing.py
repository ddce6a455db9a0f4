"""Packed training batches (`config.data.pack`): several examples' text in one row, as T5X.

Images stay one per example (the ViT's batch is unchanged). Each example's encoder part (its
image position(s), then its prompt tokens) and its caption go into one row of the step's
`Layout.rows` encoder rows [rows, encoder_len] and decoder rows [rows, max_target_len], with
segment ids 1, 2, ... in a row (0: empty); the model attends within a segment only
(model/t5.py). `layout` derives the rows and encoder_len from a sample of the lengths. Rows
are filled by first fit in decreasing caption length, on the host, within each packing group:
one data shard's examples of one micro-batch (micro-batch j of k takes examples and rows j,
j + k, ..., as training/state.py splits them), so neither sharding nor accumulation moves a
token between devices. An example that does not fit its group's rows is left out of the
step's loss, never cut; the train step counts it (train/pack_dropped).
"""

import dataclasses

import numpy as np

# Examples of the sample the rows are derived from (at least 16 packing groups).
SAMPLE = 4096
# The derived rows leave out at most this fraction of the sample's examples.
MAX_DROPPED = 1e-3
# Encoder rows hold this many times the encoder positions of full decoder rows (`layout`).
ENCODER_ROOM = 1.25
# Without built captions: lengths drawn as benchmarks/train_step.py draws them, uniformly in
# [mean / 2, 3 mean / 2] around this mean (EOS included), and LangId prompts of 3 tokens.
SYNTHETIC_CAPTION_LEN, SYNTHETIC_PROMPT_LEN = 16, 3
SYNTHETIC = "no built captions: captions of 16 tokens on average (8 to 24), prompts of 3"


@dataclasses.dataclass(frozen=True)
class Layout:
    """The packed shapes of a step: `batch_size` examples in `rows` rows of `encoder_len` and
    `target_len` positions, in `groups` packing groups (data shards x `accum` micro-batches)."""
    batch_size: int
    rows: int
    image_tokens: int
    encoder_len: int
    target_len: int
    groups: int
    accum: int

    @property
    def prompt_len(self):
        """Text positions of an encoder row (what a padded example's max_prompt_len is)."""
        return self.encoder_len - self.image_tokens


def _group(index, count, layout):
    """Packing group of item `index` of `count` (examples or rows): shard * accum + micro."""
    shard_size = count * layout.accum // layout.groups
    return index // shard_size * layout.accum + index % layout.accum


def first_fit_decreasing(enc_lens, dec_lens, num_rows, enc_cap, dec_cap):
    """The row of each example (-1: does not fit), filled by first fit in decreasing caption
    (then encoder) length."""
    enc_free, dec_free = np.full(num_rows, enc_cap), np.full(num_rows, dec_cap)
    out = np.full(len(dec_lens), -1)
    for i in np.lexsort((-np.asarray(enc_lens), -np.asarray(dec_lens))):
        fits = np.flatnonzero((enc_free >= enc_lens[i]) & (dec_free >= dec_lens[i]))
        if fits.size:
            out[i] = row = fits[0]
            enc_free[row] -= enc_lens[i]
            dec_free[row] -= dec_lens[i]
    return out


def shapes(layout, batch_size):
    """{name: shape} of `pack`'s int32 arrays for `batch_size` examples."""
    rows = batch_size * layout.rows // layout.batch_size
    enc, dec = (rows, layout.encoder_len), (rows, layout.target_len)
    return {"encoder_tokens": enc, "image_slots": enc, "encoder_segments": enc, "targets": dec,
            "decoder_segments": dec, "packed": (batch_size,)}


def pack(prompts, targets, layout, first):
    """Packs this process's examples (`prompts` [b, Lp], `targets` [b, Lt], 0-padded; global
    positions `first`, ...) into its rows: {"encoder_tokens", "image_slots" (index into the
    micro-batch's images x image_tokens; -1: a token), "encoder_segments", "targets",
    "decoder_segments"} [rows, ...] int32 and "packed" [b] (1: in a row, 0: left out)."""
    b, n = len(targets), layout.image_tokens
    out = {name: np.zeros(shape, np.int32) for name, shape in shapes(layout, b).items()}
    out["image_slots"][...] = -1
    rows, row0 = len(out["targets"]), first * layout.rows // layout.batch_size
    prompt_lens, dec_lens = (prompts != 0).sum(1), (targets != 0).sum(1)
    enc_used, dec_used, segments = (np.zeros(rows, int) for _ in range(3))
    example_groups = _group(first + np.arange(b), layout.batch_size, layout)
    row_groups = _group(row0 + np.arange(rows), layout.rows, layout)
    for group in np.unique(example_groups):
        examples, group_rows = (np.flatnonzero(example_groups == group),
                                np.flatnonzero(row_groups == group))
        assigned = first_fit_decreasing(n + prompt_lens[examples], dec_lens[examples],
                                        len(group_rows), layout.encoder_len, layout.target_len)
        for e, a in zip(examples, assigned, strict=True):
            if a < 0:
                continue
            row, lp, ld = group_rows[a], prompt_lens[e], dec_lens[e]
            segments[row] += 1
            o, q = enc_used[row], dec_used[row]
            out["image_slots"][row, o:o + n] = (first + e) // layout.accum * n + np.arange(n)
            out["encoder_tokens"][row, o + n:o + n + lp] = prompts[e, :lp]
            out["encoder_segments"][row, o:o + n + lp] = segments[row]
            out["targets"][row, q:q + ld] = targets[e, :ld]
            out["decoder_segments"][row, q:q + ld] = segments[row]
            enc_used[row], dec_used[row] = o + n + lp, q + ld
            out["packed"][e] = 1
    return out


def rows_per_group(enc_lens, dec_lens, group_size, enc_cap, dec_cap):
    """The fewest rows per packing group with which first fit decreasing leaves out at most
    MAX_DROPPED of the sample's examples (the sample cut into groups of `group_size`)."""
    count = len(dec_lens) // group_size
    enc = np.reshape(enc_lens[:count * group_size], (count, group_size))
    dec = np.reshape(dec_lens[:count * group_size], (count, group_size))
    rows = max(1, int(np.ceil(max(enc.sum() / enc_cap, dec.sum() / dec_cap) / count)))
    while rows < group_size:
        dropped = sum(int((first_fit_decreasing(e, d, rows, enc_cap, dec_cap) < 0).sum())
                      for e, d in zip(enc, dec, strict=True))
        if dropped <= MAX_DROPPED * enc.size:
            break
        rows += 1
    return rows


def synthetic_lengths(count, max_prompt_len, max_target_len, seed=0,
                      caption_len=SYNTHETIC_CAPTION_LEN):
    """(prompt, caption) lengths with EOS of the stated distribution (no built captions)."""
    rng = np.random.default_rng(seed)
    low, high = max(1, caption_len // 2), max(1, (3 * caption_len) // 2)
    captions = np.minimum(rng.integers(low, high + 1, count), max_target_len)
    return np.full(count, min(SYNTHETIC_PROMPT_LEN, max_prompt_len)), captions


def layout(config, *, data_devices, image_tokens, lengths):
    """The Layout of a run `config`'s steps (None: `data.pack` off); `lengths(count)` ->
    (prompt, caption) lengths with EOS of a sample."""
    if not config.data.pack:
        return None
    batch_size, accum = config.batch_size, config.grad_accum_steps
    max_prompt_len, max_target_len = config.data.max_prompt_len, config.data.max_target_len
    groups = data_devices * accum
    group_size = batch_size // groups
    prompt_lens, caption_lens = lengths(max(SAMPLE, 16 * group_size))
    enc_lens, caption_lens = image_tokens + np.asarray(prompt_lens), np.asarray(caption_lens)
    # Encoder rows with room for ENCODER_ROOM x the encoder positions of full decoder rows:
    # the decoder (its positions cost several times an encoder one) decides the rows.
    encoder_len = max(image_tokens + max_prompt_len, int(np.ceil(
        ENCODER_ROOM * max_target_len * enc_lens.mean() / caption_lens.mean())))
    rows = rows_per_group(enc_lens, caption_lens, group_size, encoder_len, max_target_len)
    return Layout(batch_size, rows * groups, image_tokens, encoder_len, max_target_len, groups,
                  accum)


