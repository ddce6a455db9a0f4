"""Language codes of XM3600 and the training sets: every reader rejects an unknown one alike."""

# The 36 languages of Crossmodal-3600 (Table 1 of the paper), in its order.
XM3600_LANGS = (
        "ar", "bn", "cs", "da", "de", "el", "en", "es", "fa", "fi", "fil", "fr",
        "he", "hi", "hr", "hu", "id", "it", "ja", "ko", "mi", "nl", "no", "pl",
        "pt", "quz", "ro", "ru", "sv", "sw", "te", "th", "tr", "uk", "vi", "zh",
)
# COCO-35L and CC3M-35L have no Cusco Quechua.
TRAIN_35L_LANGS = tuple(lang for lang in XM3600_LANGS if lang != "quz")
# The paper's "core" languages, used for its first side-by-side evaluations.
CORE_LANGS = ("en", "es", "hi", "zh")


def check_langs(langs, known=XM3600_LANGS, what="language"):
    """`langs` as a tuple, or ValueError naming the unknown ones.

    `langs` is an iterable or a comma-separated string (also as an element:
    `--config.x.langs=en,es` gives ("en,es",)); `what` names the codes in the message.
    """
    items = [langs] if isinstance(langs, str) else langs
    langs = tuple(l.strip() for item in items for l in item.split(",") if l.strip())
    if unknown := [l for l in langs if l not in known]:
        raise ValueError(
            f"unknown {what} {', '.join(map(repr, unknown))}; known: "
            f"{', '.join(known)}")
    if not langs:
        raise ValueError(f"no {what} given; known: {', '.join(known)}")
    return langs
