"""What the operator docs promise matches the code: exit codes, Dockerfile snippets that build,
commands that exist, and no drafts left."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from picobridge import exit_codes
from picobridge.cli.parser import build_parser

ROOT = Path(__file__).resolve().parents[2]
OPERATOR_DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def codes() -> set[int]:
    return {v for k, v in vars(exit_codes).items() if k.isupper() and isinstance(v, int)}


@pytest.mark.parametrize("doc", ["README.md", "docs/operations.md"])
def test_the_exit_code_tables_list_every_code(doc: str) -> None:
    text = (ROOT / doc).read_text(encoding="utf-8")
    table = re.findall(r"^\| (\d+) \| .+ \|$", text, flags=re.M)
    assert sorted(map(int, table)) == sorted(codes())


@pytest.mark.parametrize("doc", OPERATOR_DOCS, ids=lambda p: p.name)
def test_no_drafts(doc: Path) -> None:
    assert not re.search(r"^Draft of", doc.read_text(encoding="utf-8"), flags=re.M)


def test_dockerfile_snippets_put_comments_on_lines_of_their_own() -> None:
    found = 0
    for doc in OPERATOR_DOCS:
        for block in re.findall(r"```dockerfile\n(.*?)```", doc.read_text(encoding="utf-8"),
                                flags=re.S):
            for line in block.splitlines():
                found += 1
                # After an instruction a `#` is an argument (COPY would copy a file named "#").
                assert line.lstrip().startswith("#") or " #" not in line, line
    assert found


def test_the_quick_start_commands_exist() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    parser = build_parser()
    shell = "\n".join(re.findall(r"```sh\n(.*?)```", readme, flags=re.S))
    commands = [line.split("  #")[0].strip()
                for line in re.findall(r"^(?:sudo -u picobridge )?picobridge (.+)$", shell,
                                       flags=re.M)]
    assert any(c.startswith("init") for c in commands)
    assert any("chat" in c and "--echo" in c for c in commands)
    for command in commands:
        parser.parse_args(command.split())  # exits (fails the test) on an unknown word


# docs/architecture.md's "What lives where" rows and the folders they describe.
PLACES = {
    "contract": "bridge/contract", "core": "bridge/core", "agent": "bridge/agent",
    "store": "bridge/store", "ops": "bridge/ops", "cli": "bridge/cli",
    **{f"adapters/{p.name}": f"adapters/{p.name}"
       for p in sorted((ROOT / "adapters").iterdir()) if (p / "__init__.py").exists()},
}


def test_the_architecture_names_every_module_where_it_lives() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `([\w/]+)/` \| (.+) \|$", text, flags=re.M))
    assert set(PLACES) <= set(rows), f"no row for {sorted(set(PLACES) - set(rows))}"
    unnamed = {
        place: missing for place, folder in PLACES.items()
        if (missing := sorted(
            p.stem for p in (ROOT / folder).glob("*.py")
            if p.stem != "__init__" and f"`{p.stem}`" not in rows[place]))}
    assert unnamed == {}, f"docs/architecture.md does not say where these live: {unnamed}"
