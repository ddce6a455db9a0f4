"""The human-judgement files the tools exchange, one owner each, as formats/ is for the core.

- `thumb_ratings`: THUMB 1.0 ratings, `thumb.jsonl` / `thumb_<k>.jsonl`, and the THUMB rubric
  (`ThumbError`). Written by humaneval's export; read by `python -m tools.analysis.thumb`
  and `python -m tools.analysis.meta`; the rubric also checks humaneval's rating form.
- `side_by_side`: `side_by_side.csv`, the XM3600 paper's side-by-side evaluations
  (`SideBySideError`). Written by humaneval's export and report; read by
  `python -m tools.analysis.correlate`, `... meta --side-by-side` and tools.humaneval.
- `triplet_judgements`: the CIDEr paper's triplet judgements (`triplets.jsonl` by default;
  `TripletError`). Read by `python -m tools.analysis.meta --triplets`.

The rules of formats/ hold here (tests/formats/test_owners.py checks both packages).
"""
