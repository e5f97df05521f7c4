# SPDX-License-Identifier: Apache-2.0

"""Builds the sdist and the wheel as a release would (python -m build: the
wheel from the sdist), checks what the wheel holds, installs it with its
requests extra and the OpenTelemetry SDK and instrumentations a user adds
into a new venv in a temporary directory outside the source tree, and runs
scripts/artifact_app.py there, from a directory where the checkout is not
importable.

    .venv/bin/python scripts/artifact_test.py

PYTHON picks the interpreter of the new venv (default: python3); KEEP=1
keeps the temporary directory.
"""

from __future__ import annotations

import email.parser
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROJECT = HERE.parent
PACKAGE = "errorownership_hooks"
# What the artifact app needs besides the wheel, at the versions the test
# extra pins.
USER_PACKAGES = ("opentelemetry-sdk", "opentelemetry-instrumentation-wsgi", "opentelemetry-instrumentation-requests")


def run(*cmd: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
    print("+ " + " ".join(str(c) for c in cmd), flush=True)
    subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, check=True)


def version() -> str:
    text = (PROJECT / "src" / PACKAGE / "version.py").read_text(encoding="utf-8")
    m = re.search(r'^__version__ = "([^"]+)"$', text, re.M)
    assert m is not None, "version.py states no __version__"
    return m.group(1)


def wheel_problems(wheel: Path, ver: str) -> list[str]:
    """The wheel holds the package's modules, py.typed and the LICENSE, and
    nothing else; its metadata says what PyPI shows."""
    dist_info = f"errorownership_hooks-{ver}.dist-info"
    modules = {f"{PACKAGE}/{p.name}" for p in (PROJECT / "src" / PACKAGE).iterdir() if p.suffix == ".py"}
    want = modules | {
        f"{PACKAGE}/py.typed",
        f"{dist_info}/METADATA",
        f"{dist_info}/WHEEL",
        f"{dist_info}/RECORD",
        f"{dist_info}/licenses/LICENSE",
        # The instrumentor opentelemetry-instrument loads (instrumentor.py).
        f"{dist_info}/entry_points.txt",
    }
    with zipfile.ZipFile(wheel) as z:
        print(f"{'size':>8}  name")
        for info in z.infolist():
            print(f"{info.file_size:>8}  {info.filename}")
        got = set(z.namelist())
        license_text = z.read(f"{dist_info}/licenses/LICENSE") if f"{dist_info}/licenses/LICENSE" in got else b""
        meta = email.parser.BytesParser().parsebytes(z.read(f"{dist_info}/METADATA"))
    out = [f"the wheel lacks {n}" for n in sorted(want - got)]
    out += [f"the wheel holds {n}, which it should not" for n in sorted(got - want)]
    root_license = PROJECT.parent / "LICENSE"
    if root_license.exists() and license_text != root_license.read_bytes():
        out.append("the wheel's LICENSE differs from the repository's")
    expect = {
        "Name": "errorownership-hooks",
        "Version": ver,
        "License-Expression": "Apache-2.0",
        "License-File": "LICENSE",
        "Requires-Python": ">=3.11",
    }
    for field, value in expect.items():
        if meta.get(field) != value:
            out.append(f"METADATA {field}: {meta.get(field)!r}, want {value!r}")
    urls = meta.get_all("Project-URL") or []
    for label in ("Homepage", "Source", "Issues"):
        if not any(u.startswith(label + ", https://") for u in urls):
            out.append(f"METADATA has no Project-URL {label}")
    if meta.get_content_type() != "text/plain" or "text/markdown" not in (meta.get("Description-Content-Type") or ""):
        out.append("METADATA has no markdown description (the README)")
    return out


def sdist_problems(sdist: Path) -> list[str]:
    """The sdist holds what builds and tests the wheel (examples/: the
    README's snippets, which a test compiles): no venv, benchmark
    or CI scripts."""
    with tarfile.open(sdist) as t:
        names = [n.split("/", 1)[1] for n in t.getnames() if "/" in n]
    allowed = ("src/", "tests/", "examples/", "README.md", "LICENSE", "pyproject.toml", "PKG-INFO", ".gitignore")
    return [f"the sdist holds {n}, which it should not" for n in names if not n.startswith(allowed)]


def user_pins() -> list[str]:
    with open(PROJECT / "pyproject.toml", "rb") as f:
        test_extra = tomllib.load(f)["project"]["optional-dependencies"]["test"]
    pins = {re.split(r"\s*==\s*", r)[0]: r.replace(" ", "") for r in test_extra}
    return [pins[p] for p in ("requests", *USER_PACKAGES)]


def main() -> int:
    ver = version()
    tmp = Path(tempfile.mkdtemp(prefix="errorownership-hooks-wheel-"))
    if tmp.resolve().is_relative_to(PROJECT.parent.resolve()):
        raise SystemExit(f"artifact test: {tmp} is inside the source tree")
    try:
        run(sys.executable, "-m", "build", "--outdir", tmp / "dist", PROJECT)
        (wheel,) = (tmp / "dist").glob("*.whl")
        (sdist,) = (tmp / "dist").glob("*.tar.gz")
        print(f"artifact test: {wheel.name}")
        problems = wheel_problems(wheel, ver) + sdist_problems(sdist)
        for p in problems:
            print(f"FAIL {p}")
        if problems:
            return 1

        python = os.environ.get("PYTHON", "python3")
        venv = tmp / "venv"
        run(python, "-m", "venv", venv)
        pip = venv / "bin" / "pip"
        run(pip, "install", "-q", "--disable-pip-version-check", f"{wheel}[requests]", *user_pins())
        app_dir = tmp / "app"
        app_dir.mkdir()
        shutil.copy(HERE / "artifact_app.py", app_dir)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
        # -I: neither the script's directory nor PYTHON* variables on sys.path.
        run(venv / "bin" / "python", "-I", "artifact_app.py", cwd=app_dir, env=env)
        return 0
    except subprocess.CalledProcessError as e:
        print(f"artifact test: {e}")
        return 1
    finally:
        if os.environ.get("KEEP"):
            print(f"artifact test: kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
