"""Native captions of the demo scenes in English, Spanish, Hindi and Chinese.

Each language phrases a scene in its own word order and agreement, not word for word: es
puts the noun first with agreeing adjectives ("una estrella roja"); hi puts the
postpositional phrase first and the verb last, with inflecting adjectives (हरा/हरी); zh uses
locative-existential order (左边有…), measure words and no spaces. Two references each, as
(raw, tokenized) pairs; tokenized separates words (zh: segments) by single spaces.
"""

import dataclasses

COLOURS = ("red", "green", "blue", "yellow")
SHAPES = ("circle", "square", "triangle", "star")
SIZES = ("big", "small")
POSITIONS = ("left", "center", "right")
DEMO_LANGS = ("en", "es", "hi", "zh")
NUM_REFS = 2


@dataclasses.dataclass(frozen=True)
class Scene:
    """What a demo image shows; the attributes are indices-free names."""
    colour: str
    shape: str
    size: str
    position: str


# --- English -------------------------------------------------------------------------------

_EN_SIZE = {"big": ("big", "large"), "small": ("small", "tiny")}
_EN_POS = {
    "left": ("on the left", "on the left side of the picture"),
    "center": ("in the middle", "in the center of the picture"),
    "right": ("on the right", "on the right side of the picture"),
}


def _english(s):
    first = f"a {_EN_SIZE[s.size][0]} {s.colour} {s.shape} {_EN_POS[s.position][0]}"
    second = f"there is a {_EN_SIZE[s.size][1]} {s.colour} {s.shape} {_EN_POS[s.position][1]}"
    return [first.split(), second.split()]


# --- Spanish -------------------------------------------------------------------------------

# noun, grammatical gender
_ES_SHAPE = {"circle": ("círculo", "m"), "square": ("cuadrado", "m"),
             "triangle": ("triángulo", "m"), "star": ("estrella", "f")}
_ES_COLOUR = {"red": ("rojo", "roja"), "green": ("verde", "verde"),
              "blue": ("azul", "azul"), "yellow": ("amarillo", "amarilla")}
_ES_SMALL = {"m": "pequeño", "f": "pequeña"}
_ES_ARTICLE = {"m": "un", "f": "una"}
_ES_POS = {
    "left": ("a la izquierda", "en el lado izquierdo de la imagen"),
    "center": ("en el centro", "en el centro de la imagen"),
    "right": ("a la derecha", "en el lado derecho de la imagen"),
}


def _spanish(s):
    noun, gender = _ES_SHAPE[s.shape]
    colour = _ES_COLOUR[s.colour][0 if gender == "m" else 1]
    article = _ES_ARTICLE[gender]
    # Post-nominal size in the first reference, pre-nominal in the second.
    post = "grande" if s.size == "big" else _ES_SMALL[gender]
    pre = "gran" if s.size == "big" else _ES_SMALL[gender]
    first = f"{article} {noun} {colour} {post} {_ES_POS[s.position][0]}"
    second = f"hay {article} {pre} {noun} {colour} {_ES_POS[s.position][1]}"
    return [first.split(), second.split()]


# --- Hindi ---------------------------------------------------------------------------------

# noun, grammatical gender (all four shape nouns happen to be masculine)
_HI_SHAPE = {"circle": ("गोला", "m"), "square": ("वर्ग", "m"),
             "triangle": ("त्रिभुज", "m"), "star": ("तारा", "m")}
# colour adjective (masculine, feminine); लाल does not inflect
_HI_COLOUR = {"red": ("लाल", "लाल"), "green": ("हरा", "हरी"),
              "blue": ("नीला", "नीली"), "yellow": ("पीला", "पीली")}
# colour noun for the "X रंग का" construction of the second reference
_HI_COLOUR_NOUN = {"red": "लाल", "green": "हरे", "blue": "नीले", "yellow": "पीले"}
_HI_SIZE = {"big": ("बड़ा", "बड़ी"), "small": ("छोटा", "छोटी")}
_HI_GENITIVE = {"m": "का", "f": "की"}
_HI_POS = {
    "left": ("बाईं ओर", "चित्र में बाईं तरफ़"),
    "center": ("बीच में", "चित्र के बीच में"),
    "right": ("दाईं ओर", "चित्र में दाईं तरफ़"),
}


def _hindi(s):
    noun, gender = _HI_SHAPE[s.shape]
    g = 0 if gender == "m" else 1
    size = _HI_SIZE[s.size][g]
    first = f"{_HI_POS[s.position][0]} एक {size} {_HI_COLOUR[s.colour][g]} {noun}"
    # "there is one big circle of red colour": the colour noun takes the
    # oblique form before रंग, the genitive agrees with the shape noun.
    second = (f"{_HI_POS[s.position][1]} {_HI_COLOUR_NOUN[s.colour]} रंग "
              f"{_HI_GENITIVE[gender]} एक {size} {noun} है")
    return [first.split(), second.split()]


# --- Chinese -------------------------------------------------------------------------------

# noun, measure word
_ZH_SHAPE = {"circle": ("圆形", "个"), "square": ("正方形", "个"),
             "triangle": ("三角形", "个"), "star": ("星星", "颗")}
_ZH_COLOUR = {"red": "红色", "green": "绿色", "blue": "蓝色", "yellow": "黄色"}
_ZH_SIZE = {"big": "大", "small": "小"}
_ZH_POS = {
    "left": ("左边", "画面 左侧"),
    "center": ("中间", "画面 中央"),
    "right": ("右边", "画面 右侧"),
}


def _chinese(s):
    noun, measure = _ZH_SHAPE[s.shape]
    colour, size = _ZH_COLOUR[s.colour], _ZH_SIZE[s.size]
    # "On the left there is one red big circle."
    first = f"{_ZH_POS[s.position][0]} 有 一 {measure} {colour} 的 {size} {noun}"
    # "One big red circle is located at the picture's left side."
    second = f"一 {measure} {size} 的 {colour} {noun} 位于 {_ZH_POS[s.position][1]}"
    return [first.split(), second.split()]


_BUILDERS = {"en": _english, "es": _spanish, "hi": _hindi, "zh": _chinese}
# Languages written without spaces between words.
_UNSPACED = ("zh",)


def captions(scene, lang):
    """The NUM_REFS (raw, tokenized) reference pairs of `scene` in `lang` (raw zh has no spaces)."""
    if lang not in _BUILDERS:
        raise ValueError(f"demo has no captions in {lang!r}; known: {', '.join(DEMO_LANGS)}")
    refs = []
    for words in _BUILDERS[lang](scene):
        joiner = "" if lang in _UNSPACED else " "
        refs.append((joiner.join(words), " ".join(words)))
    return refs


def all_scenes():
    """Every combination of attributes, in a fixed order."""
    return [Scene(c, sh, si, p) for c in COLOURS for sh in SHAPES for si in SIZES
            for p in POSITIONS]
