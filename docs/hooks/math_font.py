"""MkDocs hook: the site carries the font its formulas are set in.

Browsers set MathML in the page's font unless told otherwise; a text font has no
OpenType MATH table, so brackets do not grow around a fraction and square roots are
cramped. docs/assets/stylesheets/math.css sets `math` in STIX Two Math, and this hook
copies that font from the ziamath package (a `docs` dependency, which ships it) into
the built site, beside its licence (docs/assets/fonts/STIXTwoMath-OFL.txt). The pages
then load nothing from another host: the site reads the same with no network.
"""

import importlib.util
import pathlib
import shutil

FONT = "STIXTwoMath-Regular.ttf"
# Where math.css looks for it, relative to the site's root.
TARGET = pathlib.Path("assets") / "fonts" / FONT


def font_source():
    """The font file the installed ziamath package ships."""
    spec = importlib.util.find_spec("ziamath")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "The site's math font comes from the ziamath package: "
            'pip install -e ".[docs]" (or ".[dev]").'
        )
    source = pathlib.Path(spec.submodule_search_locations[0]) / "fonts" / FONT
    if not source.is_file():
        raise RuntimeError(f"ziamath no longer ships {FONT} (looked for {source}).")
    return source


def on_config(config, **kwargs):
    font_source()  # fail before building the pages, not after
    return config


def on_post_build(config, **kwargs):
    target = pathlib.Path(config["site_dir"]) / TARGET
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(font_source(), target)
