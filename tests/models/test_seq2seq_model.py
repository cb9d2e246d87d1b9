"""`Seq2SeqTransformer`: embedding sharing and tying, padding, causality, `pad_id`."""

import numpy as np
import pytest
from model_cases import (
    SIZES,
    VOCAB,
    make_seq2seq,
    predict_logits,
    seq2seq_data,
    token_ids,
)

from keras_transformer.models import Seq2SeqTransformer
from keras_transformer.training import LabelSmoothedCrossEntropy

pytestmark = pytest.mark.backend_agnostic

HIDDEN = SIZES["hidden_dim"]


def _embedding_matrices(model):
    return [w for w in model.weights if w.path.endswith("token_embedding/embeddings")]


def test_share_embeddings_uses_one_matrix():
    separate = make_seq2seq()
    shared = make_seq2seq(share_embeddings=True)
    assert len(_embedding_matrices(separate)) == 2
    assert len(_embedding_matrices(shared)) == 1
    assert shared.source_embedding is shared.target_embedding
    assert separate.count_params() - shared.count_params() == VOCAB * HIDDEN


def test_share_embeddings_needs_one_vocabulary():
    with pytest.raises(ValueError, match="share_embeddings"):
        Seq2SeqTransformer(10, target_vocabulary_size=12, share_embeddings=True, **SIZES)


def test_untied_output_adds_a_projection(rng):
    tied = make_seq2seq()
    untied = make_seq2seq(tie_output_embeddings=False)
    assert tied.output_projection is None
    kernel, bias = untied.output_projection.weights
    assert tuple(kernel.shape) == (HIDDEN, VOCAB) and tuple(bias.shape) == (VOCAB,)
    assert untied.count_params() - tied.count_params() == HIDDEN * VOCAB + VOCAB
    x, _ = seq2seq_data(rng, batch=2)
    assert predict_logits(untied, x).shape == (2, x["decoder_token_ids"].shape[1], VOCAB)


@pytest.mark.parametrize("pad_id", [0, 3])
def test_source_padding_does_not_change_logits(pad_id, rng):
    model = make_seq2seq(pad_id=pad_id)
    x, _ = seq2seq_data(rng, batch=3, pad_id=pad_id)
    expected = predict_logits(model, x)
    padded = dict(x)
    padded["encoder_token_ids"] = np.pad(
        x["encoder_token_ids"], ((0, 0), (0, 4)), constant_values=pad_id
    )
    np.testing.assert_allclose(predict_logits(model, padded), expected, rtol=1e-5, atol=1e-5)
    # Target padding leaves the real target positions alone, too.
    padded["decoder_token_ids"] = np.pad(
        x["decoder_token_ids"], ((0, 0), (0, 3)), constant_values=pad_id
    )
    np.testing.assert_allclose(
        predict_logits(model, padded)[:, : x["decoder_token_ids"].shape[1]],
        expected,
        rtol=1e-5,
        atol=1e-5,
    )


def test_decoder_is_causal(rng):
    model = make_seq2seq()
    x, _ = seq2seq_data(rng, batch=2)
    logits = predict_logits(model, x)
    length = x["decoder_token_ids"].shape[1]
    for t in range(length - 1):
        changed = dict(x)
        changed["decoder_token_ids"] = x["decoder_token_ids"].copy()
        changed["decoder_token_ids"][:, t + 1 :] = token_ids(rng, (2, length - t - 1))
        new = predict_logits(model, changed)
        np.testing.assert_allclose(new[:, : t + 1], logits[:, : t + 1], rtol=1e-5, atol=1e-5)
        # ...and the future does reach the later positions.
        assert not np.allclose(new[:, t + 1 :], logits[:, t + 1 :])


def test_nonzero_pad_id_masks_that_id_and_not_zero(rng):
    pad_id = 3
    model = make_seq2seq(pad_id=pad_id)
    x, y = seq2seq_data(rng, batch=4, pad_id=pad_id)
    expected = predict_logits(model, x)

    def with_source_suffix(value):
        padded = dict(x)
        padded["encoder_token_ids"] = np.pad(
            x["encoder_token_ids"], ((0, 0), (0, 2)), constant_values=value
        )
        return predict_logits(model, padded)

    np.testing.assert_allclose(with_source_suffix(pad_id), expected, rtol=1e-5, atol=1e-5)
    # Id 0 is an ordinary token when `pad_id=3`: attended to, so the logits move.
    assert not np.allclose(with_source_suffix(0), expected, atol=1e-4)

    # The loss skips the labels equal to `pad_id` (the last column), not those equal to 0.
    y[:, 0] = 0
    loss = LabelSmoothedCrossEntropy(0.1, pad_id=pad_id, reduction=None)
    per_token = np.asarray(loss(y, expected))
    assert np.all(per_token[:, -1] == 0) and np.all(per_token[:, :-1] > 0)
    restored = Seq2SeqTransformer.from_config(model.get_config())
    assert restored.pad_id == pad_id
