"""Human evaluation of captioning models as the XM3600 paper ran it (Sec. 2.3 and 3.3).

    python -m humaneval create  ...   # a session from results folders (or the references)
    python -m humaneval serve   ...   # the rating web app, one secret link per rater
    python -m humaneval status  ...   # each rater's progress
    python -m humaneval export  ...   # ratings as CSV / JSONL, side_by_side.csv, THUMB layout
    python -m humaneval analyze ...   # delta S x S, agreement, gold checks, Table 6

Modules: `scales` (the three rating scales and the answer checks), `results` (reading results
folders and the release), `subsets` (XM600 and seeded image subsets), `create` (building a
session), `session` (the session file and its checks), `store` (the SQLite ratings database),
`app` + `server` (the web app, served by waitress), `export`, `agreement` (Krippendorff's
alpha), `rating_stats` (delta S x S, rater and gold statistics), `study_report` + `plots`
(Markdown, CSV
and PNG; Table 6 through evaluation/analysis/correlate), `simulate` (simulated raters, for tests
and trying the pipeline), `screenshot` (a rater's page in headless chromium).
"""
