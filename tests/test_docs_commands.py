"""Every command in the README and the docs runs, as a user following the page would run it.

Each `bti …` and `make …` line of a fenced block (a `$ ` line of a console block) is listed in ``COMMANDS`` with what it
promises: its exit code, the files it writes, a phrase it prints. A page's commands run in the page's order, in a
working directory of their own (holding `examples/` and `.venv/` as a clone does), so a later command reads what an
earlier one wrote. A long command runs on a small filter, and the entry says so; a command added to or dropped from the
docs without an entry here fails `test_every_documented_command_is_listed`. The docs' other checks (names, options,
paths) are in test_docs.py.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from .conftest import FIXTURES, ROOT, ZYGOTE

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^[ \t]*```([a-z]*)\n(.*?)^[ \t]*```", re.S | re.M)  # a fence in a list item is indented
COMMAND = re.compile(r"^(?:[A-Z_]+=\S+ )*(?:\.venv/bin/)?(?:bti|make)(?: |$)")
VENV = Path(sys.executable).parent.parent
# a page whose commands all appear on another page, run there: README's quick start is getting-started.md's first block
SAME_AS = {"README.md": "getting-started.md"}
REPORTS = ("results.jsonl", "junit.xml", "summary.md", "results.csv", "dashboard.html", "badge.svg", "badge.json")


@dataclass(frozen=True)
class Doc:
    """What a documented command promises. ``run`` replaces it (shell words, ``{root}`` and ``{cwd}`` filled in) where
    the documented form is long or cannot run here, and ``why`` says so; ``first`` names documented commands of the
    same page it reads the output of, run before it when the page shows them later."""

    code: int = 0
    files: tuple[str, ...] = ()
    says: str = ""
    run: str = ""
    why: str = ""
    first: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # what the page says to set up first ({examples}: its `pip install ./examples/…`)


def _in(out: str, *names: str) -> tuple[str, ...]:
    return tuple(f"{out}/{n}" for n in names)


SMALL = "on two cases: the documented form takes minutes"
EXAMPLES = (("PYTHONPATH", "{examples}"),)  # the page's `pip install ./examples/delegate` (and npu-device)
COMMANDS: dict[str, Doc] = {
    # README.md, getting-started.md
    "make run": Doc(files=_in("out", *REPORTS), run='make -C {root} run OUT={cwd}/out ARGS="-k op.add.* -k op.relu.*"',
                    why="the default suites take 75 s; two of their cases, through the same target"),
    "make test": Doc(says="tests collected", run='make -C {root} test ARGS="--collect-only -q" XDIST=',
                     why="this test runs inside `make test` itself (.ci/run): the same target collects every test here"),
    ".venv/bin/bti list --recipes": Doc(says="xnnpack-int8-static-per-channel\tavailable"),
    ".venv/bin/bti list -s smoke -r xnnpack": Doc(says="op.linear.fc[float32,static]@xnnpack"),
    ".venv/bin/bti run -s smoke -r portable -r xnnpack -o out-smoke": Doc(files=_in("out-smoke", *REPORTS)),
    ".venv/bin/bti run --op conv2d -r xnnpack-int8-static-per-channel": Doc(files=_in("out", *REPORTS)),
    ".venv/bin/bti run -s smoke -r xnnpack --bundle -o out-bundle":
        Doc(files=("out-bundle/programs/op.linear.fc_float32_static_@xnnpack.bpte",
                   "out-bundle/programs/op.linear.fc_float32_static_@xnnpack.pte")),
    ".venv/bin/bti bench out-bundle/programs/op.linear.fc_float32_static_@xnnpack.bpte": Doc(says="latency"),
    ".venv/bin/bti compare out-smoke/results.jsonl out/results.jsonl": Doc(says="new_failures\t0"),
    ".venv/bin/bti portal out out-smoke -o site": Doc(files=("site/index.html",)),
    # development.md
    'make test ARGS="tests/test_e2e.py -x"': Doc(run='make -C {root} test ARGS="tests/test_settings.py -x -p no:cacheprovider"',
                                                 says="passed", why="the same target on a file of quick tests"),
    "make test-pair PAIR=1.4": Doc(says=".venv-1.4/bin/python -m pytest", run="make -n -C {root} test-pair PAIR=1.4",
                                   why="`make test` runs this target at its end: its recipe is checked here"),
    "make docs": Doc(files=("site/index.html", "site/cli/index.html", "site/img/dashboard.png"), run="make -C {root} docs SITE={cwd}/site",
                     says="Documentation built", why="into this test's directory, not the clone's site-docs/"),
    # arm-coreml.md
    "bti run -r coreml -s ops --bundle -o out --allow-unverified":
        Doc(files=("out/programs/op.relu.rank1_float32_static_@coreml.bpte", *_in("out", *REPORTS)), says="nothing verified on coreml",
            run="bti run -r coreml -s ops --bundle -o out --allow-unverified -k op.relu.*", why=SMALL),
    # on Linux, which the page says it is not for: no Core ML runtime here, so each bundle fails to load (exit 1)
    "bti verify out/programs --runtime pybind": Doc(code=1, says="Failed to load method forward", files=("out-verify/results.jsonl",)),
    # backends.md (the examples installed with pip first, as the page says)
    "bti list --recipes -r examples/delegate/recipes/example-delegate.yaml": Doc(says="example-delegate\tavailable", env=EXAMPLES),
    "bti run -s smoke -r examples/delegate/recipes/example-delegate.yaml -r examples/delegate/recipes/example-delegate-int8.yaml "
    "-r portable": Doc(files=_in("out", *REPORTS), env=EXAMPLES),
    "BTI_RECIPE_PATH=examples/delegate/recipes bti run -s smoke -r example-delegate-int8 -o out-int8":
        Doc(files=_in("out-int8", *REPORTS), env=EXAMPLES),
    "bti run -s smoke -r examples/npu-device/recipes/torch-npu.yaml -r torch-cpu --baseline torch-cpu":
        Doc(files=_in("out", *REPORTS), env=EXAMPLES),
    # devices.md
    "bti bench out/programs/op.linear.fc_float32_static_@xnnpack.bpte --json bench.json":
        Doc(files=("bench.json",), says="latency", first=("bti run -s smoke -r xnnpack -r xnnpack-int8-static-per-channel --bundle -o out",)),
    "bti run -s smoke -r xnnpack -r xnnpack-int8-static-per-channel --bundle -o out": Doc(files=_in("out", *REPORTS)),
    "bti verify out/programs --runtime runner -o out-verify":
        Doc(files=_in("out-verify", "results.jsonl", "summary.md"), says="0 failed", run="bti verify out/programs --runtime pybind -o out-verify",
            why="through the pybindings: the runner is built and verified bit for bit against them in test_providers.py"),
    # github-actions.md
    "bti run -s smoke -r portable -o out-smoke": Doc(files=_in("out-smoke", *REPORTS)),
    "bti publish comment --results out-smoke/results.jsonl --key acme --dry-run -o out-smoke/comment.md":
        Doc(files=("out-smoke/comment.md",), says="would create it"),
    "bti publish check --results out-smoke/results.jsonl --name bti/acme --dry-run -o out-smoke/check.json":
        Doc(files=("out-smoke/check.json",), says="check 'bti/acme': success"),
    "bti publish badge --results out-smoke/results.jsonl -o out-smoke/badges --branch badges --repo acme/npu --dry-run":
        Doc(files=("out-smoke/badges/badge.svg", "out-smoke/badges/badge.json"), says="would commit"),
    # opdiff.md (the page's path/to/suite.yaml: an opdiff suite of bti's tests)
    "bti validate path/to/suite.yaml": Doc(),
    "bti list -s path/to/suite.yaml -r xnnpack": Doc(says="@xnnpack"),
    "bti run -s path/to/suite.yaml -r torch-cpu -r onnxruntime -r xnnpack --baseline torch-cpu":
        Doc(files=_in("out", *REPORTS), run="bti run -s path/to/suite.yaml -r torch-cpu -r onnxruntime -r xnnpack --baseline torch-cpu "
            "-k linear*", why=SMALL),
    "bti report out/results.jsonl --format opdiff": Doc(files=("out/opdiff.jsonl",)),
    # opinfo.md
    "bti run -s opinfo-ci -r torch-npu -r torch-cpu":
        Doc(files=_in("out", *REPORTS), run="bti run -s opinfo-ci -r torch-npu -r torch-cpu -k opinfo.abs.* -k opinfo.add.*", why=SMALL,
            env=(*EXAMPLES, ("BTI_RECIPE_PATH", "examples/npu-device/recipes"))),  # as the page says below the block
    "bti run -s opinfo -r torch-cuda": Doc(code=1, says="nothing verified", run="bti run -s opinfo -r torch-cuda -k opinfo.abs.* -o out-cuda",
                                           why="no GPU here: UNAVAILABLE, exit 1, as the page says (into out-cuda, keeping out/)"),
    "bti report out/results.jsonl --support": Doc(files=("out/support.md", "out/support.csv")),
    # upstream.md
    "bti run -s smoke -r xnnpack-int8-static-per-channel -o out-int8": Doc(files=_in("out-int8", *REPORTS)),
    "bti repro 'op.linear.fc[float32,static]@xnnpack-int8-static-per-channel' --results out-int8/results.jsonl -o repro.py":
        Doc(files=("repro.py",), says="repro.py"),
    "bti report out-int8/results.jsonl -o out-int8 --upstream-bugs": Doc(files=("out-int8/upstream-bugs.md",)),
    # zoo.md
    "bti run -s zoo -r torch-cpu -r xnnpack -j 2":
        Doc(files=_in("out", *REPORTS), run="bti run -s zoo -r torch-cpu -r xnnpack -j 2 -k zoo.timm.mobilenetv2_100*", why=SMALL),
    "bti run -s zoo-timm -r torch-compile":
        Doc(files=_in("out-timm", *REPORTS), run="bti run -s zoo-timm -r torch-compile -k zoo.timm.mobilenetv2_100* -o out-timm",
            why="one model (torch.compile of a list takes an hour), into out-timm, keeping out/ for the table below"),
    "bti run -s models-ci -r xnnpack": Doc(files=_in("out", *REPORTS), run="bti run -s models-ci -r xnnpack -k zoo.timm.*", why=SMALL),
    "bti report out/results.jsonl --models": Doc(files=("out/models.md", "out/models.csv")),
}


def documented(page: Path) -> list[str]:
    """The commands of a page's fenced blocks, in order, without their trailing comments."""
    out = []
    for lang, block in FENCE.findall(page.read_text(encoding="utf-8")):
        if lang not in ("", "bash", "sh", "console", "shell"):
            continue
        for line in block.splitlines():
            text = line.strip()
            if lang == "console":
                if not text.startswith("$ "):
                    continue  # the command's output
                text = text[2:]
            text = re.sub(r"\s+#.*$", "", text).strip()
            if COMMAND.match(text):
                out.append(text)
    return out


