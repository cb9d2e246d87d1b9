"""`load_huggingface` / `save_huggingface`: MarianMT, BERT and GPT-2 folders, numbers intact.

Offline: tiny models are built with transformers' config classes, given random values in
every tensor (biases, layer-norm scales and offsets, Marian's logits bias), saved with
transformers' `save_pretrained` and compared with ours on padded batches, so a tensor
left out, transposed or copied to the wrong place changes the outputs.
"""

import json
import os
import warnings

import keras
import numpy as np
import pytest

from keras_transformer.models import MaskedLM, Seq2SeqTransformer, TransformerClassifier
from keras_transformer.saving import (
    PretrainedDirectoryError,
    load_huggingface,
    save_huggingface,
)

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

ATOL = 1e-4
MARIAN_PAD = 59


def _randomize(model, seed=0, scale=0.3):
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "embed_positions" in name:  # recomputed from the formula on load
                continue
            noise = torch.randn(parameter.shape, generator=generator) * scale
            parameter.copy_(noise)
    return model.eval()


def marian(tmp_path, share=True, activation="swish", scale_embedding=True):
    pad = MARIAN_PAD if share else 49
    config = transformers.MarianConfig(
        vocab_size=60,
        decoder_vocab_size=None if share else 50,
        share_encoder_decoder_embeddings=share,
        d_model=16,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        max_position_embeddings=64,
        pad_token_id=pad,
        eos_token_id=0,
        decoder_start_token_id=pad,
        forced_eos_token_id=None,
        activation_function=activation,
        scale_embedding=scale_embedding,
    )
    model = _randomize(transformers.MarianMTModel(config))
    with torch.no_grad():
        model.final_logits_bias.normal_(generator=torch.Generator().manual_seed(1))
        # PyTorch keeps an `nn.Embedding(padding_idx=...)` row at zero; Marian starts from it.
        model.get_decoder().embed_tokens.weight[pad] = 0
        model.get_encoder().embed_tokens.weight[pad] = 0
    directory = tmp_path / "marian"
    model.save_pretrained(directory)
    return model, directory, pad


def bert(tmp_path, architecture):
    config = transformers.BertConfig(
        vocab_size=60,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
        num_labels=3,
    )
    model = _randomize(getattr(transformers, architecture)(config))
    directory = tmp_path / architecture
    model.save_pretrained(directory)
    return model, directory


def gpt2(tmp_path):
    config = transformers.GPT2Config(
        vocab_size=60,
        n_embd=16,
        n_layer=2,
        n_head=2,
        n_positions=32,
        bos_token_id=59,
        eos_token_id=59,
    )
    model = _randomize(transformers.GPT2LMHeadModel(config))
    directory = tmp_path / "gpt2"
    model.save_pretrained(directory)
    return model, directory


def load(directory):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # these folders have no tokenizer files
        return load_huggingface(directory)


def numpy(x):
    return np.asarray(keras.ops.convert_to_numpy(x))


def marian_logits(model, source, target, pad):
    with torch.no_grad():
        return model(
            input_ids=torch.tensor(source),
            attention_mask=torch.tensor(source != pad),
            decoder_input_ids=torch.tensor(target),
        ).logits.numpy()


def marian_batch(pad):
    source = np.array([[5, 6, 7, 8, 0], [9, 10, 0, pad, pad]])
    target = np.array([[pad, 3, 4, 5], [pad, 11, 12, pad]])
    real = target != pad
    real[:, 0] = True  # the start token is the pad token
    return source, target, real


@pytest.mark.backend_agnostic
@pytest.mark.parametrize(
    "share, activation", [(True, "swish"), (False, "relu")], ids=["tied-swish", "untied-relu"]
)
def test_marian_logits_equal_transformers(tmp_path, share, activation):
    theirs, directory, pad = marian(tmp_path, share, activation)
    ours = load(directory).model
    assert isinstance(ours, Seq2SeqTransformer)
    source, target, real = marian_batch(pad)
    expected = marian_logits(theirs, source, target, pad)
    logits = numpy(ours({"encoder_token_ids": source, "decoder_token_ids": target}))
    np.testing.assert_allclose(logits[real], expected[real], atol=ATOL)


