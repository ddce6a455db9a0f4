"""The LangId prompt (the only text the encoder sees; it tells the decoder which language to
write) and the caption targets, as ids, for the training input, the evaluators and captioning.
The default template "<2{lang}>" is multilingual NMT's target-language tag (Johnson et al.,
2017); any template with "{lang}" can be configured.
"""

import numpy as np

from data import tokenizer

DEFAULT_PROMPT_TEMPLATE = "<2{lang}>"


def prompt_text(lang, template=DEFAULT_PROMPT_TEMPLATE):
    """The LangId prompt for `lang` with `template` (a format string with "{lang}")."""
    if "{lang}" not in template:
        raise ValueError(f"prompt template {template!r} has no '{{lang}}' field")
    return template.format(lang=lang)


def tokenize_prompt(vocab, lang, template, max_len):
    """Prompt ids, EOS and 0-padding: int32 [max_len]; ValueError when the prompt does not
    fit (truncating would cut the language id)."""
    ids = list(vocab.encode(prompt_text(lang, template))) + [tokenizer.EOS_ID]
    if len(ids) > max_len:
        raise ValueError(
            f"prompt {prompt_text(lang, template)!r} is {len(ids)} tokens with EOS, more "
            f"than max_prompt_len={max_len}")
    return np.pad(np.asarray(ids, np.int32), (0, max_len - len(ids)))


def tokenize_targets(vocab, texts, max_len):
    """Caption ids, EOS and 0-padding: int32 [len(texts), max_len] (long captions cut so that
    EOS fits)."""
    out = np.zeros([len(texts), max_len], np.int32)
    for i, text in enumerate(texts):
        ids = list(vocab.encode(text))[:max_len - 1] + [tokenizer.EOS_ID]
        out[i, :len(ids)] = ids
    return out
