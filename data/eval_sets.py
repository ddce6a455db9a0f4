"""Evaluation sets: images decoded once, shared by the languages that caption them.

`load_xm3600` reads an XM3600 release folder and `load_coco_dev` COCO-35L's dev split
(from the build beside the release folder when there is one, else the release files);
both return a `CaptionSet` for the evaluators.
"""

import concurrent.futures
import dataclasses
import os

import numpy as np

from data import images as image_lib
from data import prompts
from data.build import layout
from data.releases import coco35l, xm3600


@dataclasses.dataclass
class CaptionSet:
    """Evaluation images, each once (uint8 [n, H, W, 3]), with each language's references.
    Per language: `rows` of `images` it scores, image `keys`, raw `references` and the LangId
    `prompts` ids."""
    images: np.ndarray
    rows: dict
    keys: dict
    references: dict
    prompts: dict

    @property
    def langs(self):
        return tuple(self.keys)


def _read_images(paths, image_size, names):
    """Decodes each image (a path, or a bytes function) once: uint8 [n, size, size, 3]."""
    out = np.empty([len(paths), image_size, image_size, 3], np.uint8)

    def read(i):
        source = paths[i]
        out[i] = (image_lib.decode_pixels(source(), image_size, name=names[i]) if callable(source)
                  else image_lib.read_pixels(source, image_size, name=names[i]))

    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        list(pool.map(read, range(len(paths))))
    return out


def _caption_set(chosen, vocab, *, image_size, prompt_template, max_prompt_len):
    """A CaptionSet from {lang: [(image id, references, image path or loader)]}."""
    # Each image once, in first-seen order (an id's rows all name the same file or record).
    paths = {image_id: image for rows in chosen.values() for image_id, _, image in rows}
    order = {image_id: row for row, image_id in enumerate(paths)}
    return CaptionSet(
        images=_read_images(list(paths.values()), image_size, [str(i) for i in paths]),
        rows={lang: np.array([order[i] for i, _, _ in rows], np.int64)
              for lang, rows in chosen.items()},
        keys={lang: [str(i) for i, _, _ in rows] for lang, rows in chosen.items()},
        references={lang: [list(refs) for _, refs, _ in rows] for lang, rows in chosen.items()},
        prompts={lang: prompts.tokenize_prompt(vocab, lang, prompt_template, max_prompt_len)
                 for lang in chosen})


def load_xm3600(data_dir, langs, vocab, *, image_size, prompt_template, max_prompt_len,
                max_images=None):
    """The XM3600 CaptionSet of `data_dir` (captions.jsonl, images/) for `langs` (checked codes:
    the evaluator's config_langs). `max_images` keeps the first that many images per language.
    ValueError names every language without captions in the file."""
    path = os.path.join(data_dir, "captions.jsonl")
    table = xm3600.read_references(path)
    if missing := [lang for lang in langs if lang not in table.by_lang]:
        raise ValueError(f"{path} has no captions in {', '.join(missing)}; it has "
                         f"{', '.join(sorted(table.by_lang))}")
    chosen = {lang: [(key, refs, xm3600.image_path(data_dir, key)) for key, refs
                     in zip(*(part[:max_images] for part in table.get(lang)), strict=True)]
              for lang in langs}
    return _caption_set(chosen, vocab, image_size=image_size, prompt_template=prompt_template,
                        max_prompt_len=max_prompt_len)


def load_coco_dev(manual_dir, langs, vocab, *, image_size, prompt_template, max_prompt_len,
                  max_images=None):
    """COCO-35L's dev split (Karpathy val) with the translated references of `langs`.
    Keys are COCO image ids as strings; the same set whether read from the build or the release."""
    if (built := _built_dev(manual_dir, langs)) is None:
        examples, _ = coco35l.read_split(manual_dir, "dev", langs)
        chosen = {lang: [(e.cocoid, e.captions, e.image_path) for e in examples[lang][:max_images]]
                  for lang in langs}
    else:
        chosen = _built_rows(built, manual_dir, langs, max_images)
    for lang, rows in chosen.items():
        if not rows:
            raise ValueError(f"COCO-35L dev in {manual_dir} has no examples in {lang!r}")
    return _caption_set(chosen, vocab, image_size=image_size, prompt_template=prompt_template,
                        max_prompt_len=max_prompt_len)


def _built_dev(manual_dir, langs):
    """The COCO-35L build beside `manual_dir` if it holds the dev tables of `langs`, else None."""
    data_dir = os.path.join(os.path.dirname(os.path.abspath(manual_dir)), "tfds")
    try:
        built = layout.Built(data_dir, "coco35l")
    except layout.NotBuiltError:
        return None
    return built if set(langs) <= set(built.langs("dev")) else None


def _built_rows(built, manual_dir, langs, max_images):
    """{lang: [(cocoid, references, image path or bytes function)]} of the build's dev tables."""
    store, files = built.images("dev"), None
    if built.metadata().get("max_side"):  # Score the images as released, not the build's copies.
        karpathy = coco35l.read_karpathy(coco35l.karpathy_path(manual_dir))
        root = coco35l.image_root(manual_dir)
        files = {cid: os.path.join(root, path) for cid, (_, path, _) in karpathy.items()}
    chosen = {}
    for lang in langs:
        table = built.captions("dev", lang)
        chosen[lang] = [(key, refs, files[key] if files else (lambda index=index: store[index][1]))
                        for index, key, refs in table.read(range(len(table))[:max_images])]
    return chosen
