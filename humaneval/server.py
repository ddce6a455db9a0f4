"""Serves a session's rating app with waitress (a maintained, multi-threaded WSGI server).

`python -m humaneval serve --session S [--host 127.0.0.1] [--port 8000]` prints one link per
rater and serves until interrupted. With `--port 0` the system picks a free port; the first
line printed says which (`serving http://HOST:PORT`), which the tests read.
"""

import sys

import waitress
from waitress import wasyncore

from humaneval import app as app_lib


def rater_links(session, base_url):
    """[(rater name, language, link)] of a session, in the session's rater order."""
    return [(r.name, r.lang, f"{base_url}/r/{r.token}") for r in session.raters]


def make_server(session_folder, host="127.0.0.1", port=8000, threads=4):
    """A waitress server of the session's app, bound but not yet serving.

    Args:
        session_folder: the session folder.
        host, port: where to listen (port 0: any free port).
        threads: worker threads.

    Returns:
        (server, session); `server.run()` serves, `server.close()` stops,
        `server.effective_port` is the bound port.

    Raises:
        InputError: the session or its database fails a check.
    """
    app = app_lib.create_app(session_folder)
    server = waitress.create_server(app, host=host, port=port, threads=threads,
                                    clear_untrusted_proxy_headers=True)
    return server, app.config["HUMANEVAL_SESSION"]


def stop(server):
    """Stops a server that runs in another thread, so that its `run()` returns.

    Closing the listening socket alone is not enough: the browsers' keep-alive connections
    would keep the event loop going, so every connection is closed with it.
    """
    server.task_dispatcher.shutdown()
    wasyncore.close_all(server._map)


def serve(session_folder, host="127.0.0.1", port=8000, stream=None):
    """Serves until interrupted, after printing the address and every rater's link."""
    stream = stream or sys.stdout
    server, session = make_server(session_folder, host, port)
    base = f"http://{host}:{server.effective_port}"
    print(f"serving {base}", file=stream, flush=True)
    print(f"session {session.data['name']!r} ({session.type}, {', '.join(session.langs)}); "
          f"one link per rater:", file=stream)
    for name, lang, link in rater_links(session, base):
        print(f"  {name:<16} {lang:<4} {link}", file=stream)
    stream.flush()
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
