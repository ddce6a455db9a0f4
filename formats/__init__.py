"""The files that tools exchange: one module each, the only code that reads or writes them.

- `predictions`: `predictions_<lang>.jsonl`, one caption per image and language
  (`PredictionsError`). Written by the checkpoint tool and `python -m evaluation.report
  --predictions`, and line by line (`line`) by `python -m tools.captioning --format jsonl`;
  read by `python -m evaluation.cider`, `python -m tools.vifidel`, the report and
  tools.humaneval, which also take a pycocoevalcap results list.
- `per_image`: `per_image.jsonl`, one score per image and language (`PerImageError`).
  Written by the checkpoint tool and by the metric command lines' `--per-image`; read by
  `python -m tools.analysis.compare` and tools.humaneval.
- `scores`: `scores.json`, corpus scores per language (`ScoresError`). Written by the
  reports (evaluation/report.py); read by the report command line and tools.humaneval.
- `eval_metrics`: `metrics.json`, every metric of one evaluated checkpoint
  (`EvalMetricsError`). Written by the checkpoint tool.
- `thumb_ratings`: THUMB 1.0 ratings, `thumb.jsonl` / `thumb_<k>.jsonl`, and the THUMB rubric
  (`ThumbError`). Written by humaneval's export; read by `python -m tools.analysis.thumb`
  and `python -m tools.analysis.meta`; the rubric also checks humaneval's rating form.
- `side_by_side`: `side_by_side.csv`, the XM3600 paper's side-by-side evaluations
  (`SideBySideError`). Written by humaneval's export and report; read by
  `python -m tools.analysis.correlate`, `... meta --side-by-side` and tools.humaneval.
- `triplet_judgements`: the CIDEr paper's triplet judgements (`triplets.jsonl` by default;
  `TripletError`). Read by `python -m tools.analysis.meta --triplets`.

Evaluators other than XM3600's write the same formats under their own names
(`predictions_<evaluator>_<lang>.jsonl`, `per_image_<evaluator>.jsonl`,
`scores_<evaluator>.json`); each module's `file_name` gives them.

Each module holds the file's name, its one validation, a `read` and a `write` that both go
through it, and one error class, an `errors.InputError` whose message names the file and
line (or entry, field, column) at fault. Readers are strict: an unknown language, a repeated
key, a value of the wrong kind is an error, never skipped or overwritten; writers check
everything before they write anything. The rest of the repository reads and writes these
files only through here (tests/formats/test_owners.py checks it). Every writer writes whole
or not at all (`files.replacing`: a full disk leaves the previous file or none). `json_object`
reads the two JSON files for their owners, `csv_table` the CSV files (side_by_side.csv here,
the paper's tables and system scores elsewhere), each naming the file and line of a binary
or malformed input. This package imports only `data` (languages, the JSON Lines reader),
`errors` and `files`.
"""
