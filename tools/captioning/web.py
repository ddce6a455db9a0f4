r"""The captioning web page: drop or choose an image, tick languages and a decoding, read captions.

    python -m tools.captioning.web (--workdir RUN [--step N|best] | --exported FILE.npz) \
        [--host 127.0.0.1] [--port 8000] [--compilation_cache DIR|none]

One page (`GET /`) and one call (`POST /caption`, multipart: `image`, `langs` repeated,
`decode`, and that decoding's settings, checked by model/decode.Decoding) answering JSON
{"image", "decoding", "seconds", "captions": [{"lang", "caption", "log_prob"}]} or, for bad
input, {"error": message} with status 400 (413 for an image over 32 MiB). The page disables
its button while a request is out, and fits a phone's width. Served by waitress, as
tools/humaneval/'s rating app; requests decode one at a time (one model in memory, compiled
once per batch shape).
"""

import dataclasses
import threading
import time

import flask
import waitress
import werkzeug.exceptions

import errors
from data import languages
from errors import InputError
from model import decode
from tools.captioning.arguments import ArgumentParser
from tools.captioning.predict import Captioner

MAX_IMAGE_BYTES = 32 * 2**20
# The form's settings and how each is parsed; those of the decoding not chosen are not sent
# (the page disables their fields), and are an error when a request has them.
_PARSERS = {"beam_size": int, "alpha": float, "temperature": float, "top_k": int, "seed": int}


def _form_decoding(form, captioner):
    """The Decoding of the form's `decode` and settings (InputError naming a bad field)."""
    method = form.get("decode", "greedy")
    settings = dataclasses.asdict(captioner.default_decoding(method)) \
        if method in decode.METHODS else {}
    settings.pop("method", None)
    for name, parse in _PARSERS.items():
        text = form.get(name, "").strip()
        if not text:
            continue
        try:
            settings[name] = parse(text)
        except ValueError:
            raise InputError(f"{name}: expected {'an integer' if parse is int else 'a number'}"
                             f", got {text!r}") from None
    return captioner.check_decoding(decode.Decoding.create(method, settings))


def create_app(captioner):
    """The Flask app of the page, around a `Captioner`."""
    app = flask.Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = MAX_IMAGE_BYTES
    lock = threading.Lock()
    defaults = {m: captioner.default_decoding(m) for m in decode.METHODS}
    checked = [lang for lang in languages.CORE_LANGS if lang in captioner.langs] \
        or list(captioner.langs[:1])

    @app.errorhandler(InputError)
    def bad_input(e):
        return flask.jsonify(error=str(e)), 400

    @app.errorhandler(werkzeug.exceptions.RequestEntityTooLarge)
    def too_large(_):
        return flask.jsonify(error=f"the image is over {MAX_IMAGE_BYTES // 2**20} MiB"), 413

    @app.get("/")
    def page():
        return flask.render_template(
            "page.html", langs=captioner.langs, checked=checked, defaults=defaults,
            fixed=captioner.settings_fixed, source=captioner.source)

    @app.post("/caption")
    def caption():
        upload = flask.request.files.get("image")
        if upload is None or not upload.filename:
            raise InputError("no image: choose or drop one")
        langs = flask.request.form.getlist("langs")
        if not langs:
            raise InputError("no language ticked")
        langs = captioner.check_langs(langs)
        decoding = _form_decoding(flask.request.form, captioner)
        data = upload.read()
        start = time.time()
        with lock:
            captions = captioner.caption([(upload.filename, data)], langs, decoding)
        return flask.jsonify(
            image=upload.filename, decoding=decoding.describe(),
            seconds=round(time.time() - start, 3),
            captions=[{"lang": c.lang, "caption": c.text, "log_prob": c.log_prob}
                      for c in captions])

    return app


def make_server(captioner, host="127.0.0.1", port=8000, threads=4):
    """A waitress server of the page, bound but not serving yet (`.run()`; port 0: any)."""
    return waitress.create_server(create_app(captioner), host=host, port=port,
                                  threads=threads, clear_untrusted_proxy_headers=True)


def main(argv=None):
    """Command line: see the module docstring (bad input raises an `errors.Error`)."""
    parser = ArgumentParser(prog="python -m tools.captioning.web",
                            description=__doc__.splitlines()[0])
    model = parser.add_mutually_exclusive_group(required=True)
    model.add_argument("--workdir", help="a run's folder (config.json, checkpoints/)")
    model.add_argument("--exported", help="a file written by python -m tools.captioning.export")
    parser.add_argument("--step", default=None,
                        help="with --workdir: a checkpoint step, or 'best' (default: latest)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="0: any free port")
    parser.add_argument("--compilation_cache", default=None,
                        help="JAX's persistent compilation cache, as python -m "
                             "tools.captioning's; 'none' turns it off")
    args = parser.parse_args(argv)
    if args.exported:
        if args.step is not None:
            raise InputError("--step is a setting of --workdir")
        captioner = Captioner.from_exported(args.exported,
                                            compilation_cache=args.compilation_cache)
    else:
        captioner = Captioner.from_run(args.workdir, args.step,
                                       compilation_cache=args.compilation_cache)
    try:
        server = make_server(captioner, args.host, args.port)
    except OSError as e:
        raise InputError(f"cannot serve on {args.host}:{args.port}: {e.strerror or e}") \
            from None
    print(f"serving http://{args.host}:{server.effective_port} ({captioner.source})",
          flush=True)
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    errors.run_main(main)
