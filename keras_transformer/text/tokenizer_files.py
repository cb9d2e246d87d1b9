"""The files of a Hugging Face tokenizer folder, as this package's tokenizers read them.

`MarianTokenizer`, `WordPieceTokenizer` and `BytePairTokenizer` read their options and
special tokens from `tokenizer_config.json`, `special_tokens_map.json` and `config.json`
the same way, check the vocabularies and special tokens they are given the same way, and
write `tokenizer_config.json` the same way.
"""

import json
import os
import re

from keras_transformer.validation import is_int

TOKENIZER_CONFIG_FILENAME = "tokenizer_config.json"
SPECIAL_TOKENS_MAP_FILENAME = "special_tokens_map.json"
MODEL_CONFIG_FILENAME = "config.json"
TOKENIZER_JSON_FILENAME = "tokenizer.json"

_SPECIAL_TOKEN_KEYS = frozenset(
    ("unk_token", "eos_token", "bos_token", "pad_token", "sep_token", "cls_token", "mask_token")
)


def read_json_file(path, what):
    """The JSON value in `path`; `ValueError` naming the file when it is not valid JSON."""
    try:
        with open(path, encoding="utf-8") as file:
            return json.load(file)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"'{path}' is not valid JSON ({error}); it should hold {what}.") from error


def write_json_file(path, value):
    with open(path, "w", encoding="utf-8") as file:
        json.dump(value, file, indent=2, ensure_ascii=False)
        file.write("\n")


def write_tokenizer_config(directory, config, additional_special_tokens):
    """Writes `config` as `tokenizer_config.json`, with the additional special tokens if any."""
    if additional_special_tokens:
        config = {**config, "additional_special_tokens": list(additional_special_tokens)}
    write_json_file(os.path.join(directory, TOKENIZER_CONFIG_FILENAME), config)


def require_file(directory, filename, class_name, advice):
    """The path of `filename` in `directory`; `ValueError` naming the file when it is missing."""
    path = os.path.join(directory, filename)
    if not os.path.isfile(path):
        if not os.path.isdir(directory):
            raise ValueError(
                f"`directory` must be a folder of Hugging Face tokenizer files. Received: "
                f"directory='{directory}', which is not a folder."
            )
        raise ValueError(
            f"'{filename}' is missing from '{directory}': `{class_name}.from_huggingface` "
            f"needs it. {advice}"
        )
    return path


def tokenizer_json_model(directory, model_type, filenames, family):
    """The `model` object of `tokenizer.json` in `directory`, a `tokenizers` `model_type` one.

    transformers 5 saves `tokenizer.json` alone, in place of `filenames`; a `ValueError`
    names those files, `model_type` and the `family` of folder when the model has another
    type.
    """
    path = os.path.join(directory, TOKENIZER_JSON_FILENAME)
    tokenizer = read_json_file(path, "a tokenizers Tokenizer")
    model = tokenizer.get("model") if isinstance(tokenizer, dict) else None
    model = model if isinstance(model, dict) else {}
    if model.get("type") != model_type:
        missing = " or ".join(f"'{filename}'" for filename in filenames)
        raise ValueError(
            f"{missing} is missing from '{directory}' and its '{TOKENIZER_JSON_FILENAME}' is "
            f"not a {model_type} tokenizer (model type {model.get('type')!r}): this is not a "
            f"{family} tokenizer folder."
        )
    return model


