import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.text.translation_dataset import (
    fixed_shape_lengths,
    length_bucket_boundaries,
    make_translation_dataset,
    tokenize_source,
    tokenize_target,
    translation_batch_shapes,
)
from keras_transformer.training import LabelSmoothedCrossEntropy, MaskedAccuracy
from tests import tiny_models
from tests.text.padding_scores import assert_scored_as_without_padding

START, END, PAD = 2, 3, 0


def _batches(dataset):
    return [
        (x["encoder_token_ids"].numpy(), x["decoder_token_ids"].numpy(), y.numpy())
        for x, y in dataset
    ]


def _rows(batches):
    """Unpadded (encoder, decoder, labels) rows of every batch."""
    rows = []
    for encoder, decoder, labels in batches:
        for e, d, y in zip(encoder, decoder, labels):
            rows.append((e[e != PAD].tolist(), d[d != PAD].tolist(), y[y != PAD].tolist()))
    return rows


def test_length_bucket_boundaries():
    assert length_bucket_boundaries(12) == [8, 9, 10, 11, 12, 13]
    boundaries = length_bucket_boundaries(256)
    assert boundaries[:3] == [8, 9, 10] and boundaries[-2:] == [236, 257]
    assert len(boundaries) == 42 and boundaries == sorted(set(boundaries))
    assert length_bucket_boundaries(5) == [6]
    with pytest.raises(ValueError, match="`step`"):
        length_bucket_boundaries(10, step=1.0)


def test_tokenize_source_and_target(tokenizer):
    texts = ["Two dogs play.", "Zwei Hunde spielen im Schnee."]
    ids = tokenizer.tokenize(texts).to_list()
    assert tokenize_source(tokenizer, texts).to_list() == [row + [END] for row in ids]
    decoder, labels = tokenize_target(tokenizer, texts)
    assert decoder.to_list() == [[START] + row for row in ids]
    assert labels.to_list() == [row + [END] for row in ids]
    short = tokenize_source(tokenizer, texts, max_length=3).to_list()
    assert short == [row[:2] + [END] for row in ids]
    decoder, labels = tokenize_target(tokenizer, texts, max_length=3)
    assert decoder.to_list() == [[START] + row[:2] for row in ids]
    assert labels.to_list() == [row[:2] + [END] for row in ids]
    with pytest.raises(ValueError, match="`max_length`"):
        tokenize_source(tokenizer, texts, max_length=1)


def test_batches_structure_and_teacher_forcing(pairs, tokenizer):
    budget = 512
    dataset = make_translation_dataset(pairs, tokenizer, tokens_per_batch=budget, max_length=64)
    assert dataset.element_spec[0]["encoder_token_ids"].dtype == tf.int32
    assert dataset.element_spec[0]["decoder_token_ids"].dtype == tf.int32
    assert dataset.element_spec[1].dtype == tf.int32
    batches = _batches(dataset)
    assert len(batches) > 10
    for encoder, decoder, labels in batches:
        assert encoder.dtype == decoder.dtype == labels.dtype == np.int32
        assert encoder.ndim == decoder.ndim == 2 and decoder.shape == labels.shape
        assert encoder.shape[0] == decoder.shape[0]
        # The budget counts padding too, on each side.
        assert encoder.size <= budget and decoder.size <= budget
        # Padding is 0 and only trails the sequence.
        for ids in (encoder, decoder, labels):
            lengths = (ids != PAD).sum(axis=1)
            positions = np.arange(ids.shape[1])
            np.testing.assert_array_equal(ids != PAD, positions[None, :] < lengths[:, None])
        assert (decoder[:, 0] == START).all()
        np.testing.assert_array_equal((decoder != PAD).sum(1), (labels != PAD).sum(1))
        last = (labels != PAD).sum(1) - 1
        np.testing.assert_array_equal(labels[np.arange(len(labels)), last], END)
        last = (encoder != PAD).sum(1) - 1
        np.testing.assert_array_equal(encoder[np.arange(len(encoder)), last], END)
        # Labels are the decoder inputs shifted left by one.
        following = decoder[:, 1:] != PAD
        np.testing.assert_array_equal(decoder[:, 1:][following], labels[:, :-1][following])
        assert ((encoder == START).sum(), (decoder == END).sum(), (labels == START).sum()) == (
            0,
            0,
            0,
        )