def test_marian_generate_gives_transformers_tokens(tmp_path):
    theirs, directory, pad = marian(tmp_path, activation="relu", scale_embedding=False)
    ours = load(directory).model
    source = np.array([[5, 6, 7, 8, 9, 0], [9, 10, 0, pad, pad, pad]])
    mask = torch.tensor(source != pad)
    with torch.no_grad():
        greedy = theirs.generate(
            torch.tensor(source), attention_mask=mask, max_new_tokens=8, do_sample=False
        ).numpy()
        # transformers divides a beam's score by length**length_penalty, we use GNMT's
        # penalty: the two agree without one.
        beam = theirs.generate(
            torch.tensor(source),
            attention_mask=mask,
            max_new_tokens=8,
            num_beams=4,
            do_sample=False,
            length_penalty=0.0,
        ).numpy()
    # transformers' output starts with the start token; ours leaves it out.
    for expected, method in ((greedy, "greedy"), (beam, "beam")):
        kwargs = {"length_penalty": 0.0} if method == "beam" else {}
        generated = ours.generate(source, max_length=8, method=method, **kwargs)
        for row, ids in zip(expected[:, 1:], generated):
            ids = ids.tolist()
            assert ids[: len(row)] == [int(t) for t in row][: len(ids)], (method, row, ids)


@pytest.mark.backend_agnostic
@pytest.mark.parametrize(
    "architecture", ["BertForMaskedLM", "BertForSequenceClassification", "BertModel"]
)
def test_bert_outputs_equal_transformers_with_token_types(tmp_path, architecture):
    theirs, directory = bert(tmp_path, architecture)
    ours = load(directory).model
    ids = np.array([[2, 5, 6, 7, 3], [2, 8, 3, 0, 0]])
    token_types = np.array([[0, 0, 1, 1, 1], [0, 1, 1, 0, 0]])
    with torch.no_grad():
        expected = theirs(
            input_ids=torch.tensor(ids),
            attention_mask=torch.tensor(ids != 0),
            token_type_ids=torch.tensor(token_types),
        )
    inputs = {"token_ids": ids, "token_type_ids": token_types}
    real = ids != 0
    if architecture == "BertModel":
        assert isinstance(ours, MaskedLM)
        hidden = numpy(ours.encode(inputs))
        np.testing.assert_allclose(
            hidden[real], expected.last_hidden_state.numpy()[real], atol=ATOL
        )
    elif architecture == "BertForMaskedLM":
        np.testing.assert_allclose(
            numpy(ours(inputs))[real], expected.logits.numpy()[real], atol=ATOL
        )
    else:
        assert isinstance(ours, TransformerClassifier) and ours.pooling == "pooler"
        np.testing.assert_allclose(numpy(ours(inputs)), expected.logits.numpy(), atol=ATOL)


@pytest.mark.backend_agnostic
def test_gpt2_logits_equal_transformers_at_every_position(tmp_path):
    theirs, directory = gpt2(tmp_path)
    ours = load(directory).model
    ids = np.array([[5, 6, 7, 8, 9, 10], [11, 12, 13, 59, 59, 59]])
    real = np.array([[1] * 6, [1, 1, 1, 0, 0, 0]])
    with torch.no_grad():
        expected = theirs(
            input_ids=torch.tensor(ids), attention_mask=torch.tensor(real)
        ).logits.numpy()
    np.testing.assert_allclose(numpy(ours(ids))[real == 1], expected[real == 1], atol=ATOL)
    with torch.no_grad():
        continued = theirs.generate(torch.tensor(ids[:1]), max_new_tokens=5, do_sample=False)
    assert ours.generate(ids[:1], max_length=11).tolist() == continued.numpy().tolist()


