"""What the model reads and writes as ids: the LangId prompt, and the caption targets.

The LangId prompt is the only text the encoder sees (after the image vector); it tells the
decoder which language to write. Its default template "<2{lang}>" (e.g. "<2hi>") is the
target-language tag convention of multilingual NMT (Johnson et al., 2017), which mT5's
vocabulary splits into a few ordinary pieces; any template with "{lang}" can be configured
instead. The training input, the evaluators and the captioning tools all make their
prompts here.
"""

import numpy as np

from data import tokenizer

DEFAULT_PROMPT_TEMPLATE = "<2{lang}>"


def prompt_text(lang, template=DEFAULT_PROMPT_TEMPLATE):
    """The LangId prompt for `lang`, e.g. "<2es>" with the default template.

    Args:
        lang: language code.
        template: a format string with a "{lang}" field.
    """
    if "{lang}" not in template:
        raise ValueError(f"prompt template {template!r} has no '{{lang}}' field")
    return template.format(lang=lang)


def tokenize_prompt(vocab, lang, template, max_len):
    """Prompt ids followed by EOS and 0-padding: int32 [max_len].

    Args:
        vocab: anything with `encode(text) -> ids` (a `tokenizer.Vocabulary`).

    Raises:
        ValueError: the prompt does not fit in `max_len` (truncating it would
            cut the language id, so this is a config error).
    """
    ids = list(vocab.encode(prompt_text(lang, template))) + [tokenizer.EOS_ID]
    if len(ids) > max_len:
        raise ValueError(
            f"prompt {prompt_text(lang, template)!r} is {len(ids)} tokens with EOS, more "
            f"than max_prompt_len={max_len}")
    out = np.zeros([max_len], np.int32)
    out[:len(ids)] = ids
    return out


def tokenize_targets(vocab, texts, max_len):
    """Caption ids, EOS and 0-padding: int32 [len(texts), max_len].

    Long captions are truncated to max_len - 1 ids so that EOS always fits.
    """
    out = np.zeros([len(texts), max_len], np.int32)
    for i, text in enumerate(texts):
        ids = list(vocab.encode(text))[:max_len - 1] + [tokenizer.EOS_ID]
        out[i, :len(ids)] = ids
    return out
