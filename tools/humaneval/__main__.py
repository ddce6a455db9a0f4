"""Command line of the human evaluation: create, serve, status, simulate, export, analyze, texts.

    python -m tools.humaneval create --type sxs --release XM3600 --langs en,es,hi,zh \
        --m1 results/base --m2 results/test [--subset-size 100 --subset-seed 0] \
        [--replication 3] [--raters 3 | --quota 40] [--gold-share 0.1] \
        [--consent consent.txt] [--translation zh=zh.json ...] \
        [--crowd [--completion-code CODE] [--completion-url URL]] \
        [--idle-seconds 30] [--min-seconds 2] --out sessions/base_vs_test
    python -m tools.humaneval serve --session sessions/base_vs_test [--host 127.0.0.1 --port 8000] \
        [--threads 8] [--public-url https://rate.example.org/study1]
    python -m tools.humaneval status --session sessions/base_vs_test
    python -m tools.humaneval simulate --session sessions/base_vs_test [--force] \
        [--raters NAME,NAME]
    python -m tools.humaneval export --session sessions/base_vs_test --out exports/base_vs_test \
        [--exclude-simulated] [--exclude-flagged]
    python -m tools.humaneval analyze --session S1 [--session S2 ...] --out reports/study \
        [--exclude-simulated] [--exclude-flagged]
    python -m tools.humaneval texts --out en.json   # the English texts, to translate

Bad input exits with status 2 after one line `error: ...`; nothing already written (a session,
its ratings) is changed by a failing command. Warnings are lines `warning: ...` on stderr.
"""

import argparse
import os
import sys

import errors
from tools import cli as tool_cli
from tools.humaneval import create as create_lib

# simulate's --noise and --bias are on the latent scale (a few units): finite, and bounded
# so that a typo (1e9) is refused rather than stored as ratings.
SCALE_LIMIT = 100.0


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one `error: ...` line and exit status 2."""

    def error(self, message):
        print(f"error: {self.prog}: {message}", file=sys.stderr)
        sys.exit(2)


def _warn(message):
    print(f"warning: {message}", file=sys.stderr, flush=True)


def _results_flag(value):
    """--results [NAME=]FOLDER -> (name, folder); the name defaults to the folder's."""
    name, sep, path = value.partition("=")
    if not sep:
        name, path = os.path.basename(os.path.normpath(value)), value
    return name, path


def _translation_flag(value):
    lang, sep, path = value.partition("=")
    if not sep or not lang or not path:
        raise errors.InputError(f"--translation {value!r}: expected LANG=FILE")
    return lang.strip(), path


def _create(args):
    create = create_lib
    if args.type == "sxs":
        if not (args.m1 and args.m2) or args.results:
            raise errors.InputError("--type sxs needs --m1 BASE_RESULTS and --m2 TEST_RESULTS "
                                    "(and no --results)")
        systems = ((args.m1_name or _results_flag(args.m1)[0], args.m1),
                   (args.m2_name or _results_flag(args.m2)[0], args.m2))
    else:
        if args.m1 or args.m2:
            raise errors.InputError(f"--m1/--m2 are for sxs sessions; a {args.type} session "
                                    f"takes --results [NAME=]FOLDER (repeatable) and/or "
                                    f"--references")
        systems = tuple(_results_flag(v) for v in args.results or ())
    langs = tuple(v.strip() for v in args.langs.split(",") if v.strip())
    spec = create.Spec(
        type=args.type, release=args.release, langs=langs, systems=systems,
        references=args.references, subset_size=args.subset_size,
        subset_seed=args.subset_seed, replication=args.replication,
        raters=tuple(args.raters or ()), gold_share=args.gold_share,
        gold_max_failure_rate=args.gold_max_failure_rate, seed=args.seed,
        name=args.name or os.path.basename(os.path.normpath(args.out)),
        consent=args.consent, translations=tuple(_translation_flag(v)
                                                 for v in args.translation or ()),
        crowd=args.crowd, quota=args.quota, completion_code=args.completion_code,
        completion_url=args.completion_url, idle_seconds=args.idle_seconds,
        min_seconds=args.min_seconds)
    session = create.create(spec, args.out, warn=_warn)
    gold = sum(i.is_gold for i in session.items.values())
    print(f"wrote {session.folder}/session.json: {session.type}, "
          f"{session.data['subset']['size']} images x {len(session.langs)} language(s), "
          f"{len(session.items) - gold} items to rate + {gold} gold, "
          f"{len(session.raters)} raters, replication {session.replication}")
    print(f"serve it: python -m tools.humaneval serve --session {args.out}")


def _serve(args):
    from tools.humaneval import server
    server.serve(args.session, host=args.host, port=args.port, threads=args.threads,
                 public_url=args.public_url)


