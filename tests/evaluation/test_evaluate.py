"""The checkpoint-evaluation tool (python -m evaluation.evaluate) and in-loop evaluators: its
CIDEr-D equals what training logged, its captions an independent decode, and a toy evaluator
registered by a table entry gets predictions and a report."""

import ast
import contextlib
import io
import json
import os
import pathlib
import re
import subprocess
import sys

import ml_collections
import numpy as np
import pytest

from data import images as image_lib
from data import prompts as prompt_lib
from data import tokenizer
from data.releases import coco35l as coco35l_release
from data.releases import xm3600 as xm3600_release
from evaluation import cider, evaluate
from evaluation.evaluators import caption_evaluator
from formats import eval_metrics
from formats import per_image as per_image_format
from formats import predictions as predictions_format
from formats import scores as scores_format
from model import decode
from tests import cli, tiny
from tests.formats.small_files import read_jsonl
from tests.training.saved_state import read_metrics
from tools import cider as cider_main
from tools import table8
from training import checkpointing
from training.metrics import Progress

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def tiny_run(two_step_run, tmp_path_factory):
    """(config file, run folder, config) of a 2-step tiny run with checkpoints and in-loop
    evaluations at steps 1 and 2: the test run's shared `two_step_run`, copied (the tool
    writes its default results folder into the run)."""
    root = tmp_path_factory.mktemp("eval_tool")
    config_path = tiny.write_config_file(root / "tiny_config.py", two_step_run.data_dir,
                                         **two_step_run.overrides)
    workdir = two_step_run.copy_to(root / "run")
    return config_path, workdir, two_step_run.config()


def _main(*args):
    return evaluate.main(["evaluation.evaluate", *args])


def _independent_set(data_dir, lang, vocab, config):
    """(keys, references, images, prompts) of one XM3600 language, read here image by image."""
    from tools.captioning.inputs import to_unit_range

    folder = str(data_dir / "xm3600")
    records = xm3600_release.read_captions(os.path.join(folder, "captions.jsonl"))
    keys, refs = xm3600_release.references(records, lang)
    size = config.model.image_size
    images = to_unit_range(np.stack([
        image_lib.read_pixels(xm3600_release.image_path(folder, k), size) for k in keys]))
    prompt = prompt_lib.tokenize_prompt(vocab, lang, "<2{lang}>", config.data.max_prompt_len)
    return keys, refs, images, np.tile(prompt[None], (len(keys), 1))


def _logged_eval(workdir, step):
    return next(r for r in read_metrics(workdir) if r["step"] == step and "eval/cider_d/avg" in r)


@pytest.fixture(scope="module")
def default_results(tiny_run):
    """(folder, printed text) of the tool run with its defaults: the latest step, into the run's
    eval_step2, run once for the module's tests that read it."""
    config_path, workdir, _ = tiny_run
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        _main("--config", config_path, "--workdir", workdir, "--langs", "config")
    return os.path.join(workdir, "eval_step2"), printed.getvalue()


@pytest.fixture(scope="module")
def step_results(tiny_run, default_results, tmp_path_factory):
    """{step: results folder} of the tool run for the latest step (by default), step 1 and the
    best checkpoint, and the text the last two runs printed."""
    config_path, workdir, _ = tiny_run
    root = tmp_path_factory.mktemp("steps")
    explicit = str(root / "step1")
    best = str(root / "best")  # checkpoints_best/'s, as captioning takes it.
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        _main("--config", config_path, "--workdir", workdir, "--step", "1", "--langs", "en,zh",
              "--out", explicit)
        _main("--config", config_path, "--workdir", workdir, "--step", "best", "--langs",
              "en,zh", "--out", best)
    (best_step,) = checkpointing.steps(workdir, best=True)
    folders = ((default_results[0], 2), (explicit, 1), (best, best_step))
    return folders, default_results[1] + printed.getvalue()


def test_tool_prints_an_eta(step_results):
    _, printed = step_results
    assert "ETA" in printed


