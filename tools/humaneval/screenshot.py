"""A screenshot of a rater's page or of the dashboard, taken by headless chromium (for docs/).

    python -m tools.humaneval.screenshot --session S --rater NAME --out page.png [--size 1100x820]
    python -m tools.humaneval.screenshot --session S --rater NAME --page guidelines --out g.png
    python -m tools.humaneval.screenshot --session S --page dashboard --out dashboard.png

serves the session on a free local port in this process, lets Debian's `chromium` render the
page (`--screenshot`), and stops: a rater's current page (what their link opens), their
guidelines, or the owner's dashboard. Opening a rater's item records it as seen, as a rater's
visit would; no rating is written.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

from errors import InputError
from tools.humaneval import server
from tools.humaneval import session as session_lib

# Headless chromium as root on a machine without outside network: no sandbox, no GPU, a fresh
# profile, and no background connections (refused here; they would slow every start).
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--disable-quic")


PAGES = ("current", "guidelines", "dashboard")


def take(session_folder, rater_name, out, size=(1100, 820), page="current"):
    """Writes a PNG of a page; returns `out`.

    Args:
        session_folder: the session.
        rater_name: whose page (None for the dashboard).
        out: the PNG file.
        size: the window (width, height).
        page: "current" (what the rater's link opens), "guidelines" or "dashboard".

    Raises:
        InputError: no chromium, an unknown rater or page, or chromium wrote no picture.
    """
    chromium = shutil.which("chromium")
    if chromium is None:
        raise InputError("chromium not found: apt-get install chromium (make test installs it)")
    if page not in PAGES:
        raise InputError(f"--page {page!r}: known pages are {', '.join(PAGES)}")
    session = session_lib.load(session_folder)
    if page != "dashboard" and rater_name not in session.by_name:
        raise InputError(f"no rater {rater_name!r} in the session; raters: "
                         f"{', '.join(session.by_name)}")
    if page != "dashboard" and session.crowd is not None:
        raise InputError("a crowd session's rater pages are reached through their "
                         "participants' own links only: screenshot a personal-link session, "
                         "or the dashboard")
    httpd, thread, _, base = server.serve_in_thread(session_folder, port=0)
    profile = tempfile.mkdtemp(prefix="humaneval-chromium-")
    try:
        if page == "dashboard":
            url = f"{base}/dashboard/{session.owner_token}"
        else:
            url = f"{base}/r/{session.by_name[rater_name].token}" + (
                "/guidelines" if page == "guidelines" else "")
        subprocess.run([chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                        f"--window-size={size[0]},{size[1]}", "--hide-scrollbars",
                        f"--screenshot={os.path.abspath(out)}", url],
                       check=False, capture_output=True, timeout=120)
    finally:
        server.stop(httpd)
        thread.join(timeout=10)
        shutil.rmtree(profile, ignore_errors=True)
    if not os.path.isfile(out):
        raise InputError(f"chromium wrote no screenshot to {out}")
    return out


def main(argv=None):
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--session", required=True)
    parser.add_argument("--rater", help="whose page (not for --page dashboard)")
    parser.add_argument("--page", default="current", choices=PAGES)
    parser.add_argument("--out", required=True, help="the PNG file")
    parser.add_argument("--size", default="1100x820", help="window WIDTHxHEIGHT")
    args = parser.parse_args(argv)
    try:
        width, _, height = args.size.partition("x")
        if not (width.isdigit() and height.isdigit()):
            raise InputError(f"--size {args.size!r}: expected WIDTHxHEIGHT, e.g. 1100x820")
        print(take(args.session, args.rater, args.out, (int(width), int(height)), args.page))
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
