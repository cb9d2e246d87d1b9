"""What the examples' command-line tools share: range checks, one-line errors, the command.

Argument errors go through `parser.error` (usage, one line naming the flag, the value and
what is allowed; exit status 2). Errors found later in the user's input (a missing data
folder, a directory of the wrong kind) end the program with one line on standard error and
exit status 2; `--debug` shows the traceback.
"""

import json
import math
import os
import sys
import traceback

from examples.compilation_cache import DEFAULT_DIRECTORY, enable_compilation_cache


def add_debug_flags(parser, training=False):
    """`--debug` (tracebacks) and `--verbose` (TensorFlow's C++ log lines, see native_logs).

    A training command's `--verbose` also prints each epoch's time, tokens per second and
    compilations of the training and evaluation steps (`examples.compilations`).
    """
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    verbose_help = "show TensorFlow's C++ log lines (hidden by default)"
    if training:
        verbose_help += (
            "; print each epoch's time, tokens per second and the compilations of the "
            "training and evaluation steps"
        )
    parser.add_argument("--verbose", action="store_true", help=verbose_help)


def add_precision_flag(parser):
    parser.add_argument(
        "--precision",
        default="auto",
        choices=["auto", "float32", "mixed_bfloat16", "mixed_float16"],
        help="dtype policy; auto: mixed_bfloat16 on CPUs with native bfloat16, else float32",
    )


def add_compilation_cache_flag(parser):
    """`--compilation-cache DIR|off`, which `check_compilation_cache` reads."""
    parser.add_argument(
        "--compilation-cache",
        default=DEFAULT_DIRECTORY,
        metavar="DIR|off",
        help="JAX: keep the compiled training and evaluation steps in DIR, so that a later run "
        f"of the same model and shapes loads them instead of compiling (default: "
        f"{DEFAULT_DIRECTORY}); off: compile anew in every run. No effect on TensorFlow, "
        "which keeps no XLA programs between runs, or on PyTorch",
    )


def check_compilation_cache(parser, value):
    """`--compilation-cache` as a folder, or `None` for `off`; a file there is a usage error."""
    if value == "off":
        return None
    if os.path.exists(value) and not os.path.isdir(value):
        parser.error(f"--compilation-cache '{value}' exists and is not a directory")
    return value


def start_compilation_cache(directory):
    """Turns JAX's compilation cache on in `directory` (`None`: off) and says so in one line.

    Call it before the first step compiles: programs compiled earlier are not kept.
    """
    folder = enable_compilation_cache(directory)
    if folder is not None:
        print(f"compilation cache: {folder} (XLA's programs, reused by the next run)")
    return folder


def add_mesh_flag(parser):
    parser.add_argument(
        "--mesh",
        default=None,
        help="train on a device mesh DATAxMODEL, e.g. 8 (data parallel over 8 devices) or "
        "2x4 (the model split over 4, JAX only); on a CPU the devices are simulated. "
        "See docs/distribution.md",
    )


def check_mesh(parser, value):
    """`--mesh` as `(data, model)`, or `None`; a bad value is a one-line usage error."""
    if value is None:
        return None
    from keras_transformer.distribution import parse_mesh

    try:
        return parse_mesh(value)
    except ValueError:
        parser.error(
            f"--mesh must be DATAxMODEL or DATA with positive sizes, e.g. 8 or 2x4; got {value!r}"
        )


def prepare_devices(mesh):
    """Before any computation: join the other hosts, or split the CPU into the mesh's devices.

    On one machine the CPU is split into `data * model` devices (JAX; TensorFlow when it has
    no GPU), which only changes anything where there are no accelerators.
    """
    from keras_transformer.distribution import join_hosts, simulate_cpu_devices

    if mesh is None or join_hosts():
        return
    data, model = mesh
    simulate_cpu_devices(data * model)


def is_huggingface_folder(path):
    """Whether `path` holds a Hugging Face checkpoint (a config.json naming a `model_type`)."""
    try:
        with open(os.path.join(path, "config.json"), encoding="utf-8") as file:
            config = json.load(file)
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and "model_type" in config


def load_saved_model(path, model_class, kind, trainer):
    """The bundle at `path`, checked to hold a `model_class` and a tokenizer.

    `path` is a `save_pretrained` folder or a Hugging Face checkpoint folder. The loaders
    name what they were given instead (a run folder, a SavedModel, a file, a missing path)
    and what to pass; every error is a ValueError, shown in one line.
    """
    from keras_transformer.saving import load_huggingface, load_pretrained

    if is_huggingface_folder(path):
        bundle = load_huggingface(path)
    else:
        bundle = load_pretrained(path)
    if not isinstance(bundle.model, model_class):
        raise ValueError(
            f"'{path}' holds a {type(bundle.model).__name__}, not a {kind}; pass a model "
            f"trained by {trainer}"
        )
    if bundle.tokenizer is None:
        raise ValueError(f"'{path}' holds no tokenizer; save the {kind} with its tokenizer")
    return bundle


def fill_defaults(args, defaults):
    """Gives each flag named in `defaults` and left out (`None`) its value there."""
    for key, value in defaults.items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)


def flag(name):
    return f"--{name.replace('_', '-')}"


def check_positive(parser, name, value):
    """An integer flag that must be at least 1."""
    if value is None or value < 1:
        parser.error(f"{flag(name)} must be a positive integer; got {value}")


def check_non_negative(parser, name, value):
    """An integer flag that may be 0."""
    if value is None or value < 0:
        parser.error(f"{flag(name)} must be 0 or a positive integer; got {value}")


def check_positive_number(parser, name, value):
    if value is None or not math.isfinite(value) or value <= 0:
        parser.error(f"{flag(name)} must be a positive number; got {value}")


def check_non_negative_number(parser, name, value):
    if value is None or not math.isfinite(value) or value < 0:
        parser.error(f"{flag(name)} must be a number >= 0; got {value}")


def check_rate(parser, name, value):
    """A dropout-like probability."""
    if value is None or not 0 <= value < 1:
        parser.error(f"{flag(name)} must be in [0, 1); got {value}")


def command_line(module, argv):
    """The command as typed (`module` is the dotted name), for a saved model's metadata."""
    arguments = sys.argv[1:] if argv is None else argv
    return f"python -m {module} " + " ".join(arguments)


def run_command(parse_args, run, argv):
    """Parses `argv` (default: the command line) and runs it; a user error ends it in one line."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return run(args, argv)
    except (ValueError, OSError) as error:
        fail(error, args.debug)


def fail(error, debug):
    """Ends the program on a user error: one line on stderr and exit status 2."""
    if debug:
        traceback.print_exc()
    message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)
