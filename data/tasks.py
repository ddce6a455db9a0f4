"""seqio tasks and mixtures over the TFDS builds of COCO-35L, CC3M-35L and XM3600.

One task per dataset and language, named `<dataset>_<lang>` (e.g. `coco35l_hi`):

    inputs   the LangId prompt ("<2hi>" with the default template; configurable)
             tokenized with the configured SentencePiece vocabulary, plus EOS
    targets  one reference caption, tokenized, plus EOS: for training a random
             reference per example and pass (seeded by seqio), for evaluation
             the first one; `captions` keeps every reference for scoring
    image    float32 [H, W, 3] in [-1, 1] (decoded and resized to image_size)

Splits: coco35l/cc3m35l tasks have "train" and "validation" (the caption
tables `train_<lang>` and `dev_<lang>`, whose records point into the shared
images, data/corpus.py); xm3600 tasks have "test". The builds are ArrayRecord
files, which tf.data cannot read directly, so the tasks read them through
TFDS's random-access data sources (`tfds.builder_from_directory`).

Mixtures (`register_mixture`) combine the tasks of one dataset over languages
with rates "uniform" (1 each), "proportional" (the number of training
examples) or an explicit {lang: rate} dict.
"""

import functools

import numpy as np

from data import build as build_lib
from data import corpus, languages, pipeline, tokenizer

TASK_DATASETS = ("coco35l", "cc3m35l", "xm3600")
_SPLITS = {"coco35l": {"train": "train_{lang}", "validation": "dev_{lang}"},
           "cc3m35l": {"train": "train_{lang}", "validation": "dev_{lang}"},
           "xm3600": {"test": "{lang}"}}


def task_name(dataset, lang):
    """The seqio task name of one dataset and language, e.g. "coco35l_hi"."""
    return f"{dataset}_{lang}"


def _example_generator(data_source, images, shuffle, seed):
    import tensorflow_datasets as tfds  # noqa: F401  (the data source needs it loaded)

    order = np.arange(len(data_source))
    if shuffle:
        np.random.default_rng(seed).shuffle(order)
    for i in order:
        record = data_source[int(i)]
        image = record["image"] if images is None else images[int(record["image_index"])]["image"]
        yield {"image": image, "captions": list(record["captions"])}


def _dataset_fn(builders, split_template, lang, split, shuffle_files, seed=None):
    import tensorflow as tf
    import tensorflow_datasets as tfds

    name = split_template[split].format(lang=lang)
    skip = {"image": tfds.decode.SkipDecoding()}
    if "images" in builders:  # A caption table: its records point into the split's images.
        source = builders["captions"].as_data_source(name)
        images = builders["images"].as_data_source(name.split("_")[0], decoders=skip)
    else:
        source, images = builders["xm3600"].as_data_source(name, decoders=skip), None
    signature = {"image": tf.TensorSpec([], tf.string),
                 "captions": tf.TensorSpec([None], tf.string)}
    return tf.data.Dataset.from_generator(
        functools.partial(_example_generator, source, images, shuffle_files, seed),
        output_signature=signature)


def _preprocess_image(image_size):
    import seqio
    import tensorflow as tf

    @seqio.map_over_dataset
    def fn(example):
        image = tf.io.decode_jpeg(example["image"], channels=3)
        image = tf.image.resize(image, [image_size, image_size], antialias=True)
        return dict(example, image=image / 127.5 - 1.0)  # [H, W, 3] in [-1, 1]
    return fn


def _add_prompt_and_target(prompt, sample):
    import seqio
    import tensorflow as tf

    @seqio.map_over_dataset(num_seeds=1)
    def fn(example, seed):
        captions = example["captions"]  # [num_refs]
        if sample:
            index = tf.random.stateless_uniform([], seed, 0, tf.shape(captions)[0], tf.int32)
        else:
            index = 0
        return dict(example, inputs=tf.constant(prompt), targets=captions[index])
    return fn


