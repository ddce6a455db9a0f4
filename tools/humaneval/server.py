"""Serves a session's rating app with waitress (a maintained, multi-threaded WSGI server).

    python -m tools.humaneval serve --session S [--host 127.0.0.1] [--port 8000] [--threads 8]
        [--public-url https://rate.example.org/study1]

prints the links (one per rater, or the crowd enrolment links per language, and the owner's
dashboard) and serves until interrupted. With `--port 0` the system picks a free port; the
first line printed says which (`serving http://HOST:PORT`), which the tests read.

Behind a reverse proxy that terminates TLS, `--public-url` is the address raters open: the
printed links use it, and its path (e.g. `/study1`) is where the app lives (waitress's
url_prefix, so the proxy passes the path on unchanged). Without it, a server on every
interface (`--host 0.0.0.0`) prints links with this machine's host name, never 0.0.0.0.

Under load waitress warns on every request that waits for a thread ("Task queue depth");
`QueueWarnings` lets one such line through per minute, with the count it held back and a hint
to raise --threads.
"""

import errno
import logging
import socket
import sys
import threading
import time
import urllib.parse

import waitress
from waitress import wasyncore

from errors import InputError
from tools.humaneval import app as app_lib
from tools.humaneval import crowd

THREADS = 8
WILDCARD_HOSTS = ("0.0.0.0", "::", "")


class QueueWarnings(logging.Filter):
    """Lets one waitress queue warning through per `interval` seconds, with what it held."""

    def __init__(self, interval=60.0):
        super().__init__()
        self.interval = interval
        self.last = None
        self.held = 0

    def filter(self, record):
        now = time.monotonic()
        if self.last is not None and now - self.last < self.interval:
            self.held += 1
            return False
        if self.held:
            record.msg = (f"{record.msg} ({self.held} such warning(s) held back in the last "
                          f"{self.interval:.0f} s; raise serve --threads if it persists)")
        self.last, self.held = now, 0
        return True


def quiet_queue_warnings(interval=60.0):
    """Installs one `QueueWarnings` on waitress's queue logger (once); returns it."""
    logger = logging.getLogger("waitress.queue")
    for existing in logger.filters:
        if isinstance(existing, QueueWarnings):
            return existing
    flood = QueueWarnings(interval)
    logger.addFilter(flood)
    return flood


def rater_links(session, base_url):
    """[(rater name, language, link)] of a session, in the session's rater order."""
    return [(r.name, r.lang, f"{base_url}/r/{r.token}") for r in session.raters]


def public_base(public_url, host, port):
    """The base of the printed links, and the path prefix the app lives under.

    Args:
        public_url: --public-url, or None.
        host, port: where the server listens.

    Returns:
        (base URL without a trailing slash, url_prefix for waitress: "" or "/path").

    Raises:
        InputError: a public URL that is not http(s)://host[/path] (no query, no fragment).
    """
    if public_url:
        parts = urllib.parse.urlsplit(public_url)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.query \
                or parts.fragment:
            raise InputError(f"--public-url {public_url!r}: expected http(s)://HOST[/PATH], "
                             f"the address raters open (e.g. https://rate.example.org/study1)")
        path = parts.path.rstrip("/")
        return f"{parts.scheme}://{parts.netloc}{path}", path
    if host in WILDCARD_HOSTS:
        host = socket.gethostname()
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}", ""


def make_server(session_folder, host="127.0.0.1", port=8000, threads=THREADS,
                public_url=None, **app_options):
    """A waitress server of the session's app, bound but not yet serving.

    Args:
        session_folder: the session folder.
        host, port: where to listen (port 0: any free port).
        threads: worker threads.
        public_url: the address raters open, behind a reverse proxy (see the docstring).
        **app_options: for app.create_app (idle_seconds, dashboard_refresh).

    Returns:
        (server, session, base URL of the links); `server.run()` serves, `stop(server)`
        stops, `server.effective_port` is the bound port.

    Raises:
        InputError: the session or its database fails a check, the port is in use or not
            allowed, the host is not an address of this machine, or the public URL is
            malformed.
    """
    if threads < 1:
        raise InputError(f"--threads must be >= 1, got {threads}")
    _, prefix = public_base(public_url, host, port)
    app = app_lib.create_app(session_folder, **app_options)
    try:
        server = waitress.create_server(app, host=host, port=port, threads=threads,
                                        url_prefix=prefix, clear_untrusted_proxy_headers=True)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise InputError(f"--port {port}: {host}:{port} is already in use (another server?); "
                             f"stop it or choose another --port") from None
        if e.errno == errno.EACCES:
            raise InputError(f"--port {port}: not allowed for this user (ports below 1024 "
                             f"need privileges; serve on a high port behind a proxy)") from None
        raise InputError(f"--host {host} --port {port}: cannot listen there ({e.strerror})") \
            from None
    base, _ = public_base(public_url, host, server.effective_port)
    return server, app.config["HUMANEVAL_SESSION"], base


def stop(server):
    """Stops a server that runs in another thread, so that its `run()` returns at once.

    The worker threads end first; then the event loop closes every socket from its own
    thread (through waitress's trigger), so it neither waits for its next timeout nor keeps
    browsers' keep-alive connections going.
    """
    server.task_dispatcher.shutdown()
    try:
        server.trigger.pull_trigger(lambda: wasyncore.close_all(server._map))
    except OSError:  # the loop is gone already
        wasyncore.close_all(server._map)


def serve_in_thread(session_folder, **options):
    """Starts a server in a daemon thread (tests, screenshots); returns (server, thread,
    session, base URL). Stop it with `stop(server)` and join the thread."""
    server, session, base = make_server(session_folder, **options)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    return server, thread, session, base


def print_links(session, base, stream):
    """The links a study owner hands out, and the dashboard's."""
    print(f"session {session.data['name']!r} ({session.type}, {', '.join(session.langs)})",
          file=stream)
    if session.crowd is None:
        print("one personal link per rater:", file=stream)
        for name, lang, link in rater_links(session, base):
            print(f"  {name:<16} {lang:<4} {link}", file=stream)
    else:
        quota = session.crowd["quota"]
        print(f"crowd enrolment links, one per language ({len(session.raters)} slots"
              + (f", at most {quota} items each" if quota else "") + "; completion code "
              f"{session.crowd['completion_code']}):", file=stream)
        for lang, links in crowd.enrolment_links(base, session.crowd["enrol_token"],
                                                 session.langs).items():
            for platform, link in links.items():
                print(f"  {lang:<4} {platform:<9} {link}", file=stream)
    print(f"dashboard (the owner's only): {base}/dashboard/{session.owner_token}", file=stream)


def serve(session_folder, host="127.0.0.1", port=8000, threads=THREADS, public_url=None,
          stream=None):
    """Serves until interrupted, after printing the address and the links."""
    stream = stream or sys.stdout
    quiet_queue_warnings()
    server, session, base = make_server(session_folder, host, port, threads, public_url)
    print(f"serving http://{host}:{server.effective_port}", file=stream, flush=True)
    print(f"{threads} threads; links as raters open them: {base}"
          + (" (this machine's name: give --public-url for the address raters open)"
             if not public_url and host in WILDCARD_HOSTS else ""), file=stream)
    print_links(session, base, stream)
    stream.flush()
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
