"""Human evaluation of captioning models as the XM3600 paper ran it (Sec. 2.3 and 3.3).

    python -m tools.humaneval create  ...   # a session from results folders (or the references)
    python -m tools.humaneval serve   ...   # the rating web app: rater or crowd links, a dashboard
    python -m tools.humaneval status  ...   # each rater's progress
    python -m tools.humaneval simulate ...  # simulated raters, to try the pipeline
    python -m tools.humaneval export  ...   # ratings as CSV / JSONL, side_by_side.csv, THUMB layout
    python -m tools.humaneval analyze ...   # delta S x S, Table 2, agreement, gold checks, Table 6
    python -m tools.humaneval texts   ...   # the raters' texts in English, to translate

Modules: `scales` (the three rating scales and the answer checks), `results` (reading results
folders and the release), `subsets` (XM600 and seeded image subsets), `create` (building a
session), `practice` (guideline examples and practice items), `texts` (every word a rater
reads, and translations), `session` (the session file and its checks), `store` (the SQLite
ratings database), `app` + `onboarding` + `dashboard` + `web` (the web app: rating pages and
crowd enrolment; consent, guidelines and practice; the owner's dashboard; what they share),
`crowd` (crowd platforms' conventions), `server` (served by waitress), `export`, `agreement`
(Krippendorff's alpha), `rating_stats` (delta S x S, Table 2, rater and gold statistics),
`study_report` + `plots` (Markdown, CSV and PNG; Table 6 through
tools/analysis/correlate), `simulate` (simulated raters, for tests and trying the
pipeline), `screenshot` (a page in headless chromium).
"""
