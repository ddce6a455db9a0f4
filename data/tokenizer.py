"""SentencePiece vocabularies with the T5/mT5 id conventions.

Real configs point at mT5's vocabulary
(gs://t5-data/vocabs/mc4.250000.100extra/sentencepiece.model, or a local copy
of it); the demo trains a small one on its own captions with the same special
ids, so that the model and the decoding code never need to know which one they
got: pad 0, EOS 1, UNK 2, and no BOS (the T5 decoder starts from the pad id).
"""

import io
import os

import numpy as np
import sentencepiece as spm

import files

PAD_ID = 0
EOS_ID = 1
UNK_ID = 2


def train_sentencepiece(texts, model_prefix, vocab_size, *, user_defined_symbols=(),
                        model_type="unigram", pretokenization_delimiter=""):
    """Trains a SentencePiece model with T5 special ids, deterministically.

    Args:
        texts: iterable of training sentences (str). Their order matters for
            determinism only through their content: the same list gives the
            same model file.
        model_prefix: output path without extension; writes `<prefix>.model`
            and `<prefix>.vocab`. Its folder is created if missing.
        vocab_size: target vocabulary size, including the 3 special pieces. A
            soft limit: a small corpus may yield fewer pieces.
        user_defined_symbols: strings always kept as single pieces (e.g. the
            LangId prompts of a demo vocabulary).
        model_type: "unigram" (as mT5) or "bpe".
        pretokenization_delimiter: if set, a character marking word
            boundaries in the training texts of unspaced scripts (zh, ja, th):
            pieces never cross it, and it is removed before training. Encoding
            needs no delimiter.

    Returns:
        The path of the `.model` file.
    """
    texts = [t for t in texts if t and t.strip()]
    if not texts:
        raise ValueError(f"no non-empty training texts for SentencePiece model {model_prefix}")
    if vocab_size <= 3:
        raise ValueError(f"vocab_size must be > 3 (the special pieces), got {vocab_size}")
    folder = os.path.dirname(os.path.abspath(model_prefix))
    os.makedirs(folder, exist_ok=True)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts),
        model_writer=model,
        vocab_size=vocab_size,
        model_type=model_type,
        pad_id=PAD_ID, eos_id=EOS_ID, unk_id=UNK_ID, bos_id=-1,
        # Keep every character: Devanagari and Han would otherwise be UNKs.
        character_coverage=1.0,
        user_defined_symbols=list(user_defined_symbols),
        pretokenization_delimiter=pretokenization_delimiter,
        # A small corpus cannot always fill vocab_size; do not fail on it.
        hard_vocab_limit=False,
        # Determinism: no sampling of the input, one thread.
        shuffle_input_sentence=False,
        input_sentence_size=0,
        num_threads=1,
        minloglevel=2,
    )
    path = model_prefix + ".model"
    files.write_bytes(path, model.getvalue())
    processor = spm.SentencePieceProcessor(model_proto=model.getvalue())
    with files.replacing(model_prefix + ".vocab") as f:
        for i in range(processor.get_piece_size()):
            f.write(f"{processor.id_to_piece(i)}\t{processor.get_score(i)}\n")
    return path


class Vocabulary:
    """A SentencePiece model with the interface of seqio's vocabulary that this code uses.

    `encode`, `decode`, `vocab_size`, `eos_id`, `pad_id`, `unk_id` and
    `tokenizer` (the SentencePieceProcessor) behave as
    `seqio.SentencePieceVocabulary`'s without extra ids; seqio is not imported
    because it imports TensorFlow, which the training process does without.
    """

    def __init__(self, path, processor):
        self.path = path
        self.tokenizer = processor

    @property
    def vocab_size(self):
        return self.tokenizer.get_piece_size()

    @property
    def eos_id(self):
        return self.tokenizer.eos_id()

    @property
    def pad_id(self):
        return PAD_ID

    @property
    def unk_id(self):
        return self.tokenizer.unk_id()

    def encode(self, text):
        """Text -> piece ids, without EOS."""
        return self.tokenizer.encode_as_ids(text)

    def decode(self, ids):
        """Piece ids -> text, up to the first EOS; ids beyond the vocabulary read as UNK."""
        ids = [self.unk_id if int(i) >= self.vocab_size else int(i) for i in ids]
        if EOS_ID in ids:
            ids = ids[:ids.index(EOS_ID) + 1]
        return self.tokenizer.decode_ids(ids)


def _read_model(path):
    """The bytes of a local or `gs://` .model file (remote ones through etils.epath)."""
    if "://" not in path:
        with open(path, "rb") as f:
            return f.read()
    from etils import epath  # noqa: PLC0415  Only remote paths need it.

    return epath.Path(path).read_bytes()


def get_vocabulary(path):
    """Loads a SentencePiece model with T5's special ids.

    Args:
        path: local path or a `gs://` URL of a `.model` file.

    Returns:
        A `Vocabulary`.

    Raises:
        FileNotFoundError: a local path that does not exist.
        ValueError: the file is not a SentencePiece model, or its special ids
            are not T5's.
    """
    if not path:
        raise ValueError("no SentencePiece model path given (config field 'vocab_path')")
    if "://" not in path and not os.path.exists(path):
        raise FileNotFoundError(
            f"SentencePiece model not found: {path}. Real configs use mT5's "
            f"gs://t5-data/vocabs/mc4.250000.100extra/sentencepiece.model (or a local "
            f"copy); the demo writes DIR/spm/demo.model via `python -m data.demo --out DIR`.")
    try:
        processor = spm.SentencePieceProcessor(model_proto=_read_model(path))
    except Exception as e:  # sentencepiece raises RuntimeError/OSError variants.
        raise ValueError(f"{path}: not a SentencePiece model ({e})") from None
    ids = (processor.pad_id(), processor.eos_id(), processor.unk_id())
    if ids != (PAD_ID, EOS_ID, UNK_ID):
        raise ValueError(
            f"{path}: special ids (pad, eos, unk) are {ids}, expected T5's "
            f"{(PAD_ID, EOS_ID, UNK_ID)}")
    return Vocabulary(path, processor)


def detokenize(vocab, tokens):
    """Token ids [batch, length] -> strings, cut at the first EOS.

    Padding and ids of the padded embedding rows beyond the vocabulary (see
    model/captioner.padded_vocab_size) are dropped.

    Args:
        vocab: the `Vocabulary` the ids come from.
        tokens: int array-like [batch, length], as the decoders return them.

    Returns:
        A list of `batch` strings.
    """
    texts = []
    for row in np.asarray(tokens):
        ids = row.tolist()
        if EOS_ID in ids:
            ids = ids[:ids.index(EOS_ID)]
        texts.append(vocab.decode([i for i in ids if i not in (PAD_ID, EOS_ID)
                                   and i < vocab.vocab_size]))
    return texts
