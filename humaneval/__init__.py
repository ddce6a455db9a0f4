"""Human evaluation of captioning models as the XM3600 paper ran it (Sec. 2.3 and 3.3).

    python -m humaneval create  ...   # a session from results folders (or the references)
    python -m humaneval serve   ...   # the rating web app, one link per rater
    python -m humaneval export  ...   # ratings as CSV / JSONL, side_by_side.csv, THUMB layout
    python -m humaneval analyze ...   # delta S x S, agreement, gold checks, Table 6

Modules: `scales` (the three rating scales), `results` (reading results folders),
`subsets` (XM600 and seeded image subsets), `session` (creating, writing and checking session
files), `store` (the SQLite ratings database), `app` + `server` (the web app), `export`,
`agreement` (Krippendorff's alpha), `analysis` (delta S x S, rater statistics), `report`
(Markdown + CSV + PNG, Table 6 through eval/correlate), `simulate` (simulated raters, for tests
and for trying the pipeline out).
"""
