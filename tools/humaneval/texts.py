"""Every word a rater reads, in English, and the translation files that put it in their language.

`ENGLISH` is the kit's catalogue: {key: text}, texts with `{name}` fields filled in when shown.
It holds the pages' words, the scales' labels and the guidelines of the three protocols, in
this project's own words (what each level means; the paper's raters had guidelines of that
kind, Appendix B). A study owner translates it for a rating language with a JSON file of the
same keys (`python -m tools.humaneval texts --out en.json` writes the English one to start from)
and gives it to `create --translation LANG=FILE`; the session then stores it, so what raters
read is fixed with the session. A key the file lacks falls back to English (create warns); a
key the catalogue does not have, or a text whose `{fields}` differ from the English one, is an
error naming the key. The consent text is the owner's (`--consent FILE`); a translation file
gives it in its language under "consent.text".
"""

import json
import os
import string

import markupsafe

import files
from errors import InputError
from formats import json_object

# The languages whose script runs right to left (the `dir` of a translated page).
_RTL = frozenset({"ar", "fa", "he"})

ENGLISH = {
    # Every page.
    "page.title": "Caption rating",
    "index.body": "Open the personal link you were given: it shows your own items and "
                  "remembers where you left off.",
    "continue": "Continue",
    "retry": "Try again",
    "guidelines.link": "Guidelines",
    # The rating page.
    "progress": "Item {n} of {total}",
    "rated": "{done} rated",
    "clock.item": "this item",
    "clock.all": "in all",
    "side.left": "Left",
    "side.right": "Right",
    "empty_caption": "(this caption is empty)",
    "image.alt": "the image to describe",
    "instructions.sxs": "Which caption describes the image better? Judge what the captions "
                        "say about the image, and how well they are written in this language.",
    "instructions.quality": "How good is this caption of the image, in this language?",
    "instructions.thumb": "Rate the caption: precision (is everything it says in the image?), "
                          "recall (does it mention what matters?), and deduct for fluency, "
                          "conciseness and non-inclusive language.",
    "keys.sxs": "Keys 1-7 choose and go on.",
    "keys.quality": "Keys 1-5 choose and go on.",
    "keys.thumb": "Keys: digits set the highlighted score (precision first, then recall); "
                  "p or r chooses which score the digits set; f, c and i step through the "
                  "fluency, conciseness and inclusive-language deductions; Enter submits.",
    "submit": "Submit",
    "sxs.-3": "Left much better", "sxs.-2": "Left better", "sxs.-1": "Left slightly better",
    "sxs.0": "Similar",
    "sxs.1": "Right slightly better", "sxs.2": "Right better", "sxs.3": "Right much better",
    "quality.Excellent": "Excellent", "quality.Good": "Good", "quality.Medium": "Medium",
    "quality.Bad": "Bad", "quality.Not-Enough-Info": "Not enough information",
    "thumb.P": "Precision", "thumb.R": "Recall", "thumb.Fl": "Fluency",
    "thumb.Con": "Conciseness", "thumb.Inc": "Inclusive language",
    # What the page's script says.
    "js.saving": "Saving your answer…",
    "js.offline": "The server cannot be reached: your answer was NOT saved. Check your "
                  "connection, then choose again.",
    "js.failed": "Your answer was not saved:",
    "js.idle": "Paused: no input for {seconds} s, so this pause is not counted as working "
               "time. Move the mouse or press a key to go on.",
    # Consent.
    "consent.title": "Before you start",
    "consent.agree": "I agree and want to take part",
    "consent.decline": "I do not agree",
    "declined.title": "You chose not to take part",
    "declined.body": "Nothing you did was kept as a rating. You can close this page (on a "
                     "crowd platform, return the study there). If you change your mind, open "
                     "your link again.",
    "withdrawn.title": "You have withdrawn from the study",
    "withdrawn.body": "Your {count} rating(s) are withdrawn: they are left out of every "
                      "result and export of the study, and kept only as a record that you "
                      "withdrew. This link no longer works. You can close this page (on a "
                      "crowd platform, return the study there).",
    "withdraw.title": "Withdraw from the study",
    "withdraw.link": "Withdraw from the study",
    "withdraw.body": "You have rated {count} item(s). If you withdraw, your ratings are left "
                     "out of every result and export of the study (kept only as a record that "
                     "you withdrew), and this link stops working.",
    "withdraw.confirm": "Withdraw my ratings",
    "withdraw.back": "Go back to rating",
    # Guidelines.
    "guidelines.title": "Guidelines",
    "guidelines.continue": "I have read the guidelines: go on",
    "guidelines.back": "Back to rating",
    "guidelines.examples": "Examples from this study",
    "guidelines.borderline": "When you hesitate between two answers",
    "guide.sxs.intro": "You will see an image and two captions of it, Left and Right. Say "
                       "which one describes the image better, and by how much. The two "
                       "captions come from different sources, shown on random sides.",
    "guide.sxs.judge": "Judge first what each caption says: is it true of this image, and "
                       "does it mention what matters most in it? Then how it is written: is "
                       "it a natural, correct sentence in this language? A caption that says "
                       "something false about the image is worse than one that is vague but "
                       "true.",
    "guide.sxs.3": "Much better: one caption is right about the image and the other is wrong "
                   "about its main content, describes another image, or cannot be read.",
    "guide.sxs.2": "Better: both are about this image, but one is clearly more accurate or "
                   "more complete about something that matters.",
    "guide.sxs.1": "Slightly better: the difference is small: a detail, a word, a small slip "
                   "of grammar.",
    "guide.sxs.0": "Similar: both are equally good or equally bad, or they differ in nothing "
                   "that matters. Two identical captions are always Similar.",
    "guide.sxs.borderline": "Choose the answer closer to Similar.",
    "guide.sxs.example": "With this image, if one side said «{own}» and the other «{other}», "
                         "the first is much better: the second describes another image.",
    "guide.quality.intro": "You will see an image and one caption of it. Say how good the "
                           "caption is as a description of this image, in this language.",
    "guide.quality.Excellent": "Excellent: accurate about everything it says, mentions what "
                               "matters in the image, and reads as a fluent, natural sentence. "
                               "Nothing to fix.",
    "guide.quality.Good": "Good: accurate and well written, but misses something notable or "
                          "has a small flaw in its wording.",
    "guide.quality.Medium": "Medium: gets the main subject right, but is wrong about a "
                            "detail, leaves out much of what matters, or is awkward to read.",
    "guide.quality.Bad": "Bad: wrong about the main content, describes another image, or "
                         "cannot be understood.",
    "guide.quality.Not-Enough-Info": "Not enough information: you cannot judge, for example "
                                     "because the image does not load or cannot be made out. "
                                     "Use it as rarely as you can.",
    "guide.quality.borderline": "Choose the lower of the two.",
    "guide.quality.example": "With this image, «{own}» could be Excellent or Good (a person "
                             "wrote it for this image), while «{other}» is Bad: it describes "
                             "another image.",
    "guide.thumb.intro": "You will see an image and one caption of it. Give it two scores "
                         "from 1 to 5 and, where they apply, three deductions.",
    "guide.thumb.P": "Precision: how much of what the caption says is true of the image. 5: "
                     "everything; 4: one small error; 3: some errors; 2: mostly wrong; 1: "
                     "nothing right (for example a caption of another image).",
    "guide.thumb.R": "Recall: how much of what matters in the image the caption mentions. 5: "
                     "all the important content; 3: about half of it; 1: none of it.",
    "guide.thumb.Fl": "Fluency: deduct for errors of language. A slip a proofreader would fix "
                      "costs the least; a severe problem (repeated words, a broken or "
                      "ambiguous sentence) costs more.",
    "guide.thumb.Con": "Conciseness: deduct when the caption says more than it needs to, "
                       "repeating itself or padding.",
    "guide.thumb.Inc": "Inclusive language: deduct for a subjective comment on how a person "
                       "looks, and for language that is offensive.",
    "guide.thumb.borderline": "Choose the lower score, and deduct only what you could point "
                              "at.",
    "guide.thumb.example": "With this image, «{own}» deserves a high precision (a person wrote "
                           "it for this image), while «{other}» gets precision 1: it "
                           "describes another image.",
    # Practice.
    "practice.title": "Practice {n} of {total}",
    "practice.note": "A practice item: its answer is known and it does not count. You will "
                     "see how your answer compares.",
    "feedback.title": "Practice {n} of {total}: feedback",
    "feedback.right": "Well done: that is the expected answer.",
    "feedback.wrong": "Not quite: have another look at the guidelines.",
    "feedback.yours": "Your answer",
    "feedback.expected": "Expected",
    "feedback.next": "Next practice item",
    "feedback.start": "Start rating",
    "why.own_vs_other": "One caption describes this image and the other describes a different "
                        "image: the one about this image is much better.",
    "why.identical": "The two captions are identical, so they are Similar.",
    "why.own": "A person wrote this caption for this image.",
    "why.other": "This caption describes another image.",
    # The end, and the pages that say something went wrong.
    "done.title": "Thank you",
    "done.body": "You rated all {count} items ({spent}).",
    "done.close": "You can close this page.",
    "done.code": "Your completion code",
    "done.return": "Return to the platform to finish",
    "done.redirect": "You will be taken back to the platform in a few seconds.",
    "done.submit": "Submit and finish",
    "full.title": "The study is full",
    "full.body": "Every place in this study is taken. Please return it on the platform; "
                 "thank you for your interest.",
    "preview.title": "Preview",
    "preview.body": "Accept the task on the platform to begin: the rating starts once you "
                    "have accepted it.",
    "join.no_id": "This link must be opened from the crowd platform: it lacks your "
                  "participant id.",
    "error.400": "The answer was not understood",
    "error.404": "Page not found",
    "error.409": "Already done",
    "error.unknown_link": "This link is not known. Check that you copied all of it, or ask "
                          "the study's organizer for your link.",
    "error.no_item": "There is no such item in your list.",
    "error.duplicate": "You already answered this item (perhaps in another tab or window); "
                       "your first answer is kept. Continue with your next item.",
    "error.introduction": "Please finish the introduction first.",
    "error.not_shown": "This item was not shown to you yet: open it from your list first.",
    "error.withdrawn": "You withdrew from this study: this link no longer works.",
    "paused.title": "The study is paused",
    "error.paused": "The study is paused: the server cannot store answers at the moment, and "
                    "your last answer was NOT stored. Please try again later.",
    # The consent text is the study owner's (create --consent FILE); none by default.
    "consent.text": "",
}


