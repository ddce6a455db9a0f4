"""Simulated raters (tools/humaneval/simulate.py) never mix silently with people's ratings."""

import csv

import pytest

from errors import InputError
from tests.cli import error_line
from tests.tools.humaneval import helpers
from tools.humaneval import __main__ as cli
from tools.humaneval import export, rating_stats, simulate, store, study_report


@pytest.fixture
def rated_by_people(make_session):
    """An sxs session in en where en-1 has rated two items by hand."""
    session = make_session(langs=("en",))
    store.init(session.db_path, session.digest)
    with store.Store(session.db_path) as db:
        for n in (1, 2):
            db.add_rating("en-1", session.assignments["en-1"][n - 1], n, {"choice": 2})
    return session


_rows = helpers.ratings


def test_refused_where_people_rated_or_forced_marked_and_left_out(rated_by_people, tmp_path,
                                                                 capsys):
    before = _rows(rated_by_people)
    with pytest.raises(InputError, match=r"people have begun under 1 rater\(s\) \(e.g. en-1 "
                                         r"\(rated\)\)"):
        simulate.simulate(rated_by_people)
    assert _rows(rated_by_people) == before  # nothing stored
    assert "--force" in error_line(capsys, cli.main,
                                   ["simulate", "--session", rated_by_people.folder])
    # Forced, the simulated ratings are marked and can be left out.
    count = simulate.simulate(rated_by_people, force=True)
    rows = _rows(rated_by_people)
    assert count == len(rows) - 2
    assert [r["source"] for r in rows[:2]] == ["web", "web"]
    assert {r["source"] for r in rows[2:]} == {"simulated"}
    # Export: everything (with a warning), or people's ratings only.
    warnings = []
    paths = export.export(rated_by_people, str(tmp_path / "all"), warn=warnings.append)
    assert any(f"{count} of its {len(rows)} ratings are SIMULATED" in w for w in warnings)
    with open(paths["csv"], newline="", encoding="utf-8") as f:
        assert len(list(csv.DictReader(f))) == len(rows)
    cli.main(["export", "--session", rated_by_people.folder, "--out", str(tmp_path / "web"),
              "--exclude-simulated"])
    assert "warning" not in capsys.readouterr().err
    with open(tmp_path / "web" / "ratings.csv", newline="", encoding="utf-8") as f:
        kept = list(csv.DictReader(f))
    assert [r["source"] for r in kept] == ["web", "web"]
    # Analysis: flagged on the first line, or left out.
    report = study_report.write_report([rated_by_people], str(tmp_path / "r1"), resamples=0)
    assert "**SIMULATED ratings**" in open(report["markdown"], encoding="utf-8").read()
    report = study_report.write_report([rated_by_people], str(tmp_path / "r2"), resamples=0,
                                       exclude_simulated=True)
    text = open(report["markdown"], encoding="utf-8").read()
    assert "SIMULATED" not in text and "; 2 ratings)" in text
    assert len(rating_stats.load_ratings(rated_by_people, exclude_simulated=True)) == 2


def test_naming_a_persons_rater_is_refused_forced_too(rated_by_people, capsys):
    before = _rows(rated_by_people)
    err = error_line(capsys, cli.main, ["simulate", "--session", rated_by_people.folder,
                                        "--force", "--raters", "en-1"])
    assert err == ("error: --raters: a person has begun under en-1 (rated): a person's list "
                   "stays theirs, --force included; name only slots no person has begun\n")
    assert _rows(rated_by_people) == before
