"""The ``penstock`` command: ``demo``, ``bench`` and ``info``."""
from __future__ import annotations

import argparse
import os
import sys

from penstock.paths import default_work_dir


def _default_threads() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


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
    bench.add_argument("--peers", help="comma-separated peers to run: torchvision, dali (on the GPU), none "
                       "(default: torchvision, and dali on the GPU when it is installed)")
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
        try:
            _check_job_arguments(args)
        except ValueError as error:
            print(f"penstock {args.command}: {error}", file=sys.stderr)
            return 2
        return _run_job(args)
    if args.command == "info":
        return _info()
    if args.command == "docs":
        from penstock.api import ignored_arguments_markdown, reference_markdown
        sys.stdout.write(ignored_arguments_markdown() if args.ignored else reference_markdown())
        return 0
    return 2


PEERS = ("torchvision", "dali")
PIPELINES = ("train", "val")


def _listed(option: str, text: str, allowed: tuple[str, ...], none_allowed: bool = False) -> list[str]:
    """The comma-separated names of ``text``, each one of ``allowed`` (or 'none', meaning no name)."""
    from penstock.schema import closest
    names = [name.strip() for name in text.split(",") if name.strip()]
    choices = (*allowed, "none") if none_allowed else allowed
    for name in names:
        if name not in choices:
            raise ValueError(f"{option}: unknown name '{name}'{closest(name, choices)}; choose from {', '.join(choices)}")
    if not names:
        raise ValueError(f"{option}: give at least one of {', '.join(choices)}")
    return [name for name in names if name != "none"]


def _check_job_arguments(args) -> None:
    """Everything the user gave that can be wrong is checked here, before any data set is made or
    any pipeline runs: a mistake is one line, not a traceback after an epoch."""
    if args.device == "gpu":
        from penstock import registry
        registry.implementation("decoders.image_random_crop", "mixed")  # says why not, where there is no GPU
    if args.command == "demo":
        _check_output_image(args.out)
        return
    args.pipelines = _listed("--pipelines", args.pipelines, PIPELINES)
    if args.peers is None:
        args.peers = ["torchvision"] + (["dali"] if _dali_installed() and _device_of(args) == "gpu" else [])
        return
    args.peers = _listed("--peers", args.peers, PEERS, none_allowed=True)
    if "dali" in args.peers:
        if _device_of(args) != "gpu":
            raise ValueError("--peers dali: DALI's pipelines here run on the GPU, and penstock runs on the CPU "
                             "(no usable GPU, or --device cpu); leave dali out")
        if not _dali_installed():
            raise ValueError("--peers dali: NVIDIA DALI is not installed (pip install nvidia-dali-cuda130); "
                             "leave dali out")


def _device_of(args) -> str:
    from penstock.demo import default_device
    return args.device or default_device()


def _dali_installed() -> bool:
    import importlib.util
    try:
        return importlib.util.find_spec("nvidia.dali") is not None
    except ModuleNotFoundError:  # no 'nvidia' package at all
        return False


def _check_output_image(path: str) -> None:
    import cv2
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise ValueError(f"--out '{path}' is a folder; give the path of the image to write, e.g. {path}/grid.png")
    if not cv2.haveImageWriter(path):
        raise ValueError(f"--out '{path}': cannot tell the image format from its name; end it in .png or .jpg")
    if not os.path.isdir(folder):
        raise ValueError(f"--out '{path}': the folder '{folder}' does not exist")
    if not os.access(folder, os.W_OK):
        raise ValueError(f"--out '{path}': the folder '{folder}' is not writable")


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
    from penstock.runtime import hardware_lane
    from penstock.runtime import native
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
