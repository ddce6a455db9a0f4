"""SentencePiece vocabularies with T5's ids: pad 0, EOS 1, UNK 2, no BOS.

Real configs read mT5's (`gs://...`, or a local copy); the demo trains a small one on its
own captions with the same special ids (tools/demo.train_sentencepiece).
"""

import os
import urllib.parse

import numpy as np
import sentencepiece as spm

import errors

PAD_ID = 0
EOS_ID = 1
UNK_ID = 2


class Vocabulary:
    """A SentencePiece model (`tokenizer`, from the `.model` bytes `model_proto`) with T5's
    special ids (the module's constants) and the part of seqio's vocabulary interface used here
    (seqio needs TensorFlow)."""

    def __init__(self, model_proto, path):
        self.path, self.model_proto = path, bytes(model_proto)
        # sentencepiece raises RuntimeError/OSError kinds.
        with errors.reraised(errors.InputError, Exception, f"{path}: not a SentencePiece model: "):
            self.tokenizer = spm.SentencePieceProcessor(model_proto=self.model_proto)
        ids = (self.tokenizer.pad_id(), self.tokenizer.eos_id(), self.tokenizer.unk_id())
        if ids != (PAD_ID, EOS_ID, UNK_ID):
            raise errors.InputError(f"{path}: special ids (pad, eos, unk) are {ids}, expected "
                                    f"T5's {(PAD_ID, EOS_ID, UNK_ID)}")

    @property
    def vocab_size(self):
        return self.tokenizer.get_piece_size()

    def encode(self, text):
        """Text -> piece ids, without EOS."""
        return self.tokenizer.encode_as_ids(text)

    def decode(self, ids):
        """Piece ids -> text, as `detokenize` (up to the first EOS, padding and ids beyond the
        vocabulary dropped)."""
        return detokenize(self, [ids])[0]


def _read_model(path, fix):
    """The bytes of a `.model` file: a local path, a `file://` URL, or a remote URL read
    through etils.epath (`gs://`: with TensorFlow's or gcsfs's file system)."""
    if path.startswith("file://"):
        path = urllib.parse.unquote(urllib.parse.urlparse(path).path)
    if "://" not in path:
        if not os.path.exists(path):
            raise FileNotFoundError(
                f"SentencePiece model not found: {path}. Real configs use mT5's "
                f"gs://t5-data/vocabs/mc4.250000.100extra/sentencepiece.model (or a local "
                f"copy); the demo writes DIR/spm/demo.model via `python -m tools.demo --out DIR`.")
        with open(path, "rb") as f:
            return f.read()
    try:
        from etils import epath  # noqa: PLC0415  Only remote paths need it.

        return epath.Path(path).read_bytes()
    except Exception as e:  # noqa: BLE001  No network, no credentials, no file system for it.
        cause = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise errors.InputError(f"{path} is remote and cannot be read here ({cause}); copy "
                                f"it to this machine and {fix}") from None


def get_vocabulary(path, fix="pass --config.vocab.path=/local/copy.model"):
    """Loads a SentencePiece model with T5's special ids from a local path or URL.
    `fix` says how to name a local copy, for an unreadable remote path (errors.InputError, as are a
    file that is no such model or special ids not T5's); FileNotFoundError for a missing local
    path."""
    if not path:
        raise errors.InputError("no SentencePiece model path given (config field vocab.path)")
    return Vocabulary(_read_model(path, fix), path)


def detokenize(vocab, tokens):
    """Token ids [batch, length] (the decoders') -> strings, cut at the first EOS; padding
    and ids of the padded embedding rows beyond the vocabulary are dropped."""
    cut = [ids[:ids.index(EOS_ID)] if EOS_ID in ids else ids for ids in np.asarray(tokens).tolist()]
    return [vocab.tokenizer.decode_ids([i for i in ids if i != PAD_ID and i < vocab.vocab_size])
            for ids in cut]
