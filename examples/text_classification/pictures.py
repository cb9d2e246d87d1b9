"""Pictures for the classification example: training curves and attention over a text."""

import matplotlib

matplotlib.use("Agg")  # files only; no display on servers

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from keras import ops  # noqa: E402

from keras_transformer.text import tokenize_for_classification  # noqa: E402


def save_training_curves(history, path):
    """Loss and accuracy per epoch, training and held-out validation, from `fit`'s history."""
    epochs = np.arange(1, len(history["loss"]) + 1)
    figure, (loss_axes, accuracy_axes) = plt.subplots(1, 2, figsize=(9, 3.5))
    for axes, metric in ((loss_axes, "loss"), (accuracy_axes, "accuracy")):
        for prefix, style in (("", "-o"), ("val_", "--s")):
            if prefix + metric in history:
                label = "validation" if prefix else "training"
                axes.plot(epochs, history[prefix + metric], style, label=label)
        axes.set_xticks(epochs)
        axes.set_xlabel("epoch")
        axes.set_ylabel(metric)
        axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def self_attention(model, tokenizer, text, max_length):
    """Head-averaged self-attention of the last encoder block, `(tokens, tokens)`, and pieces."""
    ids = tokenize_for_classification(tokenizer, [text], max_length=max_length).to_tensor()
    ids = ops.convert_to_numpy(ids).astype("int32")
    embedding = model.encoder.get_layer("embedding")
    encoder = model.encoder.get_layer("transformer_encoder")
    _, scores = encoder(
        embedding(ids), padding_mask=ids != model.pad_id, return_attention_scores=True
    )
    weights = ops.convert_to_numpy(ops.cast(scores[-1], "float32"))[0].mean(axis=0)
    pieces = [piece.decode("utf-8") for piece in tokenizer.id_to_piece(ids[0]).numpy()]
    return weights, pieces


def save_attention_picture(model, tokenizer, text, path, max_length):
    """Query × key attention of the last block, and the attention each token receives."""
    weights, pieces = self_attention(model, tokenizer, text, max_length)
    size = len(pieces)
    figure, (matrix_axes, bar_axes) = plt.subplots(
        2,
        1,
        figsize=(2 + 0.32 * size, 3 + 0.32 * size),
        gridspec_kw={"height_ratios": [size, max(3, size // 4)]},
    )
    matrix_axes.imshow(weights, cmap="viridis", aspect="auto")
    matrix_axes.set_xticks(range(size), pieces, rotation=90)
    matrix_axes.set_yticks(range(size), pieces)
    matrix_axes.set_title("self-attention, last encoder block, mean over heads")
    bar_axes.bar(range(size), weights.mean(axis=0))
    bar_axes.set_xticks(range(size), pieces, rotation=90)
    bar_axes.set_ylabel("attention received")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def save_pretraining_curves(curves, path):
    """The probe's masked-token accuracy and loss against tokens seen, one line per run.

    A third panel shows the ELECTRA discriminators' area under the ROC curve on the probe
    when a curve has it (`probe_replaced_auc`).

    Args:
        curves: dict from a run's label to the CSV file its `pretrain --curve` wrote.
        path: the PNG to write.
    """
    import csv

    runs = {}
    for label, csv_path in curves.items():
        with open(csv_path, encoding="utf-8") as file:
            runs[label] = list(csv.DictReader(file))
    with_auc = [label for label, rows in runs.items() if rows and rows[0].get("probe_replaced_auc")]
    figure, panels = plt.subplots(1, 3 if with_auc else 2, figsize=(15 if with_auc else 10, 4))
    accuracy_axes, loss_axes = panels[:2]
    for label, rows in runs.items():
        tokens = [int(row["tokens_seen"]) / 1e6 for row in rows]
        accuracy = [float(r["probe_masked_accuracy"]) for r in rows]
        (line,) = accuracy_axes.plot(tokens, accuracy, label=label)
        loss_axes.plot(tokens, [float(r["probe_loss"]) for r in rows], color=line.get_color())
        if label in with_auc:
            auc = [float(r["probe_replaced_auc"]) for r in rows]
            panels[2].plot(tokens, auc, color=line.get_color())
    names = ["masked-token accuracy", "masked-token loss", "replaced-token ROC AUC"]
    for axes, name in zip(panels, names):
        axes.set_xlabel("tokens seen (millions)")
        axes.set_ylabel(f"probe {name}")
        axes.grid(alpha=0.3)
    accuracy_axes.legend(fontsize=8)
    if with_auc:
        panels[2].set_title("ELECTRA discriminator (0.5: chance)", fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return path


if __name__ == "__main__":
    # python -m examples.text_classification.pictures OUT.png LABEL=CURVE.csv ...
    import sys

    save_pretraining_curves(dict(arg.split("=", 1) for arg in sys.argv[2:]), sys.argv[1])
