"""VIFIDEL's function-word lists: their derivation from UD treebanks, and that numerals, nouns
and adjectives stay in a caption (the paper keeps "only content words")."""

import os

import numpy as np
import pytest

from data import languages
from errors import InputError
from evaluation.cider import text
from tests.tools.vifidel.conftest import write_vec
from tools.vifidel import bags, corpus, derive_function_words, stopwords, vectors
from tools.vifidel.scorer import VifidelScorer

# CoNLL-U: "du" is a multiword token (de + le), "two" a numeral, "like" a verb once and an
# adposition twice, "on" an adposition once only, "all" a quantifier, "one" an article that is
# a numeral too, "été" an auxiliary three times and a noun twice.
# One caption per language with a list: [bracketed] words are function words (removed), every
# other word is a numeral, quantifier, noun, adjective or verb that must stay. ja, th and zh are
# written as the vectors would segment them (spaces only here; the caption joins them).
SAMPLES = {
    "ar": "ثلاثة رجال [مع] بعض الكلاب الكبيرة [على] العشب [في] كل الحديقة",
    "bn": "একটা লাল গাড়ি [আমার] বড় কুকুর",
    "cs": "dva muži [s] několika psy [a] každý velký strom [na] poli",
    "da": "to mænd [med] mange hunde [og] [en] rød bil [på] vejen",
    "de": "zwei Männer [mit] vielen anderen Hunden [und] mehrere rote Autos beide Frauen "
          "[und] alle Kinder [vor] [dem] Haus",
    "el": "δύο άνδρες [με] πολλά σκυλιά [και] ένα κόκκινο αυτοκίνητο [στο] δρόμο",
    "en": "[a] green trash can [and] two small dogs [on] top [of] many other cars while both "
          "men [and] each child hold some [of] [the] several flags [in] front [of] all boats",
    "es": "muchas personas bajo [un] árbol grande [con] varias sillas otro perro ambas niñas "
          "[y] todas [las] casas [y] [un] sobre blanco",
    "fa": "دو مرد [با] چند سگ بزرگ [در] همه درختان",
    "fi": "kaksi miestä [ja] monta koiraa [sekä] kaikki punaiset autot",
    "fil": "dalawang lalaki [at] maraming aso [sa] malaking bahay",
    "fr": "plusieurs enfants jouent [en] été [avec] quelques chiens [et] chaque maison blanche "
          "[de] [la] ville",
    "he": "שני גברים [עם] הרבה כלבים [על] הדשא",
    "hi": "एक आदमी कई कुत्तों [के] [साथ] कुछ पेड़ों [के] बीच पूर्व [की] [तरफ] देख [रहा] [है]",
    "hr": "dva muškarca [s] nekoliko pasa [i] svaki veliki automobil [na] cesti",
    "hu": "két férfi [és] sok kutya egy nagy piros autó",
    "id": "dua pria [dengan] beberapa anjing [dan] semua mobil merah [di] jalan",
    "it": "due uomini [con] molti cani [e] tutte [le] macchine rosse [sulla] strada",
    "ja": "二 匹 [の] 大きな 犬 [が] 赤い 車 [の] 前 [に] 座っ [て] いる 各 席",
    "ko": "두 남자 [그] 모든 큰 개",
    "nl": "twee mannen [met] veel honden [en] alle rode fietsen [op] [de] straat",
    "no": "to menn [med] mange hunder [og] alle røde biler [på] gaten",
    "pl": "dwóch mężczyzn [z] psami [i] wszystkie czerwone samochody [na] ulicy",
    "pt": "dois homens [com] muitos cães [e] todos [os] carros vermelhos [na] rua",
    "ro": "doi bărbați [cu] mulți câini [și] toate mașinile roșii [pe] stradă",
    "ru": "два человека [с] несколькими собаками [и] все красные машины [на] улице",
    "sv": "två män [med] många hundar [och] alla röda bilar [på] gatan",
    "te": "ఇద్దరు మనుషులు చాలా కుక్కలు [ఈ] పెద్ద కారు",
    "th": "สุนัข สอง ตัว [และ] แมว หลาย ตัว [บน] โต๊ะ",
    "tr": "iki adam birçok köpek [ve] bütün kırmızı arabalar",
    "uk": "двоє чоловіків [з] багатьма собаками [і] всі червоні машини [на] вулиці",
    "vi": "hai người đàn ông [với] nhiều con chó [và] tất cả [các] xe màu đỏ",
    "zh": "红色 [的] 车 [和] 黄色 [的] 门 大 小 新 路 树 山 河 站 [在] 所有 每 其他 一 个",
}

