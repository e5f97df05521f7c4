# SPDX-License-Identifier: Apache-2.0

"""Checks that every lower bound pyproject.toml declares (the dependencies
and the library extras) is pinned at exactly that version in the floor
requirements, so that the floor suite tests what the package promises.

    python scripts/check_floors.py pyproject.toml tests/requirements-floor.txt
"""

from __future__ import annotations

import re
import sys
import tomllib

# The extras that name libraries the hooks wrap; "test" pins tools.
LIBRARY_EXTRAS = ("requests", "httpx", "grpcio")

_REQ = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:>=|~=)\s*([0-9][0-9.]*)\s*(?:,.*)?$")
_PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*(\S+)\s*$")


def _name(n: str) -> str:
    return re.sub(r"[-_.]+", "-", n).lower()


def _release(v: str) -> tuple[int, ...]:
    parts = [int(p) for p in v.split(".")]
    while parts and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def declared_floors(pyproject: dict[str, object]) -> dict[str, str]:
    project = pyproject["project"]
    assert isinstance(project, dict)
    reqs = list(project["dependencies"])
    for extra in LIBRARY_EXTRAS:
        reqs += project["optional-dependencies"][extra]
    floors = {}
    for r in reqs:
        m = _REQ.match(r)
        if m is None:
            raise SystemExit(f"check_floors: {r!r} states no lower bound (>= or ~=)")
        floors[_name(m.group(1))] = m.group(2)
    return floors


def pinned(lines: list[str]) -> dict[str, str]:
    pins = {}
    for line in lines:
        line = line.split("#", 1)[0]
        if line.strip():
            m = _PIN.match(line)
            if m is None:
                raise SystemExit(f"check_floors: {line.strip()!r} is not pinned with ==")
            pins[_name(m.group(1))] = m.group(2)
    return pins


def problems(floors: dict[str, str], pins: dict[str, str]) -> list[str]:
    out = []
    for name, floor in sorted(floors.items()):
        pin = pins.get(name)
        if pin is None:
            out.append(f"{name}: declared >= {floor}, not pinned in the floor requirements")
        elif _release(pin) != _release(floor):
            out.append(f"{name}: declared >= {floor}, the floor requirements pin {pin}")
    return out


def main(argv: list[str]) -> int:
    with open(argv[1], "rb") as f:
        floors = declared_floors(tomllib.load(f))
    with open(argv[2], encoding="utf-8") as f:
        pins = pinned(f.read().splitlines())
    bad = problems(floors, pins)
    for p in bad:
        print(f"check_floors: {p}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
