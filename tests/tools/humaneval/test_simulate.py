"""Simulated raters (tools/humaneval/simulate.py) never mix silently with people's ratings."""

import csv

import pytest

from errors import InputError
from tests.cli import error_line
from tests.tools.humaneval import helpers
from tools.humaneval import __main__ as cli
from tools.humaneval import export, rating_stats, simulate, store, study_report


def _rated_by_hand(session):
    """The session after en-1 rated two items by hand."""
    store.init(session.db_path, session.digest)
    with store.Store(session.db_path) as db:
        for n in (1, 2):
            db.add_rating("en-1", session.assignments["en-1"][n - 1], n, {"choice": 2})
    return session


@pytest.fixture
def rated_by_people(make_session):
    """An sxs session in en where en-1 has rated two items by hand."""
    return _rated_by_hand(make_session(langs=("en",)))


@pytest.fixture(scope="module")
def forced(release, results_pair, tmp_path_factory):
    """(session, count) of `rated_by_people`'s session where simulate was forced, adding
    `count` ratings; made once for the module's tests (which only read it)."""
    session = _rated_by_hand(helpers.new_session(
        release, results_pair, str(tmp_path_factory.mktemp("forced") / "session"),
        langs=("en",)))
    return session, simulate.simulate(session, force=True)


_rows = helpers.ratings


def test_refused_where_people_rated(rated_by_people, capsys):
    before = _rows(rated_by_people)
    with pytest.raises(InputError, match=r"people have begun under 1 rater\(s\) \(e.g. en-1 "
                                         r"\(rated\)\)"):
        simulate.simulate(rated_by_people)
    assert _rows(rated_by_people) == before  # nothing stored
    assert "--force" in error_line(capsys, cli.main,
                                   ["simulate", "--session", rated_by_people.folder])


def test_forced_simulated_ratings_are_marked(forced):
    # Forced, the simulated ratings are marked and can be left out.
    session, count = forced
    rows = _rows(session)
    assert count == len(rows) - 2
    assert [r["source"] for r in rows[:2]] == ["web", "web"]
    assert {r["source"] for r in rows[2:]} == {"simulated"}


def test_an_export_of_everything_warns_of_simulated_ratings(forced, tmp_path):
    # Export: everything (with a warning), or people's ratings only.
    session, count = forced
    rows = _rows(session)
    warnings = []
    paths = export.export(session, str(tmp_path / "all"), warn=warnings.append)
    assert any(f"{count} of its {len(rows)} ratings are SIMULATED" in w for w in warnings)
    with open(paths["csv"], newline="", encoding="utf-8") as f:
        assert len(list(csv.DictReader(f))) == len(rows)


def test_an_export_can_leave_out_simulated_ratings(forced, tmp_path, capsys):
    session, _ = forced
    cli.main(["export", "--session", session.folder, "--out", str(tmp_path / "web"),
              "--exclude-simulated"])
    assert "warning" not in capsys.readouterr().err
    with open(tmp_path / "web" / "ratings.csv", newline="", encoding="utf-8") as f:
        kept = list(csv.DictReader(f))
    assert [r["source"] for r in kept] == ["web", "web"]


def test_the_analysis_flags_simulated_ratings_on_its_first_line(forced, tmp_path):
    session, _ = forced
    # Analysis: flagged on the first line, or left out.
    report = study_report.write_report([session], str(tmp_path / "r1"), resamples=0)
    assert "**SIMULATED ratings**" in open(report["markdown"], encoding="utf-8").read()


def test_the_analysis_can_leave_out_simulated_ratings(forced, tmp_path):
    session, _ = forced
    report = study_report.write_report([session], str(tmp_path / "r2"), resamples=0,
                                       exclude_simulated=True)
    text = open(report["markdown"], encoding="utf-8").read()
    assert "SIMULATED" not in text and "; 2 ratings)" in text
    assert len(rating_stats.load_ratings(session, exclude_simulated=True)) == 2


def test_naming_a_persons_rater_is_refused_forced_too(rated_by_people, capsys):
    before = _rows(rated_by_people)
    err = error_line(capsys, cli.main, ["simulate", "--session", rated_by_people.folder,
                                        "--force", "--raters", "en-1"])
    assert err == ("error: --raters: a person has begun under en-1 (rated): a person's list "
                   "stays theirs, --force included; name only slots no person has begun\n")
    assert _rows(rated_by_people) == before