CONLLU = """# text = The man sat on two chairs du côté.
1\tThe\tthe\tDET\t_\t_\t2\tdet\t_\t_
2\tman\tman\tNOUN\t_\t_\t3\tnsubj\t_\t_
3\tsat\tsit\tVERB\t_\t_\t0\troot\t_\t_
4\ton\ton\tADP\t_\t_\t6\tcase\t_\t_
5\ttwo\ttwo\tNUM\t_\t_\t6\tnummod\t_\t_
6\tchairs\tchair\tNOUN\t_\t_\t3\tobl\t_\t_
7-8\tdu\t_\t_\t_\t_\t_\t_\t_\t_
7\tde\tde\tADP\t_\t_\t9\tcase\t_\t_
8\tle\tle\tDET\t_\t_\t9\tdet\t_\t_
9\tcôté\tcôté\tNOUN\t_\t_\t3\tobl\t_\t_
9.1\tgone\tgo\tVERB\t_\t_\t_\t_\t_\t_

# text = the like du 2 like like
1\tthe\tthe\tDET\t_\t_\t2\tdet\t_\t_
2\tlike\tlike\tVERB\t_\t_\t0\troot\t_\t_
3-4\tdu\t_\t_\t_\t_\t_\t_\t_\t_
3\tde\tde\tADP\t_\t_\t2\tcase\t_\t_
4\tle\tle\tDET\t_\t_\t2\tdet\t_\t_
5\t2\t2\tNUM\t_\t_\t2\tobj\t_\t_
6\tlike\tlike\tADP\t_\t_\t2\tcase\t_\t_
7\tlike\tlike\tADP\t_\t_\t2\tcase\t_\t_

# text = all all one one été été été été été
1\tall\tall\tDET\t_\tPronType=Tot\t0\troot\t_\t_
2\tall\tall\tDET\t_\tPronType=Tot\t1\tdet\t_\t_
3\tone\tone\tDET\t_\tNumType=Card|PronType=Art\t1\tdet\t_\t_
4\tone\tone\tDET\t_\tNumType=Card|PronType=Art\t1\tdet\t_\t_
5\tété\têtre\tAUX\t_\t_\t1\taux\t_\t_
6\tété\têtre\tAUX\t_\t_\t1\taux\t_\t_
7\tété\têtre\tAUX\t_\t_\t1\taux\t_\t_
8\tété\tété\tNOUN\t_\t_\t1\tobj\t_\t_
9\tété\tété\tNOUN\t_\t_\t1\tobj\t_\t_
"""


