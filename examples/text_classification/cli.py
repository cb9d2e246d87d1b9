"""What the example's command-line tools share: common flags, range checks, one-line errors."""

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


def check_positive(parser, name, value):
    if value is None or value < 1:
        parser.error(f"--{name.replace('_', '-')} must be a positive integer; got {value}")


def check_rate(parser, name, value):
    if not 0 <= value < 1:
        parser.error(f"--{name.replace('_', '-')} must be in [0, 1); got {value}")


def fail(error, debug):
    """Ends the program on a user error: one line on stderr and exit status 2."""
    if debug:
        traceback.print_exc()
    message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)
