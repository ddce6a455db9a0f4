"""Each bad decoding setting is refused naming it as its user wrote it, by the API (`Decoding`),
the command line (one `error:` line, --out untouched), the page (400) and the export (no file)."""

import io

import pytest

import errors
from model import decode
from tests.cli import error_line
from tools.captioning import Decoding, export, web
from tools.captioning import __main__ as cli

# (decoding, setting, the value as typed, what the message says of it)
BAD = [
    ("beam", "alpha", "nan", "length-penalty alpha must be a finite number >= 0, got nan"),
    ("beam", "alpha", "-50", "length-penalty alpha must be a finite number >= 0, got -50"),
    ("beam", "alpha", "50", "length-penalty alpha must be at most 10, got 50"),
    ("beam", "beam_size", "0", "beam size must be an integer >= 1, got 0"),
    ("sample", "temperature", "nan", "temperature must be a finite number >= 0, got nan"),
    ("sample", "temperature", "inf", "temperature must be a finite number >= 0, got inf"),
    ("sample", "temperature", "-1", "temperature must be a finite number >= 0, got -1"),
    ("sample", "temperature", "0.001", "temperature must be 0 (argmax) or at least 0.01, got "
                                       "0.001"),
    ("sample", "temperature", "1000", "temperature must be at most 100, got 1000"),
    ("sample", "top_k", "-1", "top-k must be an integer >= 0, got -1"),
    ("sample", "seed", "-1", "seed must be an integer >= 0, got -1"),
    ("sample", "seed", "4294967296", "seed must be at most 4294967295, got 4294967296"),
    ("greedy", "beam_size", "4", "applies to beam decoding only, not to greedy"),
    ("greedy", "temperature", "0.5", "applies to sample decoding only, not to greedy"),
    ("beam", "seed", "3", "applies to sample decoding only, not to beam"),
]
INTEGERS = ("beam_size", "top_k", "seed")
IDS = [f"{method}-{setting}={value}" for method, setting, value, _ in BAD]


def _value(setting, text):
    return int(text) if setting in INTEGERS else float(text)


def _message(setting, message):
    """The message as the value parsed prints in it: a float's "-50" is "-50.0"."""
    head, got, value = message.rpartition(", got ")
    if not got or setting in INTEGERS:
        return message
    return f"{head}, got {float(value)!r}"


@pytest.mark.parametrize("method, setting, text, message", BAD, ids=IDS)
def test_the_api_refuses_each_bad_value(method, setting, text, message):
    with pytest.raises(decode.DecodingError) as info:
        Decoding(method, **{setting: _value(setting, text)})
    assert str(info.value) == f"{setting}: {_message(setting, message)}"
    assert info.value.setting == setting and isinstance(info.value, errors.InputError)


@pytest.mark.parametrize("kwargs, message", [
    (dict(method="beam", beam_size=4.5), "beam_size: beam size must be an integer >= 1, got 4.5"),
    (dict(method="beam", beam_size=4.0), "beam_size: beam size must be an integer >= 1, got 4.0"),
    (dict(method="beam", beam_size=True), "beam_size: beam size must be an integer >= 1, got "
                                          "True"),
    (dict(method="sample", top_k="3"), "top_k: top-k must be an integer >= 0, got '3'"),
    (dict(method="beam", alpha="0.6"), "alpha: length-penalty alpha must be a finite number "
                                       ">= 0, got '0.6'"),
    (dict(method="nucleus"), "decode: unknown decoding 'nucleus'; known: greedy, beam, sample"),
])
def test_the_api_wants_numbers_of_the_right_type(kwargs, message):
    with pytest.raises(decode.DecodingError) as info:
        Decoding(**kwargs)
    assert str(info.value) == message


def test_good_settings_get_their_defaults():
    assert Decoding("beam") == Decoding("beam", beam_size=4, alpha=0.6)
    assert isinstance(Decoding("beam", alpha=0).alpha, float)
    sample = Decoding("sample", temperature=0, top_k=3, seed=2**32 - 1)
    assert sample.as_dict() == {"method": "sample", "temperature": 0.0, "top_k": 3,
                                "seed": 2**32 - 1}
    assert Decoding().as_dict() == {"method": "greedy"}