def test_derivation_rule(tmp_path):
    path = tmp_path / "xx.conllu"
    path.write_text(CONLLU, encoding="utf-8")
    words, counts = derive_function_words.function_words([str(path)])
    # the (twice DET), du (twice, both parts function words), de, le, like (ADP 2 of 3 times),
    # one (an article); "on" once only, "two" a numeral, "man" a noun, "all" a quantifier,
    # "été" a noun in 2 of its 5 occurrences.
    assert words == ["de", "du", "le", "like", "one", "the"]
    assert counts["like"] == (2, 3) and counts["du"] == (2, 2)
    out = tmp_path / "lists"
    assert derive_function_words.main(["--treebank", f"en={path}", "--source", "en=UD test",
                                       "--out", str(out)]) == 0
    header = (out / "en.txt").read_text(encoding="utf-8")
    assert "xx.conllu (UD test)" in header and header.endswith("one\nthe\n")
    assert "never listed: can" in header
    assert stopwords.read_file(str(out / "en.txt"), "en") == {"de", "du", "le", "like", "one",
                                                              "the"}
    (tmp_path / "bad.conllu").write_text("1\tthe\tDET\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"bad.conllu:1: expected 10 tab-separated columns"):
        derive_function_words.function_words([str(tmp_path / "bad.conllu")])


def test_the_english_list_keeps_content_words_the_iso_list_removes():
    function, iso = stopwords.load("function", "en").keys, stopwords.load("iso", "en").keys
    content = {"man", "men", "big", "small", "large", "top", "side", "front", "group", "two"}
    assert content <= iso  # the defect of the former default
    assert not content & function
    assert {"a", "an", "the", "on", "in", "of", "with", "is", "are", "and", "it"} <= function


def test_affixes_tagged_as_particles_are_no_function_words(tmp_path):
    rows = [("车", "PART", "SFN"), ("车", "PART", "SFN"), ("大", "PART", "PFA"),
            ("大", "PART", "PFA"), ("的", "PART", "DEC"), ("的", "PART", "DEC")]
    path = tmp_path / "zh.conllu"
    path.write_text("".join(f"{i}\t{w}\t{w}\t{u}\t{x}\t_\t0\troot\t_\t_\n"
                            for i, (w, u, x) in enumerate(rows, start=1)), encoding="utf-8")
    assert derive_function_words.function_words([str(path)], "zh")[0] == ["的"]
    assert set(derive_function_words.function_words([str(path)])[0]) == {"的", "大", "车"}


def test_every_list_names_its_treebank_three_languages_have_none_the_samples_cover_the_rest():
    assert stopwords.missing(languages.XM3600_LANGS) == ["mi", "quz", "sw"]
    assert sorted(SAMPLES) == sorted(set(languages.XM3600_LANGS) - {"mi", "quz", "sw"})
    for name in os.listdir(stopwords.FUNCTION_LISTS):
        with open(os.path.join(stopwords.FUNCTION_LISTS, name), encoding="utf-8") as f:
            head = f.read(600)
        assert "UniversalDependencies/UD_" in head and "rule:" in head, name
    sw = stopwords.load("function", "sw")
    assert sw.missing and not sw.keys and "every word kept" in sw.origin
    assert "虽 然" in stopwords.load("function", "zh").keys  # keys as bags.match joins them
    assert "の" in stopwords.load("function", "ja").keys


class _Vocabulary:
    """Stands in for `WordVectors` in `bags.BagMaker`: knows exactly the given keys."""

    def __init__(self, keys):
        self.keys = set(keys)
        self.max_key_tokens = max(len(k.split()) for k in self.keys)

    def __contains__(self, key):
        return key in self.keys


@pytest.mark.parametrize("lang", sorted(SAMPLES))
def test_every_list_removes_the_function_words_of_a_caption_keeping_the_rest(lang):
    words = SAMPLES[lang].split()
    function = [w.strip("[]") for w in words if w.startswith("[")]
    content = [w for w in words if not w.startswith("[")]
    segmented = lang in text.SEGMENTED_LANGS
    caption = ("" if segmented else " ").join(w.strip("[]") for w in words)
    key = {w: " ".join(text.normalize_batch([w], lang).split()[0]) for w in function + content}
    maker = bags.BagMaker(_Vocabulary(key.values()), lang,
                          stopwords.load(stopwords.DEFAULT, lang).keys)
    kept = [unit[0] for unit in maker.caption_bags([caption])[0]]
    assert sorted(kept) == sorted({key[w] for w in content}), lang
    assert not maker.oov.oov


def test_the_docs_state_the_english_list_size():
    en = stopwords.load("function", "en")
    with open(os.path.join(stopwords.FUNCTION_LISTS, "en.txt"), encoding="utf-8") as f:
        words = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    assert f"function words of en ({len(en.keys)}," in en.origin
    docs = os.path.join(os.path.dirname(__file__), "..", "..", "..", "docs", "beyond_cider.md")
    with open(docs, encoding="utf-8") as f:
        page = " ".join(f.read().split())
    assert f"English list has {len(words)} words ({len(en.keys)} once" in page


def test_the_docs_state_the_default_settings_line():
    docs = os.path.join(os.path.dirname(__file__), "..", "..", "..", "docs", "beyond_cider.md")
    with open(docs, encoding="utf-8") as f:
        page = " ".join(f.read().split())
    settings = corpus.Settings(vectors=("v",), labels=("l",)).describe()
    assert f"settings used (`({settings})`)" in page


def test_default_settings_keep_the_content_words(tmp_path):
    # English vectors of a few words (random, fixed) and one image labelled man and chair.
    words = ["man", "woman", "chair", "a", "on", "the", "sits"]
    path = write_vec(tmp_path / "wiki.en.vec", words,
                     np.random.default_rng(3).normal(size=(len(words), 8)))
    (tmp_path / "labels.jsonl").write_text(
        '{"image/key": "img1", "labels": ["Man", "Chair"]}\n', encoding="utf-8")
    folder, v = tmp_path, vectors.load_vectors(path, "en")
    settings = corpus.Settings(vectors=(f"{folder}/wiki.{{lang}}.vec",),
                               labels=(f"{folder}/labels.jsonl",), use_references=False)
    scorer = corpus.build_scorers({"en": ["img1"]}, {"en": [[]]}, settings)["en"]
    # The constructor's default is the settings' default.
    assert VifidelScorer([{"Man": 1, "Chair": 1}], "en", v).stopwords == scorer.stopwords
    assert scorer.stopwords == stopwords.load(stopwords.DEFAULT, "en").keys

    def score(caption):
        return float(scorer.score([caption]).per_image[0])
    assert score("a man on a chair") > score("a woman on a chair")
    # Content words exactly the labels: the caption scores as the labels themselves.
    assert score("a man on a chair") == pytest.approx(score("man chair"), abs=1e-12)
    assert score("man chair") == pytest.approx(1.0, abs=1e-6)
    # The stopwordsiso list drops "man": the caption is "chair" alone to it.
    iso = corpus.build_scorers({"en": ["img1"]}, {"en": [[]]},
                               corpus.Settings(**{**settings.__dict__, "stopwords": "iso"}))
    iso_score = lambda c: float(iso["en"].score([c]).per_image[0])  # noqa: E731
    assert iso_score("a man on a chair") == pytest.approx(iso_score("chair"), abs=1e-12)
    assert iso_score("a man on a chair") < 1 - 1e-3
