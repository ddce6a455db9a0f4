"""Using a trained captioner: caption any image from the command line, Python or a browser.

    python -m tools.captioning IMAGES... --workdir runs/demo --langs en,es,hi,zh   # captions
    python -m tools.captioning.export --workdir runs/demo --out demo_captioner.npz  # an export
    python -m tools.captioning.web --workdir runs/demo                              # a web page
    python tools/captioning/run_exported.py demo_captioner.npz IMAGES...  # jax+numpy+PIL+spm only

Modules: `predict` (the API: `Captioner`, `Caption`; `Decoding` is model/decode.py's, which
the evaluation tool uses too), `decoding` (the prediction function the run and the export
share), `restore` (a run folder's model,
vocabulary and checkpoint), `export` (the exported file), `inputs` (image arguments and
pixels), `web` (the page, Flask + waitress), `__main__` (the command line), `run_exported`
(the stand-alone runner of an export).
"""

from errors import InputError
from model.decode import Decoding

__all__ = ["Caption", "Captioner", "Decoding", "InputError"]


def __getattr__(name):
    # The API's classes are imported when first asked for, not with the package: then
    # `python -m tools.captioning.export` runs the module once (the API imports it), without
    # runpy's "found in sys.modules" warning.
    if name in ("Caption", "Captioner"):
        from tools.captioning import predict
        return getattr(predict, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