@pytest.mark.parametrize("method, setting, text, message", BAD, ids=IDS)
def test_the_command_line_refuses_each_bad_value(caption_run, demo_images, tmp_path, capsys,
                                                method, setting, text, message):
    out = tmp_path / "kept.jsonl"
    out.write_text("earlier\n")
    assert error_line(capsys, cli.main, [demo_images[0], "--workdir", caption_run, "--decode",
                                         method, f"--{setting}", text, "--out", str(out)]) == (
        f"error: --{setting}: {_message(setting, message)}\n")
    assert out.read_text() == "earlier\n"


@pytest.mark.parametrize("args, message", [
    (["--max_len", "0"], "--max_len must be >= 1, got 0"),
    (["--max_len", "100000"], "max_len 100000 is longer than the run was trained or evaluated "
                              "for (at most 16: its data.max_target_len and evals' "
                              "max_decode_len)"),
    (["--decode", "beam", "--beam_size", "4.5"], "argument --beam_size: invalid int value: "
                                                 "'4.5'"),
    (["--decode", "sample", "--top_k", "5000"],
     "--top_k: top-k 5000 exceeds the model's 768 logits"),
])
def test_the_command_line_refuses_the_other_bad_values(caption_run, demo_images, capsys, args,
                                                       message):
    assert message in error_line(capsys, cli.main,
                                 [demo_images[0], "--workdir", caption_run, *args])


def test_the_api_refuses_max_len_0_or_longer_than_trained(caption_run):
    with pytest.raises(errors.InputError, match=r"max_len must be an integer >= 1, got 0"):
        cli.Captioner.from_run(caption_run, max_len=0)
    with pytest.raises(errors.InputError, match=r"max_len 17 is longer than the run was "
                                                r"trained or evaluated for \(at most 16"):
        cli.Captioner.from_run(caption_run, max_len=17)


@pytest.fixture(scope="module")
def client(captioner):
    return web.create_app(captioner).test_client()


@pytest.mark.parametrize("method, setting, text, message", BAD, ids=IDS)
def test_the_page_refuses_each_bad_value(client, demo_images, method, setting, text, message):
    with open(demo_images[0], "rb") as f:
        data = {"image": (io.BytesIO(f.read()), "photo.jpg"), "langs": "en", "decode": method,
                setting: text}
    answer = client.post("/caption", data=data, content_type="multipart/form-data")
    assert answer.status_code == 400
    assert answer.get_json() == {"error": f"{setting}: {_message(setting, message)}"}


def test_the_page_wants_integers(client, demo_images):
    with open(demo_images[0], "rb") as f:
        data = {"image": (io.BytesIO(f.read()), "photo.jpg"), "langs": "en", "decode": "beam",
                "beam_size": "4.5"}
    answer = client.post("/caption", data=data, content_type="multipart/form-data")
    assert answer.get_json() == {"error": "beam_size: expected an integer, got '4.5'"}


EXPORT_FLAGS = {"beam": ("beam_size", "alpha"), "sample": ("temperature", "top_k")}


@pytest.mark.parametrize("method, setting, text, message",
                         [case for case in BAD if case[1] in EXPORT_FLAGS.get(case[0], ())],
                         ids=[i for i, case in zip(IDS, BAD, strict=True)
                              if case[1] in EXPORT_FLAGS.get(case[0], ())])
def test_the_export_refuses_each_bad_value(caption_run, tmp_path, capsys, method, setting,
                                           text, message):
    out = tmp_path / "model.npz"
    assert error_line(capsys, export.main, ["--workdir", caption_run, "--out", str(out),
                                            f"--{setting}", text]) == (
        f"error: --{setting}: {_message(setting, message)}\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("max_len, message", [
    ("0", "--max_len must be >= 1, got 0"),
    ("100000", "max_len 100000 is longer than the run was trained or evaluated for (at most 16"),
])
def test_the_export_refuses_max_len_0_or_longer_than_trained(caption_run, tmp_path, capsys,
                                                             max_len, message):
    assert message in error_line(capsys, export.main, ["--workdir", caption_run, "--out",
                                                       str(tmp_path / "m.npz"), "--max_len",
                                                       max_len])
    assert list(tmp_path.iterdir()) == []