def test_tool_reproduces_the_in_loop_scores_of_each_checkpoint(tiny_run, step_results):
    _, workdir, _ = tiny_run
    folders, _ = step_results
    for folder, step in folders:
        with open(os.path.join(folder, "scores.json"), encoding="utf-8") as f:
            summary = json.load(f)
        logged = _logged_eval(workdir, step)
        assert summary["step"] == step
        assert sorted(summary["scores"]) == ["en", "zh"]
        for lang, score in summary["scores"].items():
            # The same evaluator code on the same parameters: equal bit for bit.
            assert score == logged[f"eval/cider_d/{lang}"]
        _, metrics = eval_metrics.read(os.path.join(folder, "metrics.json"))
        xm3600 = {k: v for k, v in metrics.items() if k.startswith("eval/cider_d/")}
        assert xm3600 == {k: v for k, v in logged.items() if k.startswith("eval/cider_d/")}
        assert summary["num_images"] == {"en": 8, "zh": 8}
        per_image = read_jsonl(os.path.join(folder, "per_image.jsonl"))
        for lang in ("en", "zh"):
            values = [r["score"] for r in per_image if r["lang"] == lang]
            assert np.mean(values) == pytest.approx(summary["scores"][lang])
        for name in ("scores.csv", "table.md", "bars.png"):
            assert os.path.getsize(os.path.join(folder, name)) > 0


def test_tool_scores_coco_dev(tiny_demo, default_results):
    # The COCO-dev column scores the translated dev references.
    out, _ = default_results
    with open(os.path.join(out, "scores.json"), encoding="utf-8") as f:
        summary = json.load(f)
    examples, _ = coco35l_release.read_split(str(tiny_demo / "coco35l"), "dev", ["en", "zh"])
    for lang in ("en", "zh"):
        rows = read_jsonl(os.path.join(out, f"predictions_coco_dev_{lang}.jsonl"))
        assert [r["image/key"] for r in rows] == [str(e.cocoid) for e in examples[lang]]
        refs = [list(e.captions) for e in examples[lang]]
        expected = cider.CiderScorer(refs, lang).score([r["caption"] for r in rows]).corpus
        assert summary["coco_dev_scores"][lang] == pytest.approx(expected, rel=1e-9, abs=1e-12)
    with open(os.path.join(out, "table.md"), encoding="utf-8") as f:
        assert "COCO-dev" in f.read()


@pytest.fixture(scope="module")
def restored(tiny_run):
    """(vocabulary, model, parameters) of the run's latest checkpoint, restored here."""
    _, workdir, config = tiny_run
    vocab = tokenizer.get_vocabulary(config.vocab.path)
    model, params, step = tiny.restore_whole_state_params(config, workdir, vocab.vocab_size)
    assert step == 2
    return vocab, model, params


def test_greedy_captions_equal_an_independent_decode(tiny_run, tiny_demo, default_results,
                                                     restored):
    _, _, config = tiny_run
    out, _ = default_results
    vocab, model, params = restored
    with open(os.path.join(out, "scores.json"), encoding="utf-8") as f:
        scores = json.load(f)["scores"]
    for lang in ("en", "zh"):
        # Images read one language at a time, all of them in one batch.
        keys, refs, images, prompts = _independent_set(tiny_demo, lang, vocab, config)
        tokens = decode.greedy(model, params, images, prompts,
                               max_len=config.evals.xm3600.max_decode_len)
        expected = tokenizer.detokenize(vocab, tokens)
        rows = read_jsonl(os.path.join(out, f"predictions_{lang}.jsonl"))
        assert [r["image/key"] for r in rows] == keys
        assert {r["lang"] for r in rows} == {lang}
        assert [r["caption"] for r in rows] == expected
        rescored = cider.CiderScorer(refs, lang).score(expected).corpus
        assert scores[lang] == pytest.approx(rescored, rel=1e-9, abs=1e-12)


