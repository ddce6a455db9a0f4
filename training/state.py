"""The mesh, the optimizer, the train step and the sharded training state
`{"params", "opt_state", "step"}`, and the abstract trees a checkpoint is restored into.
"""

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from model import captioner, partitioning
from training import losses, optimizer, schedules


def make_mesh(mesh_config):
    """A ('data', 'model') mesh; -1 on one axis takes the devices the other leaves."""
    devices = jax.devices()
    n = len(devices)
    data, model = mesh_config.data, mesh_config.model
    data = n // model if data == -1 else data
    model = n // data if model == -1 else model
    if data < 1 or model < 1 or data * model != n:
        raise ValueError(
            f"config.mesh data={mesh_config.data} x model={mesh_config.model} does not "
            f"cover the {n} devices")
    return Mesh(np.asarray(devices).reshape(data, model), ("data", "model"))


def axis_rules(config):
    """The logical-to-mesh axis rules of the run (FSDP or not)."""
    return partitioning.logical_axis_rules(fsdp=config.mesh.fsdp)


def create_optimizer(config):
    """Adafactor with the paper's schedule; returns (optax transform, schedule), the same
    objects for the same settings (so that what is cached per optimizer is found again)."""
    return _optimizer(config.lr.schedule, config.lr.base, config.lr.constant_steps,
                      config.optimizer.clipping_threshold, config.optimizer.decay_rate)


@functools.lru_cache(maxsize=8)
def _optimizer(schedule_name, base, constant_steps, clipping_threshold, decay_rate):
    # Else "constant" (run_config.FIELDS has no other).
    schedule = (schedules.rsqrt_after_constant(base, constant_steps) if schedule_name == "rsqrt"
                else schedules.constant(base))
    tx = optimizer.adafactor(schedule, clipping_threshold=clipping_threshold,
                             decay_rate=decay_rate)
    return tx, schedule


def _init_state(model, tx, rng):
    # The initializers take an 'rbg' key derived from `rng`: it compiles faster than threefry.
    key = jax.random.wrap_key_data(jax.random.bits(rng, (4,), jnp.uint32), impl="rbg")
    params = captioner.init_params(model, key)
    return {"params": params, "opt_state": tx.init(params), "step": jnp.zeros((), jnp.int32)}


def _moment_spec(param_spec, param_shape, leaf_shape):
    """Sharding of an optimizer leaf that mirrors a parameter (Adafactor's v, v_row, v_col)."""
    spec = tuple(param_spec) + (None,) * (len(param_shape) - len(param_spec))
    if tuple(leaf_shape) == tuple(param_shape):
        return P(*spec)
    for axis in reversed(range(len(param_shape))):  # A factored moment: one axis reduced away.
        if param_shape[:axis] + param_shape[axis + 1:] == tuple(leaf_shape):
            return P(*(spec[:axis] + spec[axis + 1:]))
    return P()


def _param_specs(model, rules):
    boxed = captioner.abstract_params(model, boxed=True)
    return nn.logical_to_mesh(nn.get_partition_spec(boxed), rules)


def abstract_params(model, config=None):
    """The parameters as ShapeDtypeStructs, sharded over `config`'s mesh (else on one device)."""
    if config is None:
        device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
        return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=device),
                            captioner.abstract_params(model, boxed=False))
    mesh = make_mesh(config.mesh)
    return jax.tree.map(
        lambda x, spec: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=NamedSharding(mesh, spec)),
        captioner.abstract_params(model, boxed=False), _param_specs(model, axis_rules(config)))