def fields(text):
    """The `{field}` names of a text."""
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def read_translation(path, lang):
    """Reads a translation file: a JSON object of catalogue keys and texts.

    Args:
        path: the file.
        lang: the rating language it is for (for messages).

    Returns:
        ({key: text}, [keys missing, which stay in English]).

    Raises:
        InputError: the file is missing or not a JSON object, a key is unknown, a value is
            not a string, or a text's {fields} differ from the English text's (key named).
    """
    data = json_object.read(path, InputError, f"translation file for {lang!r}")
    for key, text in data.items():
        where = f"{path}: key {key!r}"
        if key not in ENGLISH:
            raise InputError(f"{where}: not a key of the kit's texts (python -m tools.humaneval "
                             f"texts lists them)")
        if not isinstance(text, str):
            raise InputError(f"{where}: expected a string, got {type(text).__name__}")
        try:
            found = fields(text)
        except ValueError as e:
            raise InputError(f"{where}: {e} (write a brace as {{{{ or }}}})") from None
        if found != fields(ENGLISH[key]):
            raise InputError(f"{where}: fields {sorted(found)} differ from the English text's "
                             f"{sorted(fields(ENGLISH[key]))}")
    missing = [key for key in ENGLISH if key not in data and key != "consent.text"]
    return data, missing


