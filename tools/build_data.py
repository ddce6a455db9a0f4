"""The command line of the build:

    python -m tools.build_data <dataset> --manual_dir ... --data_dir ...

See data/build/__init__.py for what it builds and how; `--help` lists the flags.
"""

import argparse
import logging
import time

import errors
from data import build
from data.build import image_shards


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tools.build_data",
                                     description=build.__doc__.split("\n")[0])
    parser.add_argument("dataset", choices=build.BUILDERS)
    parser.add_argument("--manual_dir", required=True, help="the release files")
    parser.add_argument("--data_dir", required=True, help="where built datasets go")
    parser.add_argument("--config", default="all", choices=tuple(build.CONFIGS),
                        help="all languages, or core: en, es, hi, zh")
    parser.add_argument("--langs", default="",
                        help="comma-separated languages to build instead of --config's")
    parser.add_argument("--max_side", type=int, default=0,
                        help="coco35l, cc3m35l: re-encode images larger than this many pixels "
                             "(longer side) at that side, e.g. 320 for 224-px training; 0 "
                             "keeps the release's JPEGs")
    parser.add_argument("--workers", type=int, default=None,
                        help="coco35l, cc3m35l: worker processes (default: every core)")
    parser.add_argument("--corrupt_images", default="stop",
                        choices=image_shards.CORRUPT_IMAGE_POLICIES)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    start = time.time()
    # A missing or malformed input (an OSError or errors.Error): one line naming it.
    with errors.reraised(errors.InputError, OSError):
        counts = build.build(args.dataset, manual_dir=args.manual_dir, data_dir=args.data_dir,
                             config=args.config, langs=args.langs or None,
                             corrupt_images=args.corrupt_images, max_side=args.max_side,
                             workers=args.workers)
    print(f"{args.dataset} ready in {args.data_dir} ({time.time() - start:.0f}s):")
    for split, count in sorted(counts.items()):
        print(f"  {split}: {count} examples")
    return 0


if __name__ == "__main__":
    errors.run_main(main)