def state_shardings(model, tx, mesh, rules):
    """(abstract state with shardings, tree of NamedSharding) of `model` and `tx` on `mesh`."""
    param_specs = _param_specs(model, rules)
    params = captioner.abstract_params(model, boxed=False)
    # _init_state's shapes, without tracing the model's initializers again.
    abstract = {"params": params, "opt_state": jax.eval_shape(tx.init, params),
                "step": jax.ShapeDtypeStruct((), jnp.int32)}
    is_spec = lambda x: isinstance(x, P)  # noqa: E731
    by_path = {
        path: (spec, leaf.shape) for (path, spec), leaf in zip(
            jax.tree_util.tree_flatten_with_path(param_specs, is_leaf=is_spec)[0],
            jax.tree.leaves(abstract["params"]), strict=True)}

    def opt_spec(path, leaf):
        # Optimizer moments sit at <optimizer fields>/<parameter path>: match the suffix.
        for start in range(len(path)):
            if path[start:] in by_path:
                return _moment_spec(*by_path[path[start:]], leaf.shape)
        return P()  # Counters and other scalars.

    opt_specs = jax.tree_util.tree_map_with_path(opt_spec, abstract["opt_state"])
    specs = {"params": param_specs, "opt_state": opt_specs, "step": P()}
    shardings = jax.tree.map(lambda s: NamedSharding(mesh, s), specs, is_leaf=is_spec)
    abstract = jax.tree.map(
        lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), abstract, shardings)
    return abstract, shardings


def init_state_fn(model, tx, shardings):
    """The jitted initializer: rng -> a fresh state, created directly with its shardings;
    cached, so that a trainer called again in one process does not trace and compile it again."""
    leaves, treedef = jax.tree.flatten(shardings)
    return _jitted_init(model, tx, treedef, tuple(leaves))


@functools.lru_cache(maxsize=8)
def _jitted_init(model, tx, shardings_treedef, shardings_leaves):
    return jax.jit(lambda r: _init_state(model, tx, r),
                   out_shardings=shardings_treedef.unflatten(shardings_leaves))


def init_state(model, tx, rng, shardings):
    """A freshly initialized state, created directly with its shardings."""
    return init_state_fn(model, tx, shardings)(rng)


def make_train_step(model, tx, schedule, config):
    """Returns train_step(state, batch, rng) -> (state, measurements)."""

    # (params, batch, rng) -> ((loss, aux), grads). The fused loss never holds the float32
    # logits [batch, length, vocab] whole.
    grad_fn = jax.value_and_grad(functools.partial(
        losses.captioner_loss, model, label_smoothing=config.label_smoothing,
        z_loss=config.z_loss), has_aux=True)

    def accumulated_grads(params, batch, rng):
        """Sums token-weighted gradients over micro-batches, so the maths equal one big batch."""
        k = config.grad_accum_steps
        if k == 1:
            (_, aux), grads = grad_fn(params, batch, rng)
            return grads, aux
        # Micro-batch i takes rows i, i+k, ...: every data shard contributes to each one.
        micro = jax.tree.map(
            lambda x: x.reshape(x.shape[0] // k, k, *x.shape[1:]).swapaxes(0, 1), batch)

        def body(carry, inputs):
            i, mb = inputs
            (_, aux), grads = grad_fn(params, mb, jax.random.fold_in(rng, i))
            grads = jax.tree.map(lambda g: g * aux["weight"], grads)
            return jax.tree.map(jnp.add, carry, (grads, aux)), None

        zeros = (jax.tree.map(jnp.zeros_like, params),
                 {"loss_sum": 0.0, "z_loss_sum": 0.0, "weight": 0.0})
        (grads, aux), _ = jax.lax.scan(body, zeros, (jnp.arange(k), micro))
        return jax.tree.map(lambda g: g / aux["weight"], grads), aux

    def train_step(state, batch, rng):
        grads, aux = accumulated_grads(state["params"], batch, rng)
        updates, opt_state = tx.update(grads, state["opt_state"], state["params"])
        params = optax.apply_updates(state["params"], updates)
        measurements = {
            "train/loss": aux["loss_sum"] / aux["weight"],
            "train/z_loss": aux["z_loss_sum"] / aux["weight"],
            "train/grad_norm": optax.global_norm(grads),
            "train/tokens": aux["weight"],
            "learning_rate": schedule(state["step"]),
            "lengths": losses.length_sums(batch, model.num_image_tokens),  # For useful FLOPs.
        }
        if "packed" in batch:  # Examples left out of packed rows (data/pipeline/packing.py).
            measurements["train/pack_dropped"] = jnp.sum(1 - batch["packed"])
        return {"params": params, "opt_state": opt_state, "step": state["step"] + 1}, measurements

    return train_step