def test_every_pair_appears_once_and_decodes_back(pairs, tokenizer):
    subset = pairs[:300]
    rows = _rows(_batches(make_translation_dataset(subset, tokenizer, tokens_per_batch=256)))
    assert len(rows) == 300
    sources = tokenizer.decode(tf.ragged.constant([e for e, _, _ in rows]))
    targets = tokenizer.decode(tf.ragged.constant([d for _, d, _ in rows]))
    assert sorted(zip(sources, targets)) == sorted(subset)


def test_subword_dropout_resplits_every_pass_and_repeats_with_a_seed(pairs, tokenizer):
    subset = pairs[:300]

    def make():
        return make_translation_dataset(
            subset, tokenizer, tokens_per_batch=256, shuffle=True, seed=5, subword_dropout=0.1
        )

    dataset = make()
    passes = [_rows(_batches(dataset)) for _ in range(2)]
    plain = _rows(_batches(make_translation_dataset(subset, tokenizer, tokens_per_batch=256)))
    for rows in passes:
        assert len(rows) == 300
        sources = tokenizer.decode(tf.ragged.constant([e for e, _, _ in rows]))
        targets = tokenizer.decode(tf.ragged.constant([d for _, d, _ in rows]))
        assert sorted(zip(sources, targets)) == sorted(subset)
        for encoder, decoder, labels in rows:
            assert encoder[-1] == END and decoder[0] == START and labels[-1] == END
            assert decoder[1:] == labels[:-1]
        assert sum(len(d) for _, d, _ in rows) > 1.2 * sum(len(d) for _, d, _ in plain)
    assert sorted(passes[0]) != sorted(passes[1])
    again = make()
    assert [_rows(_batches(again)) for _ in range(2)] == passes


def test_max_length_drops_long_pairs(pairs, tokenizer):
    max_length = 16
    source = tokenize_source(tokenizer, [s for s, _ in pairs]).row_lengths().numpy()
    decoder, _ = tokenize_target(tokenizer, [t for _, t in pairs])
    keep = (source <= max_length) & (decoder.row_lengths().numpy() <= max_length)
    assert 0 < keep.sum() < len(pairs)
    batches = _batches(
        make_translation_dataset(pairs, tokenizer, tokens_per_batch=512, max_length=max_length)
    )
    assert sum(len(e) for e, _, _ in batches) == keep.sum()
    assert max(max(e.shape[1], d.shape[1]) for e, d, _ in batches) <= max_length


def test_max_length_truncates_keeping_special_ids(pairs, tokenizer):
    max_length = 10
    batches = _batches(
        make_translation_dataset(
            pairs[:500], tokenizer, tokens_per_batch=512, max_length=max_length, truncate=True
        )
    )
    rows = _rows(batches)
    assert len(rows) == 500
    assert max(max(len(e), len(d)) for e, d, _ in rows) == max_length
    assert all(e[-1] == END and d[0] == START and y[-1] == END for e, d, y in rows)
    assert all(d[1:] == y[:-1] for _, d, y in rows)


def test_shuffle_changes_order_not_content(pairs, tokenizer):
    subset = pairs[:400]
    dataset = make_translation_dataset(
        subset, tokenizer, tokens_per_batch=256, shuffle=True, seed=7
    )
    first, second = _rows(_batches(dataset)), _rows(_batches(dataset))
    plain = _rows(_batches(make_translation_dataset(subset, tokenizer, tokens_per_batch=256)))
    assert first != second and first != plain
    assert sorted(first) == sorted(second) == sorted(plain)
    again = make_translation_dataset(subset, tokenizer, tokens_per_batch=256, shuffle=True, seed=7)
    assert _rows(_batches(again)) == first


