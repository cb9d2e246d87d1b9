"""MkDocs hook: the repository's RESULTS pages as pages of the site, under "Results".

The measurements live beside the code that produces them (``examples/*/RESULTS.md``,
``benchmarks/RESULTS.md``), where a reader of the repository finds them. The site
shows the same files, unchanged, at ``results/<name>/``, with the pictures beside
each file, so the guides link to them (``../results/translation/index.md``) and the
links work offline.
"""

from pathlib import Path

from mkdocs.structure.files import File

_ROOT = Path(__file__).resolve().parents[2]

# Site folder under results/ -> the folder holding RESULTS.md in the repository.
RESULTS = {
    "translation": _ROOT / "examples" / "translation",
    "classification": _ROOT / "examples" / "text_classification",
    "positions": _ROOT / "examples" / "positions",
    "benchmarks": _ROOT / "benchmarks",
}
_PICTURES = (".png", ".svg", ".jpg")


def results_files(config):
    """The pages and their pictures, as MkDocs files generated from the repository."""
    files = []
    for name, folder in RESULTS.items():
        files.append(
            File.generated(
                config, f"results/{name}/index.md", abs_src_path=str(folder / "RESULTS.md")
            )
        )
        for picture in sorted(folder.rglob("*")):
            if picture.suffix in _PICTURES and "runs" not in picture.relative_to(folder).parts:
                relative = picture.relative_to(folder).as_posix()
                files.append(
                    File.generated(config, f"results/{name}/{relative}", abs_src_path=str(picture))
                )
    return files


def on_files(files, config, **kwargs):
    for file in results_files(config):
        files.append(file)
    return files