def token_content(value):
    """A special token as written in Hugging Face configs (a str or an AddedToken dict)."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def read_tokenizer_options(directory):
    """The options of a Hugging Face checkpoint folder, as transformers reads them.

    Returns a dict: `special_tokens_map.json` overridden by `tokenizer_config.json`
    (special tokens as str), plus `"added_tokens"`, a `{content: id}` dict of the
    special `added_tokens_decoder` entries, and `"model_config"`, the `config.json` object
    (or `{}`).
    """
    options = {}
    added = {}
    for filename in (SPECIAL_TOKENS_MAP_FILENAME, TOKENIZER_CONFIG_FILENAME):
        path = os.path.join(directory, filename)
        if not os.path.isfile(path):
            continue
        value = read_json_file(path, "a JSON object of tokenizer options")
        if not isinstance(value, dict):
            raise ValueError(
                f"'{path}' holds a JSON {type(value).__name__}, not an object of tokenizer "
                "options: the file is damaged or was written by something else."
            )
        for key, item in value.items():
            if key == "added_tokens_decoder" and isinstance(item, dict):
                for index, token in item.items():
                    # Only the special ones: plain added tokens are not replicated.
                    special = isinstance(token, dict) and token.get("special", False)
                    content = token_content(token)
                    if special and content is not None and str(index).isdigit():
                        added[content] = int(index)
            elif key in _SPECIAL_TOKEN_KEYS:
                options[key] = token_content(item)
            elif key in ("additional_special_tokens", "extra_special_tokens"):
                tokens = item.values() if isinstance(item, dict) else item
                tokens = [token_content(token) for token in tokens or ()]
                options["additional_special_tokens"] = [t for t in tokens if t is not None]
            else:
                options[key] = item
    options["added_tokens"] = added
    config_path = os.path.join(directory, MODEL_CONFIG_FILENAME)
    config = read_json_file(config_path, "a model config") if os.path.isfile(config_path) else {}
    options["model_config"] = config if isinstance(config, dict) else {}
    return options


def extra_special_tokens(options, named):
    """The special tokens of `options` beyond the `named` ones, in order, each once.

    Those of `additional_special_tokens`, then the special `added_tokens_decoder` entries.
    """
    extra = [*(options.get("additional_special_tokens") or ()), *options["added_tokens"]]
    return [token for token in dict.fromkeys(extra) if token not in named]


def added_token_pattern(tokens):
    """A regex that finds `tokens` leftmost-longest (as transformers' Trie / AddedVocabulary)."""
    tokens = sorted({token for token in tokens if token}, key=lambda token: (-len(token), token))
    return re.compile("|".join(map(re.escape, tokens))) if tokens else None


def split_added_tokens(text, pattern):
    """Yields `(segment, is_added_token)` pairs covering `text`, empty segments left out."""
    if pattern is None:
        if text:
            yield text, False
        return
    start = 0
    for match in pattern.finditer(text):
        if match.start() > start:
            yield text[start : match.start()], False
        yield match.group(), True
        start = match.end()
    if start < len(text):
        yield text[start:], False


def check_special_tokens(vocabulary, names, class_name):
    """`{argument name: id}` of the special tokens; `ValueError` for one not in the vocabulary."""
    ids = {}
    for name, token in names.items():
        if not isinstance(token, str) or not token:
            raise ValueError(f"`{name}` must be a non-empty str. Received: {name}={token!r}")
        if token not in vocabulary:
            raise ValueError(
                f"`{name}={token!r}` is not in the vocabulary of this {class_name}. Pass the "
                f"token the vocabulary uses, e.g. `{name}=...` as its tokenizer_config.json says."
            )
        ids[name] = vocabulary[token]
    return ids


def check_additional_special_tokens(vocabulary, tokens, class_name):
    """`tokens` (`None` or str items) as a list; `ValueError` for one not in the vocabulary."""
    tokens = list(tokens or ())
    check_special_tokens(
        vocabulary,
        {f"additional_special_tokens[{i}]": token for i, token in enumerate(tokens)},
        class_name,
    )
    return tokens


def check_vocabulary_mapping(vocabulary, argument, filename):
    """Returns `vocabulary` as a `{str: int}` dict; `ValueError` for anything else."""
    if not isinstance(vocabulary, dict) or not vocabulary:
        raise ValueError(
            f"`{argument}` must be a non-empty dict of token (str) to id (int), as in "
            f"{filename}. Received: {type(vocabulary).__name__}."
        )
    checked = {}
    for token, index in vocabulary.items():
        if not isinstance(token, str) or not is_int(index) or index < 0:
            raise ValueError(
                f"`{argument}` must map str tokens to non-negative int ids, as {filename} "
                f"does. Received the entry {token!r}: {index!r}."
            )
        checked[token] = int(index)
    return checked
