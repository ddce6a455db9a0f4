"""Small files the tests write and read themselves, bypassing formats/ (to test its readers)."""

import csv
import json


def write_lines(path, lines):
    """Writes one line per item (a dict as JSON, a str as it is); returns the path as a str."""
    with open(path, "w", encoding="utf-8") as f:
        for line in lines:
            f.write((line if isinstance(line, str) else json.dumps(line)) + "\n")
    return str(path)


def write_text(folder, text, name="sxs.csv"):
    """Writes `text` to folder/name; returns that path."""
    path = folder / name
    path.write_text(text)
    return path


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def read_csv(path):
    """The rows of a CSV file with a header, as dicts."""
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))