def test_save_huggingface_round_trips_through_transformers(tmp_path):
    cases = []
    theirs, directory, pad = marian(tmp_path, share=False)
    source, target, real = marian_batch(pad)
    cases.append(("marian", theirs, directory, transformers.MarianMTModel))
    for architecture in ("BertForMaskedLM", "BertForSequenceClassification"):
        model, folder = bert(tmp_path, architecture)
        cases.append((architecture, model, folder, getattr(transformers, architecture)))
    model, folder = gpt2(tmp_path)
    cases.append(("gpt2", model, folder, transformers.GPT2LMHeadModel))
    for name, theirs, directory, model_class in cases:
        written = save_huggingface(load(directory).model, tmp_path / f"{name}-ours")
        reread = model_class.from_pretrained(written).eval()
        expected = theirs.state_dict()
        for key, value in reread.state_dict().items():
            np.testing.assert_array_equal(value.numpy(), expected[key].numpy(), err_msg=key)


def test_ctranslate2_translates_our_marian_folder_as_we_do(tmp_path):
    ctranslate2 = pytest.importorskip("ctranslate2")
    from ctranslate2.converters import TransformersConverter

    from keras_transformer.text import MarianTokenizer, SubwordTokenizer

    sentences = ["a dog runs on the grass.", "two men play music.", "the girl is eating."]
    subword = SubwordTokenizer.train(sentences * 20, vocabulary_size=40, byte_fallback=False)
    # CTranslate2 takes the last id for the pad token, as the opus-mt folders have it.
    tokenizer = MarianTokenizer.from_subword_tokenizer(subword, pad_last=True)
    model = Seq2SeqTransformer(
        tokenizer.vocabulary_size,
        num_encoder_layers=1,
        num_decoder_layers=1,
        hidden_dim=16,
        num_heads=2,
        intermediate_dim=32,
        share_embeddings=True,
        interleave_sinusoids=False,
        layer_norm_epsilon=1e-5,
        output_bias=True,
        zero_pad_embedding=True,
        pad_id=tokenizer.pad_id,
        start_id=tokenizer.start_id,
        end_id=tokenizer.end_id,
    )
    weights = model.get_weights()
    rng = np.random.default_rng(0)
    model.set_weights([w + rng.normal(0, 0.3, w.shape).astype(w.dtype) for w in weights])
    embedding = model.source_embedding.token_embedding.embeddings
    keep = np.arange(40) != tokenizer.pad_id
    embedding.assign(keras.ops.convert_to_numpy(embedding) * keep[:, None])
    folder = save_huggingface(model, tmp_path / "marian", tokenizer)
    converted = tmp_path / "ct2"
    TransformersConverter(str(folder)).convert(str(converted))
    translator = ctranslate2.Translator(str(converted), device="cpu")
    ids = [[*tokenizer.tokenize(s).numpy().tolist(), tokenizer.end_id] for s in sentences]
    pieces = [[p.decode() for p in tokenizer.id_to_piece(row).numpy()] for row in ids]
    results = translator.translate_batch(pieces, beam_size=1, max_decoding_length=10)
    padded = np.full((len(ids), max(map(len, ids))), tokenizer.pad_id)
    for row, sentence in zip(padded, ids):
        row[: len(sentence)] = sentence
    ours = model.generate(padded, max_length=10, method="greedy")
    assert sum(len(result.hypotheses[0]) for result in results) > len(sentences)
    for result, row in zip(results, ours):
        theirs = result.hypotheses[0]
        mine = [p.decode() for p in tokenizer.id_to_piece(row).numpy()]
        mine = mine[: mine.index("</s>")] if "</s>" in mine else mine
        assert theirs == mine


def test_a_pickle_only_folder_is_refused_by_default(tmp_path):
    model, directory = gpt2(tmp_path)
    os.remove(directory / "model.safetensors")
    torch.save(model.state_dict(), directory / "pytorch_model.bin")
    with pytest.raises(PretrainedDirectoryError, match="pickle.*safetensors.*allow_pickle=True"):
        load_huggingface(directory)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert load_huggingface(directory, allow_pickle=True).model.num_layers == 2


