"""MkDocs hook: draws the documentation's figures before every build.

Every ``docs/figures/<name>.py`` exposes ``main(output_dir)``, which writes
``<name>.png`` into ``output_dir``. The hook runs each script into a temporary
directory and copies a PNG to ``docs/assets/figures/`` only when its bytes
differ from the file already there, so ``mkdocs serve`` does not rebuild in a
loop.
"""

import filecmp
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

_DOCS = Path(__file__).resolve().parent.parent
FIGURES_DIR = _DOCS / "figures"
OUTPUT_DIR = _DOCS / "assets" / "figures"


def _load(script):
    spec = importlib.util.spec_from_file_location(f"_docs_figure_{script.stem}", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_figures(output_dir=OUTPUT_DIR):
    """Runs every figure script; returns the names of the PNGs that changed."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    changed = []
    for script in sorted(FIGURES_DIR.glob("*.py")):
        if script.name.startswith("_"):
            continue
        with tempfile.TemporaryDirectory() as scratch:
            _load(script).main(scratch)
            for png in sorted(Path(scratch).glob("*.png")):
                target = output_dir / png.name
                if target.exists() and filecmp.cmp(png, target, shallow=False):
                    continue
                shutil.copyfile(png, target)
                changed.append(png.name)
    return changed


def on_pre_build(config, **kwargs):
    build_figures()
