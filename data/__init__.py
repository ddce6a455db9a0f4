"""The data: read this first. Three parts, and the small modules they share.

- releases/  reading the release files as published (XM3600, COCO-35L, CC3M-35L).
- build/     `python -m data.build`: the release files into TFDS ArrayRecord datasets
             (COCO-35L and CC3M-35L: every image once, a caption table per language).
- pipeline/  the training input: `pipeline.train_iterator`, a Grain pipeline over the build
             that gives each step its batch.

Shared: languages.py (the language codes), jsonl.py (JSON Lines reading), tokenizer.py
(SentencePiece vocabularies), prompts.py (LangId prompts and target ids), images.py
(decoding and resizing), eval_sets.py (the evaluation images and references),
worker_processes.py (how data/'s worker processes start and stop), demo.py +
demo_captions.py (`python -m data.demo`: synthetic data in the release layouts).
"""