def test_every_documented_command_is_listed() -> None:
    found = {c for page in PAGES for c in documented(page)}
    assert len(found) >= 30
    assert found == set(COMMANDS), (sorted(found - set(COMMANDS)), sorted(set(COMMANDS) - found))
    for doc in COMMANDS.values():
        assert bool(doc.run) == bool(doc.why) and all(c in COMMANDS for c in doc.first)


def test_a_page_that_repeats_another_runs_there() -> None:
    """README's commands are run with getting-started.md's, which lists each of them: one that README alone shows
    fails here (drop the page from SAME_AS and it runs on its own)."""
    for name, other in SAME_AS.items():
        page = next(p for p in PAGES if p.name == name)
        theirs = documented(ROOT / "docs" / other)
        assert documented(page) and set(documented(page)) <= set(theirs), (name, set(documented(page)) - set(theirs))


def _argv(words: list[str]) -> tuple[list[str], dict[str, str]]:
    env = {}
    while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    if words[0] == "bti":
        words[0] = str(VENV / "bin" / "bti")
    return words, env


def _call(words: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    """The command's exit code and output. A `bti` command is forked from the worker's warm process (tests/zygote.py:
    ``python -m harness``, what the console script runs, as a new interpreter would with this environment and working
    directory) unless the environment changes what the warm process imported (a page's PYTHONPATH runs warm where it
    only adds modules, as the installed examples do: ``Zygote.usable``); `make` and the rest run as they are."""
    if Path(cwd, words[0]).resolve() == (VENV / "bin" / "bti").resolve():
        code, out, err = ZYGOTE.run_or_spawn(words[1:], cwd, env, 900, words)
        return code, out + err
    res = subprocess.run(words, cwd=cwd, env=env, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
    return res.returncode, res.stdout + res.stderr


def _run(command: str, cwd: Path, env: dict[str, str], examples: Path) -> None:
    doc = COMMANDS[command]
    words, own = _argv(shlex.split(doc.run.format(root=ROOT, cwd=cwd) if doc.run else command))
    setup = {name: value.format(examples=examples) for name, value in doc.env}
    before = {p: p.stat().st_mtime_ns for pattern in doc.files for p in cwd.glob(pattern)}
    code, said = _call(words, cwd, {**env, **setup, **own})
    assert code == doc.code, f"{command}: exit {code}, not {doc.code}\n{said[-3000:]}"
    assert doc.says in said, f"{command}: does not say {doc.says!r}\n{said[-3000:]}"
    for pattern in doc.files:  # written by this command, not left by an earlier one in the same directory
        fresh = [p for p in cwd.glob(pattern) if before.get(p) != p.stat().st_mtime_ns]
        assert fresh, f"{command}: wrote no {pattern}"


@pytest.mark.slow
@pytest.mark.parametrize("page", [p for p in PAGES if documented(p) and p.name not in SAME_AS], ids=lambda p: p.name)
def test_the_pages_commands_run(page: Path, tmp_path: Path, installed_examples: Path) -> None:
    """A page's commands, in its order, in a directory of its own that has what a clone has where the page needs it."""
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    (tmp_path / ".venv").symlink_to(VENV)
    (tmp_path / "path" / "to").mkdir(parents=True)
    for f in (FIXTURES / "opdiff").iterdir():  # opdiff.md's path/to/suite.yaml: bti's own opdiff suite, with its includes
        (tmp_path / "path" / "to" / f.name).symlink_to(f)
    (tmp_path / "path" / "to" / "suite.yaml").symlink_to(FIXTURES / "opdiff" / "all.yaml")
    env = {**os.environ, "BTI_CACHE_DIR": str(tmp_path / ".bti-cache")}
    for name in ("CI", "PYTHONPATH", "BTI_RECIPE_PATH"):  # only what the page itself sets up (Doc.env)
        env.pop(name, None)
    done: set[str] = set()
    for command in documented(page):
        for before in (*COMMANDS[command].first, command):
            if before not in done:
                _run(before, tmp_path, env, installed_examples)
                done.add(before)
    if page.name == "development.md":  # the site the docs build: the CLI reference is generated from the command
        cli = (tmp_path / "site" / "cli" / "index.html").read_text(encoding="utf-8")
        assert all(c in cli for c in ("bti run", "bti portal", "bti publish comment", "--rerun-failures", "--dry-run"))