def _builders(dataset, data_dir, config):
    """The TFDS builders a task reads: {"xm3600": ...} or {"images": ..., "captions": ...}."""
    import tensorflow_datasets as tfds

    command = f"python -m data.build {dataset} --manual_dir ... --data_dir {data_dir}"
    if dataset == "xm3600":
        builder = build_lib.get_builder(dataset, data_dir=data_dir, config=config)
        if not builder.is_prepared():
            raise FileNotFoundError(f"{dataset}/{config} is not built in {data_dir}; run "
                                    f"{command}")
        return {"xm3600": builder}
    folders = {"images": corpus.images_dir(data_dir, dataset),
               "captions": corpus.captions_dir(data_dir, dataset)}
    for folder in folders.values():
        if corpus.read_splits(folder) is None:
            raise FileNotFoundError(f"{dataset} is not built in {data_dir} (no {folder}); run "
                                    f"{command}")
    return {kind: tfds.builder_from_directory(folder) for kind, folder in folders.items()}


def register_tasks(dataset, *, tfds_data_dir, vocab_path, langs, tfds_config=None,
                   prompt_template=pipeline.DEFAULT_PROMPT_TEMPLATE, image_size=224):
    """Registers (or re-registers) one seqio task per language; returns their names.

    Args:
        dataset: one of TASK_DATASETS; its build must exist in `tfds_data_dir`
            (python -m data.build, or data.demo for the demo).
        tfds_data_dir: the data directory of the builds.
        vocab_path: SentencePiece model of inputs and targets.
        langs: language codes.
        tfds_config: xm3600's builder config ("all" | "core"); default: the
            smallest holding `langs`.
        prompt_template: LangId prompt template (see data/pipeline.prompt_text).
        image_size: side of the square output images.
    """
    import seqio

    if dataset not in TASK_DATASETS:
        raise ValueError(f"unknown task dataset {dataset!r}; known: {', '.join(TASK_DATASETS)}")
    known = languages.XM3600_LANGS if dataset == "xm3600" else languages.TRAIN_35L_LANGS
    langs = languages.check_langs(langs, known=known, what=f"{dataset} language")
    builders = _builders(dataset, tfds_data_dir, tfds_config or build_lib.config_for(langs))
    builder = builders.get("captions", builders.get("xm3600"))
    vocab = tokenizer.seqio_vocabulary(vocab_path)
    features = {"inputs": seqio.Feature(vocab, add_eos=True),
                "targets": seqio.Feature(vocab, add_eos=True)}
    split_template = _SPLITS[dataset]
    names = []
    for lang in langs:
        counts = {}
        for split, template in split_template.items():
            if template.format(lang=lang) not in builder.info.splits:
                raise ValueError(f"{builder.data_dir} has no split {template.format(lang=lang)!r}")
            counts[split] = builder.info.splits[template.format(lang=lang)].num_examples
        source = seqio.FunctionDataSource(
            functools.partial(_dataset_fn, builders, split_template, lang),
            splits=list(split_template), num_input_examples=counts)
        name = task_name(dataset, lang)
        seqio.TaskRegistry.remove(name)
        seqio.TaskRegistry.add(name, source=source, output_features=features, preprocessors=[
            _preprocess_image(image_size),
            _add_prompt_and_target(pipeline.prompt_text(lang, prompt_template),
                                   sample=dataset != "xm3600"),
            seqio.preprocessors.tokenize,
            seqio.preprocessors.append_eos_after_trim,
        ])
        names.append(name)
    return names


def register_mixture(name, dataset, langs, rates="uniform"):
    """Registers (or re-registers) a mixture of the tasks of `dataset` over `langs`.

    Args:
        name: the mixture's name.
        dataset: the dataset whose `<dataset>_<lang>` tasks are registered.
        langs: language codes.
        rates: "uniform", "proportional" (to each task's training examples) or
            a dict {lang: rate}.

    Returns:
        The seqio.Mixture.
    """
    import seqio

    if isinstance(rates, str):
        if rates == "uniform":
            tasks = [(task_name(dataset, lang), 1.0) for lang in langs]
        elif rates == "proportional":
            tasks = [(task_name(dataset, lang), seqio.mixing_rate_num_examples)
                     for lang in langs]
        else:
            raise ValueError(f"unknown mixture rates {rates!r}; known: uniform, proportional, "
                             f"or a {{lang: rate}} dict")
    else:
        missing = [lang for lang in langs if lang not in rates]
        if missing:
            raise ValueError(f"mixture rates lack languages {', '.join(missing)}")
        tasks = [(task_name(dataset, lang), float(rates[lang])) for lang in langs]
    seqio.MixtureRegistry.remove(name)
    return seqio.MixtureRegistry.add(name, tasks)
