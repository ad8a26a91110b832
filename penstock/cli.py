"""The ``penstock`` command: ``demo``, ``bench`` and ``info``."""
from __future__ import annotations

import argparse
import os
import sys


def _default_threads() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def default_work_dir() -> str:
    """The user's cache folder for penstock's sample data: $XDG_CACHE_HOME/penstock or
    ~/.cache/penstock. Not a folder named penstock in the temporary folder: scripts run from
    there would import it as a namespace package instead of penstock."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "penstock")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got '{text}'") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {value}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="penstock", description="Data pipelines that keep GPUs fed.")
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser("demo", help="run the ResNet-50 training pipeline for one epoch and save "
                                            "a grid of augmented samples")
    demo.add_argument("--data", help="a folder with one sub-folder of images per class (default: a "
                                     "sample folder made from the bundled photographs)")
    demo.add_argument("--images", type=_positive, default=512, help="size of the sample folder (default 512)")
    demo.add_argument("--batch-size", type=_positive, default=64)
    demo.add_argument("--threads", type=_positive, default=_default_threads())
    demo.add_argument("--out", default="penstock_demo.png", help="where to write the PNG grid")
    demo.add_argument("--work-dir", default=default_work_dir(),
                      help="where the sample folder is made (default: %(default)s)")
    demo.add_argument("--device", choices=("cpu", "gpu"), help="default: gpu where there is a usable one")

    bench = commands.add_parser("bench", help="images/s of penstock's pipelines against torchvision's "
                                              "DataLoader (and NVIDIA DALI on a GPU), in one run")
    bench.add_argument("--data", help="folder-per-class JPEGs (default: the demo's sample folder)")
    bench.add_argument("--images", type=_positive, default=1024, help="size of the sample folder if --data is not given")
    bench.add_argument("--batch-size", type=_positive, default=256)
    bench.add_argument("--threads", type=_positive, default=_default_threads())
    bench.add_argument("--batches", type=int, default=0, help="batches per measurement (default: one epoch)")
    bench.add_argument("--device", choices=("cpu", "gpu"), help="where penstock's pipelines run (default: gpu "
                       "where there is a usable one)")
    bench.add_argument("--peers", default="torchvision,dali", help="comma-separated peers to run: torchvision, "
                       "dali (on the GPU, when installed), none")
    bench.add_argument("--pipelines", default="train,val", help="comma-separated: train, val")
    bench.add_argument("--work-dir", default=default_work_dir(), help="where the sample folder is made "
                       "(default: %(default)s)")
    bench.add_argument("--json", help="also write the results as JSON here")

    commands.add_parser("info", help="versions, and which devices and codecs are available")
    docs = commands.add_parser("docs", help="print the operator reference (Markdown), generated from the schemas")
    docs.add_argument("--ignored", action="store_true", help="print the table of arguments accepted from DALI "
                                                             "programs and ignored (docs/dali.md) instead")

    args = parser.parse_args(argv)
    if args.command in ("demo", "bench"):
        return _run_job(args)
    if args.command == "info":
        return _info()
    if args.command == "docs":
        from penstock.api import ignored_arguments_markdown, reference_markdown
        sys.stdout.write(ignored_arguments_markdown() if args.ignored else reference_markdown())
        return 0
    return 2


def _run_job(args) -> int:
    """Runs the demo or the benchmark; a mistake in what the user gave (a folder that is not one,
    a file that does not decode, no usable GPU) is one line saying what to do, not a traceback."""
    from penstock import PipelineError
    try:
        if args.command == "demo":
            from penstock.demo import run_demo
            run_demo(args.data, args.batch_size, args.threads, args.out, args.work_dir, args.images, args.device)
        else:
            from penstock.bench import run_bench
            run_bench(args)
    except (ValueError, OSError, PipelineError) as error:
        print(f"penstock {args.command}: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\npenstock {args.command}: interrupted", file=sys.stderr)
        return 130
    return 0


def _info() -> int:
    import cv2
    import numpy
    import simplejpeg

    import penstock
    from penstock import registry
    print(f"penstock {penstock.__version__}, Python {sys.version.split()[0]}, numpy {numpy.__version__}, "
          f"OpenCV {cv2.__version__}, simplejpeg {simplejpeg.__version__}")
    try:
        import torch
        print(f"torch {torch.__version__}, CUDA available: {torch.cuda.is_available()}")
    except ImportError:
        print("torch: not installed (penstock.plugin.pytorch needs it)")
    from penstock.kernels import hardware_lane, native
    built = native.built(hardware_lane.NAME)
    if built:
        print(f"hardware JPEG decode lane: built ({built})")
    else:
        print(f"hardware JPEG decode lane: not built, nvJPEG's calls come from Python ({native.problem(hardware_lane.NAME)})")
    for name in sorted(registry.schemas()):
        if not name.startswith("_"):
            print(f"  {name:32s} {', '.join(registry.available_devices(name))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