def test_shuffle_spreads_the_flushed_partial_batches(pairs, tokenizer):
    """Bucketing flushes every bucket's partial batch when the pairs run out; unshuffled,
    they all come last (a run of small noisy updates right before validation)."""

    def small_batch_positions(dataset):
        sizes = [len(encoder) for encoder, _, _ in _batches(dataset)]
        small = [i for i, size in enumerate(sizes) if size < np.median(sizes) / 2]
        return np.array(small) / len(sizes), len(sizes)

    plain, count = small_batch_positions(make_translation_dataset(pairs, tokenizer, 1024))
    assert len(plain) >= 5 and plain.min() > 0.5  # all in the second half, at the end
    positions = []
    for seed in range(3):
        shuffled, shuffled_count = small_batch_positions(
            make_translation_dataset(pairs, tokenizer, 1024, shuffle=True, seed=seed)
        )
        assert shuffled_count == count
        positions.extend(shuffled)
    assert 0.3 < np.mean(positions) < 0.7 and min(positions) < 0.25


def test_min_tokens_per_batch_drops_only_the_small_batches(pairs, tokenizer):
    def tokens(batch):
        encoder, decoder, _ = batch
        return max(encoder.size, decoder.size)

    every = _batches(make_translation_dataset(pairs, tokenizer, 1024, shuffle=True, seed=3))
    kept = _batches(
        make_translation_dataset(
            pairs, tokenizer, 1024, shuffle=True, seed=3, min_tokens_per_batch=256
        )
    )
    small = [batch for batch in every if tokens(batch) < 256]
    assert small and len(kept) == len(every) - len(small)
    assert min(tokens(batch) for batch in kept) >= 256
    assert sorted(_rows(kept)) == sorted(_rows([b for b in every if tokens(b) >= 256]))


def test_batch_size_multiple_pads_rows_and_keeps_every_pair(pairs, tokenizer):
    subset = pairs[:500]
    plain = _batches(make_translation_dataset(subset, tokenizer, tokens_per_batch=512))
    batches = _batches(
        make_translation_dataset(subset, tokenizer, tokens_per_batch=512, batch_size_multiple=4)
    )
    assert any(len(encoder) % 4 for encoder, _, _ in plain)  # the case is exercised
    padding_rows = 0
    for encoder, decoder, labels in batches:
        assert len(encoder) % 4 == 0 and len(encoder) == len(decoder) == len(labels)
        assert encoder.size <= 512 or len(encoder) == 4
        padding_rows += int(np.sum(~labels.any(axis=1)))
    assert padding_rows > 0
    rows = [row for row in _rows(batches) if row[2]]  # real rows have labels
    assert sorted(rows) == sorted(_rows(plain))


def test_pad_to_bucket_boundary_gives_few_shapes(pairs, tokenizer):
    max_length = 64
    batches = _batches(
        make_translation_dataset(
            pairs,
            tokenizer,
            tokens_per_batch=512,
            max_length=max_length,
            pad_to_bucket_boundary=True,
        )
    )
    allowed = {boundary - 1 for boundary in length_bucket_boundaries(max_length)}
    for encoder, decoder, labels in batches:
        assert encoder.shape[1] == decoder.shape[1] == labels.shape[1]
        assert encoder.shape[1] in allowed
        assert encoder.size <= 512
    assert len({e.shape for e, _, _ in batches}) <= 2 * len(allowed)


