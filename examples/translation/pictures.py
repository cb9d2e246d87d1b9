"""Pictures for the translation example: cross-attention and the position table."""

import matplotlib

matplotlib.use("Agg")  # files only; no display on servers

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from keras import ops  # noqa: E402

from examples.translation.translator import translate  # noqa: E402
from keras_transformer.layers.sinusoidal_position_encoding import sinusoidal_table  # noqa: E402
from keras_transformer.text.translation_dataset import tokenize_source  # noqa: E402


def _pieces(tokenizer, ids):
    return [p.decode("utf-8") for p in tokenizer.id_to_piece(ids).numpy()]


def cross_attention(model, tokenizer, sentence, translation):
    """Head-averaged cross-attention of the last decoder block, `(target, source)`."""
    source = tokenize_source(tokenizer, [sentence]).to_tensor(tokenizer.pad_id)
    source = source.numpy().astype("int32")
    target = [tokenizer.start_id, *tokenizer.tokenize(translation).numpy().tolist()]
    target = np.asarray([target], "int32")
    encoder_outputs, encoder_mask = model.encode(source)
    hidden = model.target_embedding(target)
    _, scores = model.decoder(
        hidden,
        encoder_outputs,
        encoder_padding_mask=encoder_mask,
        return_attention_scores=True,
    )
    weights = ops.convert_to_numpy(ops.cast(scores[-1]["cross_attention"], "float32"))
    return weights[0].mean(axis=0), _pieces(tokenizer, source[0]), _pieces(tokenizer, target[0])


def save_attention_picture(model, tokenizer, sentence, path):
    translation = translate(model, tokenizer, [sentence], beam_size=1)[0]
    weights, source_pieces, target_pieces = cross_attention(model, tokenizer, sentence, translation)
    figure, axes = plt.subplots(
        figsize=(1 + 0.45 * len(source_pieces), 1 + 0.4 * len(target_pieces))
    )
    axes.imshow(weights, cmap="viridis", aspect="auto")
    axes.set_xticks(range(len(source_pieces)), source_pieces, rotation=90)
    axes.set_yticks(range(len(target_pieces)), target_pieces)
    axes.set_xlabel("source (English)")
    axes.set_ylabel("target prefix (German)")
    axes.set_title("cross-attention, last decoder block, mean over heads")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def save_position_picture(path, length=100, width=128):
    table = ops.convert_to_numpy(sinusoidal_table(length, width))
    figure, axes = plt.subplots(figsize=(8, 4))
    image = axes.imshow(table, cmap="RdBu", aspect="auto")
    axes.set_xlabel("dimension (even: sin, odd: cos)")
    axes.set_ylabel("position")
    axes.set_title("sinusoidal position encoding")
    figure.colorbar(image)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