def test_bad_folders_are_named_in_one_message(tmp_path):
    _, directory = gpt2(tmp_path)
    with pytest.raises(PretrainedDirectoryError, match="is not a directory"):
        load_huggingface(tmp_path / "nothing")
    with pytest.raises(PretrainedDirectoryError, match="No 'config.json'"):
        load_huggingface(tmp_path)
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps({**config, "model_type": "llama"}))
    with pytest.raises(PretrainedDirectoryError, match=r"llama.*supported: \['bert', 'gpt2'"):
        load_huggingface(directory)
    (directory / "config.json").write_text(json.dumps(config))

    from safetensors.numpy import load_file, save_file

    path = directory / "model.safetensors"
    original = load_file(path)
    broken = {k: v for k, v in original.items() if k != "transformer.h.1.ln_2.bias"}
    broken["transformer.h.0.mlp.c_fc.weight"] = np.zeros((16, 8), "float32")
    broken["transformer.extra"] = np.zeros(3, "float32")
    save_file(broken, path, metadata={"format": "pt"})
    with pytest.raises(PretrainedDirectoryError) as error:
        load_huggingface(directory)
    message = str(error.value)
    assert "missing 'transformer.h.1.ln_2.bias' (16,)" in message
    assert "not expected 'transformer.extra'" in message
    assert "'transformer.h.0.mlp.c_fc.weight' is (16, 8), expected (16, 64)" in message


def test_save_huggingface_names_the_options_it_cannot_write(tmp_path):
    model = Seq2SeqTransformer(
        50,
        num_encoder_layers=1,
        num_decoder_layers=1,
        hidden_dim=16,
        num_heads=2,
        intermediate_dim=32,
        norm_first=True,
        end_id=3,
    )
    with pytest.raises(ValueError) as error:
        save_huggingface(model, tmp_path / "out")
    message = str(error.value)
    for option in ("norm_first=True", "interleave_sinusoids=True", "layer_norm_epsilon=1e-06"):
        assert option in message
    assert not (tmp_path / "out").exists()


def test_a_folder_without_tokenizer_files_loads_the_model_and_says_so(tmp_path):
    _, directory = gpt2(tmp_path)
    with pytest.warns(UserWarning, match="no tokenizer files.*vocab.json, merges.txt"):
        bundle = load_huggingface(directory)
    assert bundle.tokenizer is None and bundle.metadata["architecture"] == "GPT2LMHeadModel"


def _tiny_marian_of_ours(tokenizer, **options):
    return Seq2SeqTransformer(
        tokenizer.vocabulary_size, num_encoder_layers=1, num_decoder_layers=1, hidden_dim=16,
        num_heads=2, intermediate_dim=32, interleave_sinusoids=False, layer_norm_epsilon=1e-5,
        pad_id=tokenizer.pad_id, start_id=tokenizer.start_id, end_id=tokenizer.end_id,
        **options,
    )  # fmt: skip


def test_a_loaded_marian_folder_serves_strings_and_writes_a_zero_bias(tmp_path):
    from keras_transformer.saving import export_serving
    from keras_transformer.text import MarianTokenizer, SubwordTokenizer
    from tests.saved_model_loader import load_in_fresh_process

    sentences = ["a dog runs on the grass.", "two men play music."]
    subword = SubwordTokenizer.train(sentences * 20, vocabulary_size=40, byte_fallback=False)
    tokenizer = MarianTokenizer.from_subword_tokenizer(subword, pad_last=True)
    # Without a logits bias of its own, the folder holds a zero `final_logits_bias`.
    folder = save_huggingface(_tiny_marian_of_ours(tokenizer), tmp_path / "marian", tokenizer)
    reread = transformers.MarianMTModel.from_pretrained(folder)
    assert not reread.final_logits_bias.abs().sum()
    bundle = load_huggingface(folder)
    directory = export_serving(bundle.model, bundle.tokenizer, tmp_path / "serving", beam_size=1)
    # Loaded without this library, strings in and out.
    served = load_in_fresh_process(directory, sentences)
    assert len(served["batch"]) == 2 and not served["imported_keras_transformer"]