def test_fixed_shape_lengths_are_the_documented_list():
    assert fixed_shape_lengths(256) == [16, 24, 32, 48, 64, 96, 128, 192, 256]
    assert fixed_shape_lengths(64) == [16, 24, 32, 48, 64]
    assert fixed_shape_lengths(50, min_length=8) == [8, 12, 16, 24, 32, 48, 50]
    assert fixed_shape_lengths(10) == [10]
    # No neighbour is more than 1.5 times the previous one: padding stays under half.
    lengths = fixed_shape_lengths(4096, min_length=1)
    assert max(b / a for a, b in zip(lengths, lengths[1:])) <= 2
    assert max(b / a for a, b in zip(lengths[2:], lengths[3:])) <= 1.5
    with pytest.raises(ValueError, match="`min_length`"):
        fixed_shape_lengths(64, min_length=0)


def test_translation_batch_shapes_one_per_length():
    # The docs' count: one shape per length, 9 for the defaults (max_length 256).
    shapes = translation_batch_shapes(4096, 256)
    assert len(shapes) == 9
    assert shapes[0] == (256, 16) and shapes[-1] == (16, 256)
    assert all(rows * length <= 4096 for rows, length in shapes)
    assert translation_batch_shapes(512, 64, batch_size_multiple=4) == [
        (32, 16),
        (20, 24),
        (16, 32),
        (8, 48),
        (8, 64),
    ]
    assert translation_batch_shapes(64, 32, lengths=[10, 32]) == [(6, 10), (2, 32)]
    with pytest.raises(ValueError, match="`fixed_lengths`"):
        translation_batch_shapes(512, 64, lengths=[16, 32])  # does not reach max_length


def test_fixed_shapes_yield_only_the_documented_shapes_and_every_pair(pairs, tokenizer):
    plain = _batches(
        make_translation_dataset(pairs, tokenizer, tokens_per_batch=512, max_length=64)
    )
    dataset = make_translation_dataset(
        pairs,
        tokenizer,
        tokens_per_batch=512,
        max_length=64,
        fixed_shapes=True,
        shuffle=True,
        seed=3,
    )
    batches = _batches(dataset)
    allowed = set(translation_batch_shapes(512, 64))
    shapes = {encoder.shape for encoder, _, _ in batches}
    assert shapes <= allowed and len(shapes) >= 3
    for encoder, decoder, labels in batches:
        assert encoder.shape == decoder.shape == labels.shape
    # Without fixed shapes the same pairs come in many more shapes.
    assert len({encoder.shape for encoder, _, _ in plain}) > 2 * len(allowed)
    # Every pair once; the rows that complete a batch are all padding.
    assert sorted(row for row in _rows(batches) if any(row)) == sorted(_rows(plain))
    assert any(not any(row) for row in _rows(batches))


def test_fixed_shapes_with_a_mesh_keep_rows_a_multiple(pairs, tokenizer):
    dataset = make_translation_dataset(
        pairs[:500],
        tokenizer,
        tokens_per_batch=512,
        max_length=64,
        fixed_shapes=True,
        batch_size_multiple=4,
        fixed_lengths=[20, 40, 64],
    )
    shapes = {encoder.shape for encoder, _, _ in _batches(dataset)}
    assert shapes <= {(24, 20), (12, 40), (8, 64)} and shapes
    with pytest.raises(ValueError, match="`fixed_lengths`"):
        make_translation_dataset(
            pairs, tokenizer, max_length=64, fixed_shapes=True, fixed_lengths=[32]
        )


def test_rows_of_padding_leave_loss_and_accuracy_unchanged(pairs, tokenizer):
    """A batch completed to its fixed shape scores as the same pairs without padding."""
    dataset = make_translation_dataset(
        pairs[:300], tokenizer, tokens_per_batch=512, max_length=64, fixed_shapes=True
    )
    model = tiny_models.seq2seq(tokenizer.vocabulary_size, dropout=0.0)
    model.compile(loss=LabelSmoothedCrossEntropy(0.1), metrics=[MaskedAccuracy(0, name="accuracy")])

    def padded_and_plain():
        for inputs, labels in dataset:
            encoder, decoder, labels = (
                inputs["encoder_token_ids"].numpy(),
                inputs["decoder_token_ids"].numpy(),
                labels.numpy(),
            )
            real = labels.any(axis=1)
            if real.all():
                continue
            # The same pairs as the data come: no empty rows, no all-padding columns.
            width = max(int((encoder != PAD).sum(1).max()), int((decoder != PAD).sum(1).max()))
            enc, dec, lab = (part[real, :width] for part in (encoder, decoder, labels))
            yield (
                ({"encoder_token_ids": encoder, "decoder_token_ids": decoder}, labels),
                ({"encoder_token_ids": enc, "decoder_token_ids": dec}, lab),
            )

    assert_scored_as_without_padding(model, padded_and_plain())