def test_beam_captions_equal_an_independent_beam_search(tiny_run, tiny_demo, restored, tmp_path):
    config_path, workdir, config = tiny_run
    vocab, model, params = restored
    beam = str(tmp_path / "beam")
    _main("--config", config_path, "--workdir", workdir, "--langs", "en", "--decode", "beam",
          "--beam_size", "2", "--out", beam)
    _, _, images, prompts = _independent_set(tiny_demo, "en", vocab, config)
    tokens, _ = decode.beam_search(model, params, images, prompts,
                                   max_len=config.evals.xm3600.max_decode_len, beam_size=2,
                                   alpha=0.6)
    rows = read_jsonl(os.path.join(beam, "predictions_en.jsonl"))
    assert [r["caption"] for r in rows] == tokenizer.detokenize(vocab, tokens)
    with open(os.path.join(beam, "scores.json"), encoding="utf-8") as f:
        assert json.load(f)["decoding"] == {"method": "beam", "beam_size": 2, "alpha": 0.6}
    with open(os.path.join(beam, "table.md"), encoding="utf-8") as f:
        assert "Captions by beam search (2 beams, length penalty alpha 0.6)." in f.read()


class CaptionLength(caption_evaluator.CaptionEvaluator):
    """A toy evaluator, as a new one would be written: a caption's length in characters."""
    metric_prefix = "eval/length/"
    outputs_name = "length"
    metric = "characters"
    title = "Caption length on XM3600"

    def make_scorers(self, langs):
        def score(captions):
            lengths = np.array([len(c) for c in captions], dtype=float)
            return float(lengths.mean()), lengths
        return [score for _ in langs]


def test_a_new_evaluator_gets_every_output_file_from_the_tool(tiny_run, tmp_path):
    _, workdir, config = tiny_run
    config = ml_collections.ConfigDict(config.to_dict())  # Named by its module path:
    config.evals.length = dict(config.evals.xm3600.to_dict(), type=f"{__name__}:CaptionLength")
    out = tmp_path / "results"
    evaluate.evaluate_checkpoint(config, workdir, names=["xm3600", "length"], langs="config",
                                 out=str(out))
    step, metrics = eval_metrics.read(out / "metrics.json")
    length = scores_format.read(out / "scores_length.json")
    assert step == 2 and length["metric"] == "characters" and length["step"] == 2
    for lang in ("en", "zh"):
        captions = predictions_format.read_language(out / f"predictions_length_{lang}.jsonl", lang)
        # The same images and decoding as the XM3600 evaluator: the same captions.
        assert captions == predictions_format.read_language(out / f"predictions_{lang}.jsonl", lang)
        per_caption = per_image_format.read(out / "per_image_length.jsonl")[lang]
        assert per_caption == {key: len(caption) for key, caption in captions.items()}
        mean = np.mean([len(c) for c in captions.values()])
        assert metrics[f"eval/length/{lang}"] == length["scores"][lang] == pytest.approx(mean)
        assert length["num_images"][lang] == len(captions) == 8
    table = (out / "table_length.md").read_text()
    assert table.startswith("# Caption length on XM3600: run, checkpoint step 2")
    assert f"| zh | {length['scores']['zh']:.3f} | 8 |" in table
    # XM3600's own report is untouched by the newcomer: no COCO-dev column without COCO-dev.
    assert "coco_dev_scores" not in scores_format.read(out / "scores.json")


class LengthUnderItsOwnMetric(CaptionLength):
    """A copy of CaptionLength that renames its metrics but keeps its files' name."""
    metric_prefix = "eval/length_again/"


def test_two_evaluators_writing_the_same_files_are_refused_before_any_is_written(tiny_run,
                                                                                 tmp_path):
    _, workdir, config = tiny_run
    config = ml_collections.ConfigDict(config.to_dict())
    for name, kind in (("length", "CaptionLength"), ("again", "LengthUnderItsOwnMetric")):
        config.evals[name] = dict(config.evals.xm3600.to_dict(), type=f"{__name__}:{kind}")
    out = tmp_path / "results"
    with pytest.raises(evaluate.UsageError, match=r"^config\.evals\.length and config\.evals\."
                       r"again write the same files; evaluate them one at a time"):
        evaluate.evaluate_checkpoint(config, workdir, names=["length", "again"], langs="config",
                                     out=str(out))
    assert not out.exists()


def test_the_tool_names_no_evaluator_class():
    with open(evaluate.__file__, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                and node.module == "evaluation.evaluators" for alias in node.names}
    assert imported == {"caption_evaluator"}
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    assert not names & {"isinstance", "type", "Xm3600Cider", "CocoDevCider", "Xm3600Vifidel"}


