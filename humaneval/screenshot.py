"""A screenshot of a rater's page, taken by headless chromium (for the README and for checks).

    python -m humaneval.screenshot --session S --rater NAME --out page.png [--size 1100x820]

serves the session on a free local port in this process, lets Debian's `chromium` render the
rater's current item (`--screenshot`), and stops. Opening the page records it as seen, as a
rater's visit would; no rating is written.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading

from errors import InputError
from humaneval import server
from humaneval import session as session_lib

# Headless chromium as root on a machine without outside network: no sandbox, no GPU, a fresh
# profile, and no background connections (refused here; they would slow every start).
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--disable-quic")


def take(session_folder, rater_name, out, size=(1100, 820)):
    """Writes a PNG of the page `rater_name`'s link opens; returns `out`.

    Raises:
        InputError: no chromium, an unknown rater, or chromium wrote no picture.
    """
    chromium = shutil.which("chromium")
    if chromium is None:
        raise InputError("chromium not found: apt-get install chromium (make test installs it)")
    session = session_lib.load(session_folder)
    if rater_name not in session.by_name:
        raise InputError(f"no rater {rater_name!r} in the session; raters: "
                         f"{', '.join(session.by_name)}")
    httpd, _ = server.make_server(session_folder, port=0)
    thread = threading.Thread(target=httpd.run, daemon=True)
    thread.start()
    profile = tempfile.mkdtemp(prefix="humaneval-chromium-")
    try:
        url = f"http://127.0.0.1:{httpd.effective_port}/r/{session.by_name[rater_name].token}"
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
    parser.add_argument("--rater", required=True)
    parser.add_argument("--out", required=True, help="the PNG file")
    parser.add_argument("--size", default="1100x820", help="window WIDTHxHEIGHT")
    args = parser.parse_args(argv)
    try:
        width, _, height = args.size.partition("x")
        if not (width.isdigit() and height.isdigit()):
            raise InputError(f"--size {args.size!r}: expected WIDTHxHEIGHT, e.g. 1100x820")
        print(take(args.session, args.rater, args.out, (int(width), int(height))))
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