def _status(args):
    from tools.humaneval import session as session_lib
    from tools.humaneval import store
    session = session_lib.load(args.session)
    ratings = store.read_ratings(session.db_path, session.digest)  # Read-only.
    for rater in session.raters:
        mine = [r for r in ratings if r["rater"] == rater.name]
        total = len(session.assignments[rater.name])
        # Active time (idle periods left out); the wall clock where none was measured.
        minutes = sum(r["active_seconds"] if r["active_seconds"] is not None
                      else r["seconds"] or 0.0 for r in mine) / 60
        simulated = sum(r["source"] == "simulated" for r in mine)
        print(f"{rater.name:<16} {rater.lang:<4} {len(mine):>6} / {total:<6} {minutes:7.1f} min"
              + (f"  ({simulated} SIMULATED)" if simulated else ""))
    withdrawn = store.read_state(session.db_path, session.digest)["withdrawn"]
    if withdrawn:
        print(f"{withdrawn} rater(s) withdrew: their ratings are left out of every report")


def _simulate(args):
    from tools.humaneval import session as session_lib
    from tools.humaneval import simulate
    session = session_lib.load(args.session)
    biases = {}
    for value in args.bias or ():
        name, _, number = value.partition("=")
        try:
            biases[name] = tool_cli.number(-SCALE_LIMIT, SCALE_LIMIT)(number)
        except argparse.ArgumentTypeError as e:
            raise errors.InputError(f"--bias {value!r}: {e}") from None
        if name not in session.by_name:
            raise errors.InputError(f"--bias {value!r}: no rater {name!r} in the session")
    raters = None
    if args.raters is not None:
        raters = [name.strip() for name in args.raters.split(",") if name.strip()]
    count = simulate.simulate(session, biases=biases, noise=args.noise, seed=args.seed,
                              force=args.force, raters=raters)
    print(f"stored {count} SIMULATED ratings in {session.db_path}")


def _export(args):
    from tools.humaneval import export
    from tools.humaneval import session as session_lib
    tool_cli.prepare_out(args.out)
    paths = export.export(session_lib.load(args.session), args.out,
                          exclude_simulated=args.exclude_simulated,
                          exclude_flagged=args.exclude_flagged, warn=_warn)
    for kind, path in paths.items():
        print(f"{kind}: {path}")


def _analyze(args):
    from tools.humaneval import session as session_lib
    from tools.humaneval import study_report
    tool_cli.prepare_out(args.out)
    sessions = [session_lib.load(s) for s in args.session]
    paths = study_report.write_report(sessions, args.out, resamples=args.resamples,
                                      seed=args.seed, paper_dir=args.paper_dir,
                                      exclude_simulated=args.exclude_simulated,
                                      exclude_flagged=args.exclude_flagged)
    for kind, path in paths.items():
        print(f"{kind}: {path}")


def _texts(args):
    from tools.humaneval import texts
    print(texts.write_english(args.out))


def _create_parser(sub):
    p = sub.add_parser("create", help="a session from results folders")
    p.add_argument("--type", required=True, choices=("sxs", "quality", "thumb"))
    p.add_argument("--release", required=True, help="XM3600 release folder (captions.jsonl, "
                   "images/)")
    p.add_argument("--langs", required=True, help="comma-separated language codes")
    p.add_argument("--m1", help="sxs: results folder of the base model")
    p.add_argument("--m2", help="sxs: results folder of the test model")
    p.add_argument("--m1-name", help="the base model's name (default: its folder's)")
    p.add_argument("--m2-name", help="the test model's name (default: its folder's)")
    p.add_argument("--results", action="append", metavar="[NAME=]FOLDER",
                   help="quality/thumb: a results folder to rate (repeatable)")
    p.add_argument("--references", action="store_true",
                   help="quality/thumb: also rate the release's own captions")
    p.add_argument("--subset-size", type=int, default=None,
                   help="images to rate (default: XM600, the 600 images of seed 600)")
    p.add_argument("--subset-seed", type=int, default=0, help="seed of --subset-size")
    p.add_argument("--replication", type=int, default=3, help="raters per item")
    p.add_argument("--raters", action="append", metavar="N | LANG=NAME,NAME,...",
                   help="raters per language (default: as many as --replication)")
    p.add_argument("--gold-share", type=float, default=None,
                   help="attention-check items, as a share of the test items (default: "
                        f"{create_lib.GOLD_SHARE:g}, or the smallest share above it that "
                        "gives every rater slot one, said in a warning)")
    p.add_argument("--gold-max-failure-rate", type=float, default=0.0,
                   help="a rater failing a larger share of gold items is flagged")
    p.add_argument("--idle-seconds", type=float, default=create_lib.IDLE_SECONDS,
                   help="a pause without input longer than this is left out of the active "
                        "(paid) time, whole")
    p.add_argument("--min-seconds", type=float, default=create_lib.MIN_SECONDS,
                   help="a rater whose median active time per item is below this is "
                        "flagged as too fast")
    p.add_argument("--seed", type=int, default=0, help="seeds every random choice")
    p.add_argument("--name", help="the session's name (default: the --out folder's)")
    p.add_argument("--consent", metavar="FILE", help="the consent text raters agree to before "
                   "they start (UTF-8 text, paragraphs split by blank lines)")
    p.add_argument("--translation", action="append", metavar="LANG=FILE",
                   help="the kit's texts in a rating language (a JSON file as `texts` writes; "
                   "repeatable)")
    p.add_argument("--crowd", action="store_true", help="open enrolment links per language "
                   "for a crowd platform (Prolific, MTurk) instead of personal links")
    p.add_argument("--quota", type=int, help="at most N items per rater: as many rater slots "
                   "per language as that takes (instead of --raters)")
    p.add_argument("--completion-code", help="--crowd: the code participants get at the end "
                   "(default: random)")
    p.add_argument("--completion-url", help="--crowd: where participants go at the end "
                   "({code} is replaced; default: Prolific's completion URL for Prolific)")
    p.add_argument("--out", required=True, help="the new session folder")
    p.set_defaults(run=_create)


