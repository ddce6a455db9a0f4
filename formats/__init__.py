"""The files the checkpoint tool and the tools exchange: one module each, their only reader
and writer (the human-judgement files, which only tools use, have theirs in tools/formats/).

- `predictions`: `predictions_<lang>.jsonl`, one caption per image and language; also reads
  pycocoevalcap results lists.
- `per_image`: `per_image.jsonl`, one score per image and language.
- `scores`: `scores.json`, corpus scores per language (evaluation/report.py).
- `eval_metrics`: `metrics.json`, every metric of one evaluated checkpoint.
- `json_object` and `csv_table`: the JSON and CSV readers of the owners (and of the paper's
  tables), naming the file and line of a binary or malformed input.

An evaluator other than XM3600's writes the same formats under its own name
(`predictions_<evaluator>_<lang>.jsonl`, ...; each module's `file_name`). Each module holds the
file's name, its one validation, a `read` and a `write` that both go through it, and one
`errors.InputError` naming the file and line (or entry, field, column) at fault. Readers are
strict (an unknown language, a repeated key, a value of the wrong kind is an error); writers
check everything first and write whole or not at all (`files.replacing`). The rest of the
repository reads and writes these files only through here (tests/formats/test_owners.py).
This package imports only `data`, `errors` and `files`.
"""