def _written(folder):
    """{file name: bytes} of a results folder, but the report naming the config's file."""
    return {name: (folder / name).read_bytes() for name in sorted(os.listdir(folder))
            if name != "scores.json"}


def test_without_config_the_runs_config_json_gives_the_same_results(tiny_run, tmp_path):
    config_path, workdir, _ = tiny_run
    _main("--config", config_path, "--workdir", workdir, "--evals", "xm3600", "--out",
          str(tmp_path / "with_config"))
    _main("--workdir", workdir, "--evals", "xm3600", "--out", str(tmp_path / "without"))
    assert _written(tmp_path / "without") == _written(tmp_path / "with_config")


def test_without_config_an_override_of_an_evaluation_field_applies(tiny_run, tmp_path):
    _, workdir, _ = tiny_run
    _main("--workdir", workdir, "--evals", "xm3600", "--langs", "config",
          "--config.evals.xm3600.langs=es,hi", "--out", str(tmp_path / "out"))
    assert list(scores_format.read(tmp_path / "out" / "scores.json")["scores"]) == ["es", "hi"]


def test_another_vocabulary_than_the_runs_is_refused_naming_vocab_path(tiny_run, tmp_path,
                                                                       capsys):
    config_path, workdir, config = tiny_run
    other = tmp_path / "other.model"
    other.write_bytes(open(config.vocab.path, "rb").read())
    err = cli.error_lines(capsys, evaluate.main, [
        "evaluation.evaluate", "--config", config_path, f"--config.vocab.path={other}",
        "--workdir", workdir, "--out", str(tmp_path / "out")])
    assert len(err) == 1 and err[0].startswith("error: config.vocab.path: "), err
    assert not (tmp_path / "out").exists()


def test_another_model_than_the_runs_is_refused_naming_the_field(tiny_run, tmp_path, capsys):
    _, workdir, _ = tiny_run
    err = cli.error_lines(capsys, evaluate.main, [
        "evaluation.evaluate", "--workdir", workdir, "--config.model.t5.emb_dim=64"])
    assert len(err) == 1 and err[0].startswith("error: config.model.t5.emb_dim: 32 -> 64"), err


def test_without_langs_every_language_the_data_has_is_evaluated(tiny_run, tmp_path, capsys):
    config_path, workdir, _ = tiny_run
    out = tmp_path / "all"
    _main("--config", config_path, "--workdir", workdir, "--out", str(out))
    printed = capsys.readouterr().out
    assert ("note: xm3600: its data has 4 of its 36 languages (en, es, hi, zh); the others are "
            "left out") in printed
    summary = scores_format.read(out / "scores.json")
    assert list(summary["scores"]) == ["en", "es", "hi", "zh"]
    assert list(summary["coco_dev_scores"]) == ["en", "es", "hi", "zh"]
    table = (out / "table.md").read_text()
    assert "Checkpoint step 2. Captions by greedy decoding." in table
    assert "no 36-language average; missing: " not in table  # More than ten: one line says so.
    assert "no 36-language average; only 4 language(s) scored" in table


def test_any_captioners_files_score_as_the_tool_scored_the_same_captions(
        tiny_demo, default_results, tmp_path, capsys):
    out = pathlib.Path(default_results[0])
    tool = scores_format.read(out / "scores.json")
    tool_per_image = per_image_format.read(out / "per_image.jsonl")
    captions = {lang: predictions_format.read_language(out / f"predictions_{lang}.jsonl", lang)
                for lang in tool["scores"]}
    # The lines tools.captioning --format jsonl writes: through predictions.line, with its own
    # fields; and a pycocoevalcap results list per language, image_id the image's file name.
    jsonl = tmp_path / "p.jsonl"
    jsonl.write_text("".join(predictions_format.line(key, lang, caption,
                                                     image=f"xm3600/images/{key}.jpg",
                                                     log_prob=-2.5)
                             for lang, by_key in captions.items()
                             for key, caption in by_key.items()), encoding="utf-8")
    references = str(tiny_demo / "xm3600" / "captions.jsonl")

    def cider_json(predictions, *args):
        assert cider_main.main(["--references", references, "--predictions", str(predictions),
                                "--json", *args]) == 0
        return json.loads(capsys.readouterr().out)

    assert cider_json(jsonl)["scores"] == tool["scores"]
    for lang, by_key in captions.items():
        results = tmp_path / f"results_{lang}.json"
        results.write_text(json.dumps([{"image_id": f"{key}.jpg", "caption": caption}
                                       for key, caption in by_key.items()]))
        assert cider_json(results, "--langs", lang)["scores"] == {lang: tool["scores"][lang]}
    # Beside the paper's baselines, as the tool's report: the same scores and per-image ones.
    table8.main([str(tmp_path / "mine"), "--predictions", str(jsonl),
                     "--references", references])
    assert scores_format.read(tmp_path / "mine" / "scores.json")["scores"] == tool["scores"]
    assert per_image_format.read(tmp_path / "mine" / "per_image.jsonl") == tool_per_image


