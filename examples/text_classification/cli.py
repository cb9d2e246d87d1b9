"""The classification tools' common flags; range checks and errors are `examples.command_line`'s."""

import argparse

from examples.command_line import (  # noqa: F401 - the tools import these from here
    add_compilation_cache_flag,
    add_debug_flags,
    add_mesh_flag,
    add_precision_flag,
    check_compilation_cache,
    check_mesh,
    check_positive,
    check_rate,
    fail,
    fill_defaults,
    prepare_devices,
    run_command,
    start_compilation_cache,
)
from examples.command_line import command_line as shared_command_line


def add_common_flags(parser):
    add_precision_flag(parser)
    add_compilation_cache_flag(parser)
    parser.add_argument("--seed", type=int, default=0, help="data order, masks and weights")
    add_debug_flags(parser, training=True)


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
    return shared_command_line(f"examples.text_classification.{module}", argv)