def _parser():
    parser = _Parser(prog="python -m tools.humaneval", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _create_parser(sub)
    p = sub.add_parser("serve", help="the rating web app")
    p.add_argument("--session", required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=tool_cli.count(0, 65535), default=8000, help="0: any free port")
    p.add_argument("--threads", type=tool_cli.count(1), default=8, help="waitress worker threads")
    p.add_argument("--public-url", help="the address raters open, behind a reverse proxy with "
                   "TLS (e.g. https://rate.example.org/study1): the printed links use it and "
                   "the app lives under its path")
    p.set_defaults(run=_serve)
    p = sub.add_parser("status", help="each rater's progress")
    p.add_argument("--session", required=True)
    p.set_defaults(run=_status)
    p = sub.add_parser("simulate", help="fill the session with SIMULATED ratings")
    p.add_argument("--session", required=True)
    p.add_argument("--noise", type=tool_cli.number(0, SCALE_LIMIT), default=0.7,
                   help="standard deviation of the Gaussian noise on the latent value")
    p.add_argument("--bias", action="append", metavar="RATER=NUMBER")
    p.add_argument("--seed", type=tool_cli.count(0, 2**32 - 1), default=0)
    p.add_argument("--force", action="store_true", help="where people have begun: simulate "
                   "only the raters no person has begun (their lists stay theirs; the simulated "
                   "ratings stay marked, --exclude-simulated leaves them out); a served crowd "
                   "study is never simulated unless --raters names the slots")
    p.add_argument("--raters", metavar="NAME,NAME", help="simulate only these raters (the "
                   "slots of a served crowd study must be named)")
    p.set_defaults(run=_simulate)
    p = sub.add_parser("export", help="ratings as CSV / JSONL and the paper's layouts")
    p.add_argument("--session", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--exclude-simulated", action="store_true",
                   help="leave out the ratings of `simulate`")
    p.add_argument("--exclude-flagged", action="store_true",
                   help="leave out the ratings of flagged raters (gold, too fast, straight); "
                        "those still rating or stopped early (incomplete) are kept")
    p.set_defaults(run=_export)
    p = sub.add_parser("analyze", help="delta S x S, agreement, gold checks, Table 6")
    p.add_argument("--session", required=True, action="append", help="repeatable")
    p.add_argument("--out", required=True, help="report folder")
    p.add_argument("--resamples", type=tool_cli.count(1), default=1000, help="bootstrap resamples")
    p.add_argument("--seed", type=tool_cli.count(0, 2**32 - 1), default=0, help="bootstrap seed")
    p.add_argument("--paper-dir", default=None,
                   help="folder with the paper's tables (default: the repository's paper_tables/)")
    p.add_argument("--exclude-simulated", action="store_true",
                   help="leave out the ratings of `simulate`")
    p.add_argument("--exclude-flagged", action="store_true",
                   help="leave out the ratings of flagged raters (gold, too fast, straight); "
                        "those still rating or stopped early (incomplete) are kept")
    p.set_defaults(run=_analyze)
    p = sub.add_parser("texts", help="write the kit's English texts (to translate)")
    p.add_argument("--out", required=True, help="the JSON file to write")
    p.set_defaults(run=_texts)
    return parser


def main(argv=None):
    """Runs one command; returns 0. Bad input raises `errors.Error` (run_main prints it as one
    `error: ...` line, status 2) or exits with status 2 after one line (usage)."""
    args = _parser().parse_args(argv)
    args.run(args)
    return 0


if __name__ == "__main__":
    errors.run_main(main)
