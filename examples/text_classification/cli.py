"""What the example's command-line tools share: common flags, range checks, one-line errors."""

import argparse
import sys
import traceback


def add_common_flags(parser):
    parser.add_argument(
        "--precision",
        default="auto",
        choices=["auto", "float32", "mixed_bfloat16", "mixed_float16"],
        help="dtype policy; auto: mixed_bfloat16 on CPUs with native bfloat16, else float32",
    )
    parser.add_argument("--seed", type=int, default=0, help="data order, masks and weights")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")


MODEL_SIZES = ("num_layers", "hidden_dim", "num_heads", "intermediate_dim")


def add_model_flags(parser):
    """The model's size: a preset of `keras_transformer.models.build` and its overrides."""
    parser.add_argument("--preset", default=None, choices=["tiny", "small", "base", "big"])
    for name in MODEL_SIZES:
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=None)
    parser.add_argument(
        "--norm-first",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="pre-norm blocks (post-norm, the paper's and BERT's, with --no-norm-first)",
    )


def model_overrides(parser, args):
    """The `build` overrides named by the flags, each range-checked."""
    overrides = {"dropout": args.dropout, "norm_first": args.norm_first}
    for name in MODEL_SIZES:
        if getattr(args, name) is not None:
            check_positive(parser, name, getattr(args, name))
            overrides[name] = getattr(args, name)
    return overrides


def command_line(module, argv):
    """The command as typed, for the metadata of a saved model."""
    arguments = sys.argv[1:] if argv is None else argv
    return f"python -m examples.text_classification.{module} " + " ".join(arguments)


def check_positive(parser, name, value):
    if value is None or value < 1:
        parser.error(f"--{name.replace('_', '-')} must be a positive integer; got {value}")


def check_rate(parser, name, value):
    if not 0 <= value < 1:
        parser.error(f"--{name.replace('_', '-')} must be in [0, 1); got {value}")


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
