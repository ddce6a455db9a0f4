"""Crowd platforms: who a participant is from the enrolment URL, and how their study ends.

A crowd session (`create --crowd`) has one open enrolment link per language,
`<public URL>/join/<enrolment token>/<lang>`, to paste into the platform. The platform appends
who the participant is, by its own conventions:

- Prolific: `PROLIFIC_PID`, `STUDY_ID`, `SESSION_ID` (the study URL's "URL parameters"
  option, placeholders `{{%PROLIFIC_PID%}}` etc.). The study ends on Prolific's completion
  URL, `https://app.prolific.com/submissions/complete?cc=<code>` (or `--completion-url`).
- Amazon Mechanical Turk (an ExternalQuestion, shown in a frame on MTurk's site): `workerId`,
  `assignmentId`, `hitId`, `turkSubmitTo`. A preview has assignmentId
  `ASSIGNMENT_ID_NOT_AVAILABLE` and no worker: it takes no slot. The study ends by posting
  the assignment id (and the completion code) to `<turkSubmitTo>/mturk/externalSubmit`;
  turkSubmitTo must be one of MTurk's two sites.
- Any other: `participant` (the code is shown, and `--completion-url` followed when given).

The participant id is recorded with the slot (store.enrol): the same id always gets the same
slot back, and no id gets two.
"""

import dataclasses
import re
import urllib.parse

PROLIFIC_COMPLETION = "https://app.prolific.com/submissions/complete?cc={code}"
MTURK_SITES = ("https://www.mturk.com", "https://workersandbox.mturk.com")
MTURK_PREVIEW = "ASSIGNMENT_ID_NOT_AVAILABLE"
_ID = re.compile(r"^[A-Za-z0-9_.:@-]{1,128}$")
# (platform, its participant parameter, the other parameters it sends).
PLATFORMS = (
    ("prolific", "PROLIFIC_PID", ("STUDY_ID", "SESSION_ID")),
    ("mturk", "workerId", ("assignmentId", "hitId", "turkSubmitTo")),
    ("link", "participant", ()),
)


@dataclasses.dataclass(frozen=True)
class Arrival:
    """What an enrolment URL says.

    Attributes:
        platform: "prolific", "mturk" or "link"; None when the URL names no participant.
        participant: the platform's participant id, or None.
        details: the platform's other parameters (study, session, HIT, assignment ids).
        preview: an MTurk preview (no worker yet).
        problem: why the URL cannot enrol anyone, or None.
    """
    platform: str | None
    participant: str | None
    details: dict
    preview: bool = False
    problem: str | None = None


def arrival(args):
    """Reads an enrolment URL's query parameters (a mapping of str -> str)."""
    if args.get("assignmentId") == MTURK_PREVIEW and not args.get("workerId"):
        return Arrival("mturk", None, {}, preview=True)
    for platform, id_name, others in PLATFORMS:
        participant = args.get(id_name)
        if participant is None:
            continue
        details = {name: args[name] for name in others if args.get(name)}
        if not _ID.match(participant) or any(len(v) > 512 for v in details.values()):
            return Arrival(platform, None, {}, problem=f"{id_name} is malformed")
        submit_to = details.get("turkSubmitTo")
        if submit_to is not None and submit_to.rstrip("/") not in MTURK_SITES:
            return Arrival(platform, None, {}, problem="turkSubmitTo is not an MTurk site")
        return Arrival(platform, participant, details)
    return Arrival(None, None, {}, problem="no participant id")


def completion(crowd, participant):
    """How the study ends for one participant.

    Args:
        crowd: the session's crowd settings ({"completion_code", "completion_url"}).
        participant: the store's participant record of the rater, or None (a rater of a
            personal link).

    Returns:
        {"code", "url" (a link to follow, or None), "form" (MTurk: {"action", "fields"}, or
        None), "platform"}.
    """
    code = crowd["completion_code"]
    platform = participant["platform"] if participant else None
    url, form = crowd.get("completion_url"), None
    if url:
        url = url.replace("{code}", urllib.parse.quote(code))
    elif platform == "prolific":
        url = PROLIFIC_COMPLETION.format(code=urllib.parse.quote(code))
    if platform == "mturk" and "turkSubmitTo" in participant["details"]:
        details = participant["details"]
        form = {"action": details["turkSubmitTo"].rstrip("/") + "/mturk/externalSubmit",
                "fields": {"assignmentId": details.get("assignmentId", ""),
                           "completion_code": code}}
        url = None
    return {"code": code, "url": url, "form": form, "platform": platform}


def enrolment_links(base_url, enrol_token, langs):
    """{lang: {"prolific", "mturk", "link"}}: the enrolment URL of each language with each
    platform's placeholders (Prolific's `{{%...%}}`; MTurk appends its own parameters)."""
    out = {}
    for lang in langs:
        url = f"{base_url}/join/{enrol_token}/{lang}"
        out[lang] = {
            "prolific": f"{url}?PROLIFIC_PID={{{{%PROLIFIC_PID%}}}}"
                        f"&STUDY_ID={{{{%STUDY_ID%}}}}&SESSION_ID={{{{%SESSION_ID%}}}}",
            "mturk": url,
            "link": f"{url}?participant=ID",
        }
    return out