def test_autotuning_is_off(pairs, tokenizer):
    # With it on, deleting an iterator that lived a few minutes (Keras deletes the
    # validation iterator every epoch) waited up to 60 s for the autotuning thread.
    for shuffle in (False, True):
        dataset = make_translation_dataset(pairs[:50], tokenizer, shuffle=shuffle)
        assert dataset.options().autotune.enabled is False


def test_accepts_a_dataset_of_string_pairs(pairs, tokenizer):
    subset = pairs[:100]
    source = tf.data.Dataset.from_tensor_slices(([s for s, _ in subset], [t for _, t in subset]))
    from_dataset = _rows(_batches(make_translation_dataset(source, tokenizer, cache=False)))
    assert from_dataset == _rows(_batches(make_translation_dataset(subset, tokenizer)))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"tokens_per_batch": 100, "max_length": 200}, "must be <= `tokens_per_batch`"),
        ({"tokens_per_batch": 0}, "`tokens_per_batch`"),
        ({"max_length": 1}, "`max_length`"),
        ({"min_tokens_per_batch": -1}, "`min_tokens_per_batch` must be an int between 0"),
        ({"min_tokens_per_batch": 5000}, r"between 0 and `tokens_per_batch` \(4096\)"),
        ({"subword_dropout": 1.0}, r"`subword_dropout` must be a float in \[0, 1\)"),
        ({"subword_dropout": "0.1"}, r"Received: subword_dropout='0.1'"),
        ({"subword_dropout": (0.1, -0.1)}, r"a \(source, target\) pair"),
        ({"subword_dropout": (0.1, 0.1, 0.1)}, r"a \(source, target\) pair"),
        ({"batch_size_multiple": 0}, r"`batch_size_multiple` must be a positive int"),
        ({"fixed_shapes": 1}, r"`fixed_shapes` must be a bool"),
    ],
)
def test_bad_arguments_raise(pairs, tokenizer, kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_translation_dataset(pairs[:10], tokenizer, **kwargs)


def test_source_only_subword_dropout_keeps_the_target_split(pairs, tokenizer):
    subset = pairs[:300]
    plain = _rows(_batches(make_translation_dataset(subset, tokenizer, tokens_per_batch=256)))
    sampled = _rows(
        _batches(
            make_translation_dataset(
                subset, tokenizer, tokens_per_batch=256, seed=1, subword_dropout=(0.1, 0.0)
            )
        )
    )
    assert sorted(d for _, d, _ in sampled) == sorted(d for _, d, _ in plain)
    assert sum(len(e) for e, _, _ in sampled) > 1.2 * sum(len(e) for e, _, _ in plain)


def test_subword_dropout_needs_a_list_of_pairs(pairs, tokenizer):
    dataset = tf.data.Dataset.from_tensor_slices(
        ([s for s, _ in pairs[:5]], [t for _, t in pairs[:5]])
    )
    with pytest.raises(ValueError, match="needs `pairs` as a list"):
        make_translation_dataset(dataset, tokenizer, subword_dropout=0.1)


def test_bad_pairs_raise(tokenizer):
    with pytest.raises(ValueError, match="`pairs` is empty"):
        make_translation_dataset([], tokenizer)
    with pytest.raises(ValueError, match=r"\(source, target\)"):
        make_translation_dataset(["just a sentence"], tokenizer)
