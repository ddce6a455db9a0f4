"""The training batches the loop steps on: the data pipeline's iterator, as global arrays."""

import contextlib

import jax

import errors
from data import images as image_lib
from data import pipeline
from data.pipeline import packing
from training.actions import TrainingError


@contextlib.contextmanager
def _data_errors(where):
    """A data error of the training batches in the block (missing files, no disk space, bad
    data) as a TrainingError naming `where` and saying what to do."""
    try:
        yield
    except (OSError, errors.Error) as e:
        # The build decoded every image it wrote: the files changed since.
        hint = ("; the built dataset changed since it was built: delete it and build it again"
                if isinstance(e, image_lib.ImageError) else "")
        raise TrainingError(f"{where}: {e}{hint}") from None


def abstract_batch(config, sharding=None, layout=None):
    """The global training batches as ShapeDtypeStructs (packed ones with a packing.Layout)."""
    return {name: jax.ShapeDtypeStruct(shape, dtype, sharding=sharding)
            for name, (shape, dtype) in pipeline.batch_shapes(
                config.batch_size, config.model.image_size, config.data, layout).items()}


def packing_layout(config, model, mesh, lengths):
    """The packing.Layout of `config.data.pack`'s batches on `mesh` (None when off), its rows
    derived from `lengths` (count -> a sample's lengths, e.g. the training stream's first)."""
    with _data_errors("config.data"):
        return packing.layout(config, data_devices=mesh.shape["data"],
                              image_tokens=model.num_image_tokens, lengths=lengths)


class Batches:
    """This process's training batches as global arrays, from step `start_step` + 1 on.
    The workers start at once; `peek` fetches the next batch ahead. Data errors: TrainingError."""

    def __init__(self, config, vocab, sharding, start_step, layout=None):
        self.sharding, self._peeked = sharding, None
        with _data_errors("config.data"):
            self._iterator = pipeline.train_iterator(
                config.data, vocab, global_batch_size=config.batch_size,
                image_size=config.model.image_size, seed=config.seed, start_step=start_step,
                process_index=jax.process_index(), process_count=jax.process_count(),
                layout=layout)

    def peek(self):
        """Fetches the next batch now (`next` returns it)."""
        if self._peeked is None:
            self._peeked = self._fetch("config.data")

    def next(self, step):
        """The batch of `step`."""
        batch, self._peeked = self._peeked, None
        return self._fetch(f"step {step}") if batch is None else batch

    def _fetch(self, where):
        with _data_errors(where):  # A file changed or went away while training.
            local = next(self._iterator)
        return {k: jax.make_array_from_process_local_data(self.sharding, v)
                for k, v in local.items()}

    def close(self):
        """Stops the iterator's workers."""
        self._iterator.close()
