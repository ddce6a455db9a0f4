"""Using a trained captioner: caption any image from the command line, Python or a browser.

    python -m tools.captioning IMAGES... --workdir runs/demo --langs en,es,hi,zh   # captions
    python -m tools.captioning.export --workdir runs/demo --out demo_captioner.npz  # an export
    python -m tools.captioning.web --workdir runs/demo                              # a web page
    python tools/captioning/run_exported.py demo_captioner.npz IMAGES...  # jax+numpy+PIL+spm only

Modules: `predict` (the API: `Captioner`, `Caption`), `decoding` (`Decoding`, and the
prediction function the run and the export share), `restore` (a run folder's model,
vocabulary and checkpoint), `export` (the exported file), `inputs` (image arguments and
pixels), `web` (the page, Flask + waitress), `__main__` (the command line), `run_exported`
(the stand-alone runner of an export).
"""

from errors import InputError
from tools.captioning.decoding import Decoding
from tools.captioning.predict import Caption, Captioner

__all__ = ["Caption", "Captioner", "Decoding", "InputError"]