@pytest.mark.parametrize("args,message", [
    (["--step", "7"], r"no checkpoint of step 7 in .*; available steps: 1, 2"),
    (["--langs", "en,xx"], r"unknown language 'xx'; known: ar, bn, "),
    (["--evals", "xm3600", "--langs", "ar,en"], r"has no captions in ar; it has en, es, hi, zh"),
    (["--evals", "xm3600,vifidel"], r"--evals: no evaluator 'vifidel' in config.evals; it has "
                                    r"coco_dev, xm3600"),
    (["--decode", "sample"], r"--decode"),
])
def test_bad_input_is_a_clear_error(tiny_run, capsys, args, message):
    config_path, workdir, _ = tiny_run
    err = cli.error_lines(capsys, evaluate.main, ["evaluation.evaluate", "--config", config_path,
                                                  "--workdir", workdir, *args])
    assert err[-1].startswith("error: ")
    assert re.search(message, err[-1]), err[-1]


def test_workdir_without_checkpoint_exits_2_without_traceback(tiny_run, tmp_path, capsys):
    # In this process (the command as its own process: test_bad_config_override_is_one_error_
    # line): any exception but the exit with status 2 would fail the test with its traceback.
    config_path, _, _ = tiny_run
    empty = tmp_path / "empty"
    empty.mkdir()
    err = "\n".join(cli.error_lines(capsys, evaluate.main, ["evaluation.evaluate", "--config",
                                                            config_path, "--workdir", str(empty)]))
    assert "Traceback" not in err
    assert f"error: no checkpoint in {empty}/checkpoints" in err


def test_progress_reports_eta_after_the_first_batch():
    lines = []

    class Stream:
        def write(self, text):
            lines.append(text)

        def flush(self):
            pass

    progress = Progress(total_images=40, num_langs=2, what="XM3600", stream=Stream(), interval=0.0)
    progress("en", 10, 20)
    progress("en", 20, 20)
    progress("zh", 10, 20)
    text = "".join(lines)
    assert "XM3600 [en 1/2] 10/20 images | first batch" in text
    assert "XM3600 [zh 2/2] 10/20 images" in text
    assert "ETA ?" in text.splitlines()[0] and "ETA" in text.splitlines()[-1]


def test_help_prints_the_usage_with_its_flags(capsys):
    assert evaluate.main(["evaluation.evaluate", "--help"]) == 0
    out = capsys.readouterr().out
    assert "python -m evaluation.evaluate --workdir" in out
    assert "--workdir" in out and "--evals" in out


@pytest.mark.parametrize("args,message", [
    (["--config.total_step=3"],
     r"--config.total_step=3: the config has no field 'total_step' \(did you mean "
     r"total_steps\?\)"),
])
def test_bad_config_override_is_one_error_line(tiny_run, tmp_path, args, message):
    config_path, workdir, _ = tiny_run
    result = subprocess.run(
        [sys.executable, "-m", "evaluation.evaluate", "--config", config_path, "--workdir", workdir,
         "--out", str(tmp_path / "out"), *args],
        cwd=REPO, capture_output=True, text=True, timeout=300,
        env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and re.search(message, lines[0]), result.stderr
    assert not (tmp_path / "out").exists()
