"""The docs site (docs/, mkdocs.yml): built strictly, and checked against what the code does, wherever a test can
tell: commands, options, recipes, settings, files, the action's inputs."""

from __future__ import annotations

import re
import subprocess
import sys

import click

from .conftest import ROOT

DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
SPANS = re.compile(r"`([^`\n]+)`")


def _spans() -> list[tuple[str, str]]:
    """(page, text) for every inline code span and every line of a fenced block, README included."""
    out = []
    for page in [*PAGES, ROOT / "README.md", ROOT / "examples" / "README.md"]:
        text = page.read_text(encoding="utf-8")
        fences = re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S)
        prose = re.sub(r"```[a-z]*\n.*?```", "", text, flags=re.S)
        out += [(page.name, s) for s in SPANS.findall(prose)]
        out += [(page.name, line.strip()) for block in fences for line in block.splitlines()]
    return out


def test_readme_is_a_short_front_door() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.encode()) <= 12 * 1024
    assert "make run" in readme and "make test" in readme
    for link in re.findall(r"\]\(([^)#]+)", readme):  # every link to a file of the repository resolves
        if not link.startswith("http"):
            assert (ROOT / link).exists(), link


def test_generated_action_table_is_current() -> None:
    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_docs.py"), "--check"])
    assert res.returncode == 0, "docs/github-actions.md's action table is stale: run python scripts/gen_docs.py"


def _commands() -> dict[str, click.Command]:
    from harness.cli import cli

    out: dict[str, click.Command] = {}

    def walk(group: click.Group, prefix: str) -> None:
        for name, cmd in group.commands.items():
            out[f"{prefix} {name}".strip()] = cmd
            if isinstance(cmd, click.Group):
                walk(cmd, f"{prefix} {name}")

    walk(cli, "")
    return out


def test_every_command_and_option_in_the_docs_exists() -> None:
    """`bti X --opt` in any page: X is a command and --opt one of its options."""
    commands = _commands()
    wrong = []
    checked = 0
    for page, span in _spans():
        m = re.match(r"(?:\$ )?(?:\.venv/bin/)?bti ((?:[a-z][a-z-]*)(?: [a-z][a-z-]*)?)", span)
        if not m:
            continue
        words = m.group(1).split()
        name = " ".join(words) if " ".join(words) in commands else words[0]
        if name not in commands:
            if words[0] not in ("is", "takes", "runs", "does", "never", "keeps", "uses", "writes", "itself"):
                wrong.append(f"{page}: `{span}`: no command bti {words[0]}")
            continue
        checked += 1
        opts = {o for p in commands[name].params for o in (*p.opts, *p.secondary_opts)} | {"--help", "-h"}
        for opt in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*|-[a-zA-Z])\b", span[m.end():]):
            if opt not in opts:
                wrong.append(f"{page}: `{span}`: bti {name} has no option {opt}")
    assert checked > 50  # the check does look at the docs
    assert not wrong, "\n".join(wrong)


def test_every_recipe_and_suite_named_in_a_command_exists() -> None:
    from harness.recipes import available_recipe_files
    from harness.suites import suite_names

    examples = {p.stem for p in (ROOT / "examples").glob("*/recipes/*.yaml")}  # the examples' own recipes
    recipes = set(available_recipe_files()) | examples
    import tomllib

    suites = set(suite_names())
    for project in (ROOT / "examples").glob("*/pyproject.toml"):  # the examples' own case sources, once installed
        suites |= set(tomllib.loads(project.read_text())["project"].get("entry-points", {}).get("bti.case_sources", {}))
    wrong = []
    for page, span in _spans():
        if not re.match(r"(?:\$ )?(?:\.venv/bin/)?bti ", span):
            continue
        for flag, value in re.findall(r"(?:^|\s)(-r|--recipe|-s|--suite|--baseline|--control) ([\w./-]+)", span):
            if "/" in value or value.endswith((".yaml", ".yml")) or value.isupper() or value in ("RECIPE", "NAME", "mybackend"):
                continue
            known = suites if flag in ("-s", "--suite") else recipes
            if value not in known:
                wrong.append(f"{page}: `{span}`: no {'suite' if flag in ('-s', '--suite') else 'recipe'} {value}")
    assert not wrong, "\n".join(wrong)


def test_every_repository_path_in_the_docs_exists() -> None:
    roots = ("harness/", "tests/", "benchmarks/", "scripts/", "examples/", "recipes/", "constraints/", ".github/", "workflows/", "docs/")
    wrong = []
    for page, span in _spans():
        for token in span.split():
            path = token.strip("`,;:()").split("::")[0].split("#")[0]
            if path.startswith(roots) and not any(c in path for c in "*<>{}…") and not (ROOT / path).exists():
                wrong.append(f"{page}: {path}")
    assert not wrong, "\n".join(sorted(set(wrong)))


def test_settings_page_names_exactly_the_variables_settings_reads() -> None:
    code = (ROOT / "harness" / "settings.py").read_text(encoding="utf-8")
    read = set(re.findall(r'(?:env\.get\(|_seconds\(env, |_gigabytes\(env, )"([A-Z_]+)"', code))
    page = (DOCS / "settings.md").read_text(encoding="utf-8")
    table = "\n".join(line.split("|")[3] for line in page.split("## ", 1)[0].splitlines() if line.startswith("| `"))
    documented = set(re.findall(r"`([A-Z][A-Z_]+)`", table))
    assert read and read == documented, (read - documented, documented - read)


