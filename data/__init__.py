"""The data, in three parts: read this first.

releases/ reads the release files as published (XM3600, COCO-35L, CC3M-35L); build/
(`python -m tools.build_data`) turns them into TFDS ArrayRecord datasets; pipeline/ is the
training input (`pipeline.train_iterator`). Beside them, shared: language codes, JSON Lines,
vocabularies, prompts, images, evaluation sets, worker processes, the demo data.
"""
