"""The documentation site (docs/, mkdocs.yml) builds with no broken link or reference, its API
reference names every public name, and every code block in it runs.

Code blocks: each page's ``python`` blocks run in order in one namespace, and its ``bash``
blocks with bash, in a fresh folder of the page's own that holds ``data/cartpole-expert``, the
dataset Getting started records (unless the page records it itself), against the shared Ray
instance. Blocks fenced as ``console`` are shown only: they need a network, a cluster or a GPU.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import connectors
import offline_rl
from offline_rl import datasets, monitoring
from offline_rl.evaluation import off_policy

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: A fenced block at any indentation: ```lang [attributes] ... ```
FENCE = re.compile(r"^(?P<indent>[ ]*)```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```[ ]*$",
                   re.MULTILINE | re.DOTALL)
RUNNABLE = ("python", "bash")
RECORDED_DATASET = "data/cartpole-expert"
BLOCK_TIMEOUT_S = 240


def nav_pages() -> list[str]:
    """The site's pages in the order of its navigation, as paths under docs/."""
    def walk(entries):
        for entry in entries:
            value = next(iter(entry.values())) if isinstance(entry, dict) else entry
            if isinstance(value, list):
                yield from walk(value)
            else:
                yield value
    return list(walk(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]))


def code_blocks(page: str) -> list[tuple[str, str, int]]:
    """``(language, code, line)`` of each fenced block of a page, dedented."""
    text = (DOCS / page).read_text()
    blocks = []
    for match in FENCE.finditer(text):
        indent = len(match["indent"])
        code = "".join(line[indent:] for line in match["body"].splitlines(keepends=True))
        blocks.append((match["lang"], code, text.count("\n", 0, match.start()) + 1))
    return blocks


PAGES_WITH_CODE = [page for page in nav_pages()
                   if any(lang in RUNNABLE for lang, _, _ in code_blocks(page))]


def test_every_page_is_in_the_navigation():
    pages = {str(path.relative_to(DOCS)) for path in DOCS.rglob("*.md")}
    assert pages == set(nav_pages())


def test_the_site_builds_strictly(tmp_path):
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                            "--site-dir", str(tmp_path / "site")],
                           cwd=ROOT, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    assert (tmp_path / "site" / "api" / "algorithms" / "index.html").is_file()


def test_the_api_reference_names_every_public_name():
    reference = "".join(path.read_text() for path in (DOCS / "api").glob("*.md"))
    documented = set(re.findall(r"^::: [\w.]+\.(\w+)$", reference, re.MULTILINE))
    public = {name for package in (offline_rl, connectors, datasets, monitoring, off_policy)
              for name in package.__all__}
    missing = public - documented
    assert not missing, f"docs/api/ does not document {sorted(missing)}"


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES_WITH_CODE)
def test_the_code_blocks_run(page, tmp_path, monkeypatch, cartpole_data, ray_session):
    import ray

    blocks = [block for block in code_blocks(page) if block[0] in RUNNABLE]
    if not any(f"--out {RECORDED_DATASET}" in code for _, code, _ in blocks):
        (tmp_path / RECORDED_DATASET).parent.mkdir(parents=True)
        (tmp_path / RECORDED_DATASET).symlink_to(cartpole_data, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    env = {**os.environ, "RAY_ADDRESS": ray.get_runtime_context().gcs_address,
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    namespace: dict = {"__name__": "__docs__"}
    for lang, code, line in blocks:
        where = f"docs/{page}:{line}"
        if lang == "python":
            exec(compile(code, where, "exec"), namespace)
        else:
            ran = subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=tmp_path, env=env,
                                 capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S)
            assert ran.returncode == 0, f"{where} failed:\n{ran.stdout}\n{ran.stderr}"
