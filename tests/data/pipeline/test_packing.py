"""Tests of data/pipeline/packing.py: rows by packing group, the overflow rule, the rows derived."""

import ml_collections
import numpy as np

from data.pipeline import packing


def _text(prompt_lens, caption_lens, max_prompt_len=4, max_target_len=8, seed=0):
    """0-padded prompts and captions of the given lengths, tokens in [2, 100)."""
    rng = np.random.default_rng(seed)
    prompts = np.zeros((len(prompt_lens), max_prompt_len), np.int32)
    targets = np.zeros((len(caption_lens), max_target_len), np.int32)
    for i, (p, t) in enumerate(zip(prompt_lens, caption_lens, strict=True)):
        prompts[i, :p] = rng.integers(2, 100, p)
        targets[i, :t] = rng.integers(2, 100, t)
    return prompts, targets


def _examples(rows, layout):
    """{example: (its prompt tokens, its caption tokens)} read back from packed rows."""
    out = {}
    for r in range(len(rows["targets"])):
        for s in range(1, rows["decoder_segments"][r].max() + 1):
            enc = rows["encoder_segments"][r] == s
            # Slots index the micro-batch's images (micro-batch r % accum holds r's examples).
            slot = rows["image_slots"][r][enc][0] // layout.image_tokens
            example = slot * layout.accum + r % layout.accum
            out[int(example)] = (rows["encoder_tokens"][r][enc][layout.image_tokens:],
                                 rows["targets"][r][rows["decoder_segments"][r] == s])
    return out


def test_pack_keeps_each_example_whole_in_its_groups_rows():
    # 2 data shards x 2 micro-batches: example g belongs to shard g // 4, micro-batch g % 2.
    layout = packing.Layout(batch_size=8, rows=8, image_tokens=1, encoder_len=5, target_len=8,
                            groups=4, accum=2)
    prompts, targets = _text([2, 3, 2, 1, 3, 2, 2, 3], [3, 5, 2, 8, 1, 4, 6, 2])
    rows = packing.pack(prompts, targets, layout, first=0)
    assert rows["packed"].tolist() == [1] * 8
    assert sorted(_examples(rows, layout)) == list(range(8))
    for example, (prompt, caption) in _examples(rows, layout).items():
        np.testing.assert_array_equal(prompt, prompts[example][prompts[example] > 0])
        np.testing.assert_array_equal(caption, targets[example][targets[example] > 0])
    for r in range(8):  # Row r belongs to shard r // 4, micro-batch r % 2; slots index g // 2.
        slots = rows["image_slots"][r][rows["image_slots"][r] >= 0]
        assert all((2 * s + r % 2) // 4 == r // 4 for s in slots), (r, slots)


def test_an_example_that_does_not_fit_is_left_out_whole():
    layout = packing.Layout(batch_size=3, rows=1, image_tokens=1, encoder_len=7, target_len=8,
                            groups=1, accum=1)
    prompts, targets = _text([2, 2, 2], [5, 3, 4])
    rows = packing.pack(prompts, targets, layout, first=0)
    assert rows["packed"].tolist() == [1, 1, 0]  # 5 + 3 tokens fill the row; 4 do not fit.
    assert rows["decoder_segments"].max() == 2
    assert sorted(_examples(rows, layout)) == [0, 1]


def test_rows_per_group_is_the_fewest_that_leave_out_at_most_the_bound():
    rng = np.random.default_rng(0)
    captions = rng.integers(8, 25, packing.SAMPLE)
    encoders = np.full(packing.SAMPLE, 4)
    rows = packing.rows_per_group(encoders, captions, 16, 17, 64)

    def dropped(n):
        return sum(int((packing.first_fit_decreasing(e, d, n, 17, 64) < 0).sum())
                   for e, d in zip(encoders.reshape(-1, 16), captions.reshape(-1, 16),
                                   strict=True))

    assert dropped(rows) <= packing.MAX_DROPPED * packing.SAMPLE < dropped(rows - 1)


def _config(accum):
    return ml_collections.ConfigDict({"batch_size": 64, "grad_accum_steps": accum, "data": {
        "pack": True, "max_prompt_len": 16, "max_target_len": 64}})


def test_layout_rows_scale_with_the_packing_groups():
    lengths = lambda n: packing.synthetic_lengths(n, 16, 64)  # noqa: E731
    one = packing.layout(_config(1), data_devices=1, image_tokens=1, lengths=lengths)
    four = packing.layout(_config(2), data_devices=2, image_tokens=1, lengths=lengths)
    assert four.rows % 4 == 0 and one.rows <= four.rows < 64
    assert one.encoder_len >= 17 and (one.target_len, four.groups) == (64, 4)
