"""The tools: what uses the core (train.py, model/, training/, data/, evaluation/) and what the
core never imports.

- `captioning` (`python -m tools.captioning`): caption images with a trained run: command
  line, Python API, a browser page, an exported file.
- `humaneval` (`python -m tools.humaneval`): the paper's human evaluations as a kit: sessions,
  the raters' web app, the study's analysis.
- `analysis` (`python -m tools.analysis.<name>`): over results folders and human judgements:
  compare, correlate (Table 6), THUMB, the meta-evaluation of metrics.
- `vifidel` (`python -m tools.vifidel`): VIFIDEL, visual fidelity against object labels; also
  the `vifidel` evaluator.
"""