def write_english(path):
    """Writes the English catalogue as a translation file to start from; returns `path`."""
    if os.path.isdir(path):
        raise InputError(f"--out {path}: a folder; give the JSON file to write (e.g. "
                         f"{os.path.join(path, 'en.json')})")
    files.write_text(path, json.dumps(ENGLISH, indent=1, ensure_ascii=False) + "\n")
    return path


class Wording:
    """The texts of one rater's pages: their language's translation over English.

    Args:
        lang: the page language ("en" without a translation).
        translation: {key: text} of that language ({} for English).
        consent: the owner's consent text in English, or "" (none).
    """

    def __init__(self, lang="en", translation=None, consent=""):
        self.lang = lang
        self.dir = "rtl" if lang in _RTL else "ltr"
        self.texts = {**ENGLISH, **(translation or {}), "consent.text": consent}

    def __call__(self, key, **values):
        text = self.texts[key]
        return text.format(**values) if values else text

    def quoting(self, key, lang, direction, **captions):
        """A text that quotes captions, as HTML: each caption set apart with its own language
        and direction (<bdi>), so that an Arabic caption in an English sentence reads right."""
        quoted = {name: markupsafe.Markup('<bdi lang="{}" dir="{}">{}</bdi>').format(
            lang, direction, text) for name, text in captions.items()}
        return markupsafe.Markup(markupsafe.escape(self.texts[key])).format(**quoted)

    def paragraphs(self, key):
        """A long text as paragraphs (split at blank lines)."""
        return [p.strip() for p in self.texts[key].split("\n\n") if p.strip()]


def wording_for(session, lang):
    """The `Wording` of a rating language in `session` (English where it has no
    translation)."""
    study = session.data["study"]
    translation = study["translations"].get(lang)
    if translation is None:
        return Wording("en", None, study["consent"])
    return Wording(lang, translation, translation.get("consent.text", study["consent"]))


def best_wording(session, accept_languages):
    """The wording for a visitor without a rater link: their browser's preferred language
    among the session's translations (werkzeug's Accept-Language), else English."""
    offered = ["en", *session.data["study"]["translations"]]
    return wording_for(session, accept_languages.best_match(offered, default="en"))
