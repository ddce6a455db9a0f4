"""Runs the trainer on the tiny test config in its own process.

The sharding, multi-process and kill/resume tests start this as a subprocess,
because the number of (simulated) devices and `jax.distributed` must be set
before JAX starts. Usage:

    python -m tests.run_tiny_training --data DIR --workdir DIR [--devices 8]
        [--set mesh.data=2 --set mesh.model=4 ...]
        [--coordinator localhost:1234 --num_processes 2 --process_id 0]
"""

import argparse
import ast
import os


def _parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="tiny demo data folder")
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--devices", type=int, default=1, help="simulated CPU devices")
    parser.add_argument("--set", action="append", default=[],
                        help="config override field=python_literal")
    parser.add_argument("--coordinator", default=None)
    parser.add_argument("--num_processes", type=int, default=1)
    parser.add_argument("--process_id", type=int, default=0)
    return parser.parse_args()


def main():
    args = _parse_args()
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + f" --xla_force_host_platform_device_count={args.devices}")
    os.environ["JAX_PLATFORMS"] = "cpu"
    import jax  # noqa: PLC0415  (after XLA_FLAGS)

    if args.coordinator:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(args.coordinator, args.num_processes, args.process_id)

    import train  # noqa: PLC0415
    from tests.tiny import tiny_config  # noqa: PLC0415

    overrides = {}
    for item in args.set:
        field, _, value = item.partition("=")
        try:
            overrides[field] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            overrides[field] = value
    train.train_and_evaluate(tiny_config(args.data, **overrides), args.workdir)


if __name__ == "__main__":
    main()