def test_every_python_name_in_the_docs_exists() -> None:
    """`harness.settings.current()`, `harness.backends.BaseBackend`: each dotted name resolves, module then attributes."""
    import importlib

    wrong, checked = [], 0
    for page, span in _spans():
        for name in re.findall(r"(?<![\w/.])(harness(?:\.\w+)+)", span):
            parts = name.split(".")
            for cut in range(len(parts), 0, -1):
                try:
                    obj = importlib.import_module(".".join(parts[:cut]))
                    break
                except ImportError:
                    continue
            try:
                for attr in parts[cut:]:
                    obj = getattr(obj, attr)
                checked += 1
            except AttributeError:
                wrong.append(f"{page}: {name}")
    assert checked >= 5 and not wrong, wrong


def test_the_backends_guide_shows_the_example_delegate_as_it_is() -> None:
    """The guide's listing of examples/delegate (code and recipes) is the shipped file, which test_examples.py runs."""
    page = (DOCS / "backends.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```(?:python|yaml)\n(.*?)```", page, flags=re.S)
    code = (ROOT / "examples" / "delegate" / "bti_example_delegate" / "__init__.py").read_text(encoding="utf-8")
    assert code.split('"""', 2)[2].lstrip("\n") in blocks  # whole, but for the module docstring
    for recipe in ("example-delegate.yaml", "example-delegate-int8.yaml"):
        assert (ROOT / "examples" / "delegate" / "recipes" / recipe).read_text(encoding="utf-8") in blocks, recipe


def test_the_default_tolerances_table_is_the_codes() -> None:
    from harness.judge import QUANTIZED_DEFAULTS
    from harness.recipes import DEFAULT_TOLERANCES

    page = (DOCS / "recipes.md").read_text(encoding="utf-8").split("## What a recipe is held to when it does not say", 1)[1]
    rows = page.split("\n\n", 2)[1]
    def e(v: float) -> str:  # 1e-4 as the page writes it
        return f"{v:.0e}".replace("e-0", "e-")

    for dtype in ("float32", "float16", "bfloat16"):
        tol = DEFAULT_TOLERANCES[dtype]
        assert tol["atol"] == tol["rtol"] and f"`{dtype}` {'atol/rtol ' if dtype == 'float32' else ''}{e(tol['atol'])}" in rows
    assert DEFAULT_TOLERANCES["int"] == {"atol": 0.0, "rtol": 0.0} and "integers and `bool` exact (0)" in rows
    q = {**QUANTIZED_DEFAULTS, **DEFAULT_TOLERANCES["quantized"]}
    assert q["atol"] == q["rtol"] and f"`qtol: {q['qtol']:g}`, `atol`/`rtol` {e(q['atol'])}, `sqnr_db: {q['sqnr_db']:g}`" in rows


def test_the_architecture_page_names_every_module() -> None:
    """docs/architecture.md's layout table ("The rooms") names every module of harness/: by its path, or by its file name
    in the row of its directory (a package's __init__.py and __main__.py aside), so a module added without a room fails."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    rows = text.split("## The rooms", 1)[1].split("\n## ", 1)[0].splitlines()
    missing = []
    for path in sorted((ROOT / "harness").rglob("*.py")):
        rel, name = str(path.relative_to(ROOT)), path.name
        if name in ("__init__.py", "__main__.py") and "harness/report" not in rel and "harness/cli" not in rel:
            continue
        room = f"`{path.parent.relative_to(ROOT)}/" if path.parent != ROOT / "harness" else "`harness/"
        named = any(f"`{rel}`" in row or (f"`{name}`" in row and room in row.split("|")[1]) for row in rows)
        if not named:
            missing.append(rel)
    assert not missing, f"modules without a room in docs/architecture.md: {missing}"
    assert re.search(r"\| `harness/report/` \|", text)


def test_reports_never_list_statuses() -> None:
    """docs/architecture.md: "A report asks status.did_not_run or status.group, never a list of statuses". No module of
    harness/report/ writes a tuple, list or set of two or more statuses; a table keyed by statuses names every one."""
    import ast

    from harness.status import Status

    names = {s.value for s in Status}

    def status_of(node: ast.AST) -> str | None:
        if isinstance(node, ast.Constant) and node.value in names:
            return str(node.value)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "Status" and node.attr in names:
            return node.attr
        return None

    found = []
    for path in sorted((ROOT / "harness" / "report").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                listed = [s for s in map(status_of, node.elts) if s]
                if len(listed) >= 2:
                    found.append(f"{path.name}:{node.lineno}: {listed}")
            elif isinstance(node, ast.Dict):
                keys = {s for s in map(status_of, [k for k in node.keys if k is not None]) if s}
                if keys and keys != names:
                    found.append(f"{path.name}:{node.lineno}: a table of {len(keys)} of {len(names)} statuses")
    assert not found, found


def test_the_pipeline_reads_what_sources_declare() -> None:
    """docs/architecture.md: the pipeline, the verdict, the judge and the runner read a case source's ``Built`` and
    ``Judgement`` (and the source itself) by their declared fields, never by ``getattr`` with a default. The registry's
    ``register`` and its adapter of older sources are where a plugin's members are checked, so they may ask."""
    import ast

    probed = []
    for rel in ("harness/stages.py", "harness/verdict.py", "harness/judge.py", "harness/suites/__init__.py",
                *(str(p.relative_to(ROOT)) for p in sorted((ROOT / "harness" / "runner").glob("*.py")))):
        tree = ast.parse((ROOT / rel).read_text())
        checkers = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name in ("register", "_WithDefaults")]
        exempt = {id(n) for c in checkers for n in ast.walk(c)}
        for node in ast.walk(tree):
            if id(node) in exempt:
                continue
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr"):
                subject = ast.unparse(node.args[0]) if node.args else ""
                if any(word in subject for word in ("built", "judgement", "src", "source")):
                    probed.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
    assert not probed, probed
