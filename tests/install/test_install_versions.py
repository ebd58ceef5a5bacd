"""Every reference to the controller's image or chart names the release being built.

examples/nginx.yaml once ran `ownego/runpod-pool-controller:0.2.1` for `rpp nginx-reloader`,
a command 0.2.1 does not have: whoever followed install.md got an nginx that never served.
So the files a user copies from (examples/, deploy/, docs/, README.md and both charts) are
scanned for the image (`ownego/runpod-pool-controller:TAG`), the charts' OCI artifacts
(`ghcr.io/ownego/charts/runpod-pool-controller:TAG`, and `runpod-pool-controller-crd`, the
CRD's chart) and every Helm command on either chart (`oci://ghcr.io/ownego/charts/
runpod-pool-controller ... --version V`), and each must name rpp.__version__, as must both
charts' version and appVersion. A new file or a new stale line fails here without anyone
listing it.

One exception, and only where it belongs: docs/upgrading.md may name the version its
"## From X to Y" section upgrades from (X), and Y must be the release being built.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from rpp import __version__

ROOT = Path(__file__).parents[2]
CHART = ROOT / "helm" / "runpod-pool-controller"
CRD_CHART = ROOT / "helm" / "runpod-pool-controller-crd"
UPGRADING = "docs/upgrading.md"
TEXT_SUFFIXES = {".md", ".yaml", ".yml", ".json", ".txt", ".tpl"}
PLACEHOLDERS = {"<version>"}  # install.md explains the tag scheme with it

_TAG = r"(?P<version>[^\s\"'`),\]}]+)"
IMAGE = re.compile(r"(?<![\w.-])ownego/runpod-pool-controller:" + _TAG)
CHART_ARTIFACT = re.compile(r"ghcr\.io/ownego/charts/runpod-pool-controller(-crd)?:" + _TAG)
CHART_COMMAND = re.compile(
    r"oci://ghcr\.io/ownego/charts/runpod-pool-controller(-crd)?(?![\w:/-])"
)
VERSION_FLAG = re.compile(r"--version[ =]+" + _TAG)


@dataclass(frozen=True)
class Reference:
    path: str
    line: int
    what: str
    version: str | None  # None: a Helm command on the chart without --version

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what} {self.version or '(no --version)'}"


def scanned_files() -> list[Path]:
    roots = [ROOT / "examples", ROOT / "deploy", ROOT / "docs", CHART, CRD_CHART]
    files = [ROOT / "README.md"]
    for root in roots:
        files += sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in TEXT_SUFFIXES)
    return files


def _command_end(text: str, start: int) -> int:
    """Where the Helm command starting at `start` ends: its inline code's closing backtick
    or a blank line; in a fenced block, also a line that does not continue with `\\`."""
    fenced = text.count("```", 0, start) % 2 == 1
    end = len(text)
    for stop in ("`", "\n\n"):
        found = text.find(stop, start)
        end = min(end, found) if found >= 0 else end
    if fenced:
        for match in re.finditer(r"(?<!\\)\n", text[start:end]):
            return start + match.start()
    return end


def references(path: str, text: str) -> list[Reference]:
    """Every image, chart artifact and chart command in `text`, with the version it names."""

    def line(offset: int) -> int:
        return text.count("\n", 0, offset) + 1

    found = [
        Reference(path, line(m.start()), what, m["version"])
        for what, pattern in (("image", IMAGE), ("chart artifact", CHART_ARTIFACT))
        for m in pattern.finditer(text)
    ]
    for m in CHART_COMMAND.finditer(text):
        flag = VERSION_FLAG.search(text, m.end(), _command_end(text, m.end()))
        found.append(Reference(path, line(m.start()), "helm command", flag and flag["version"]))
    return found


def upgrade_from() -> re.Pattern[str]:
    """The version docs/upgrading.md upgrades from, as a pattern (0.2.x: any 0.2 patch)."""
    headings = re.findall(r"^## From (\S+) to (\S+)$", (ROOT / UPGRADING).read_text(), re.M)
    assert headings, f"{UPGRADING} has no '## From X to Y' section"
    sources = []
    for source, target in headings:
        assert target == __version__, f"{UPGRADING}: '## From {source} to {target}'"
        sources.append(re.escape(source).replace(r"\.x", r"\.\d+"))
    return re.compile("|".join(sources))


def stale(refs: list[Reference], *, upgrading_from: re.Pattern[str]) -> list[str]:
    out = []
    for ref in refs:
        if ref.version == __version__ or ref.version in PLACEHOLDERS:
            continue
        older = ref.version is not None and upgrading_from.fullmatch(ref.version)
        if ref.path == UPGRADING and older:
            continue
        out.append(str(ref))
    return out


def all_references() -> list[Reference]:
    return [
        ref
        for path in scanned_files()
        for ref in references(str(path.relative_to(ROOT)), path.read_text())
    ]


def test_every_image_and_chart_reference_names_the_release_being_built() -> None:
    refs = all_references()
    assert stale(refs, upgrading_from=upgrade_from()) == []
    # The scan really reads what users copy: each of these names the image or the chart.
    holding = {ref.path for ref in refs}
    assert {
        "examples/nginx.yaml",
        "deploy/controller.yaml",
        "docs/install.md",
        "docs/upgrading.md",
        "docs/rehearsal.md",
        "helm/runpod-pool-controller/Chart.yaml",
        "helm/runpod-pool-controller/README.md",
        "helm/runpod-pool-controller-crd/README.md",
    } <= holding


@pytest.mark.parametrize("chart", [CHART, CRD_CHART], ids=lambda chart: chart.name)
def test_the_chart_is_versioned_as_the_package(chart: Path) -> None:
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    assert (meta["version"], meta["appVersion"]) == (__version__, __version__)


def test_the_scan_finds_a_stale_reference_wherever_it_is_written() -> None:
    """Guards the guard: the forms a stale version takes in these files."""
    old = "0.2.1"
    text = (
        f"image: ownego/runpod-pool-controller:{old}\n"
        f"docker run ownego/runpod-pool-controller:{old} validate\n"
        f"cosign verify ghcr.io/ownego/charts/runpod-pool-controller:{old}\n"
        "`helm upgrade rpp oci://ghcr.io/ownego/charts/runpod-pool-controller\n"
        f"   -n runpod --version {old} -f values.yaml`\n\n"
        "```sh\nhelm install rpp oci://ghcr.io/ownego/charts/runpod-pool-controller \\\n"
        f"  -n runpod --version={old}\n"
        "helm pull oci://ghcr.io/ownego/charts/runpod-pool-controller\n"
        f"helm show values x --version {__version__}\n```\n"
        f"helm upgrade --install rpp-crd oci://ghcr.io/ownego/charts/runpod-pool-controller-crd"
        f" -n runpod --version {old}\n\n"
        f"cosign verify ghcr.io/ownego/charts/runpod-pool-controller-crd:{old}\n"
    )
    upgrading_from = re.compile(r"0\.2\.\d+")
    found = stale(references("docs/install.md", text), upgrading_from=upgrading_from)
    assert found == [
        f"docs/install.md:1: image {old}",
        f"docs/install.md:2: image {old}",
        f"docs/install.md:3: chart artifact {old}",
        f"docs/install.md:15: chart artifact {old}",  # the CRD's chart
        f"docs/install.md:4: helm command {old}",
        f"docs/install.md:8: helm command {old}",
        # The next command's --version is not this one's.
        "docs/install.md:10: helm command (no --version)",
        f"docs/install.md:13: helm command {old}",  # the CRD's chart
    ]
    # The upgrade guide may name the version it upgrades from, and only that one.
    assert stale(references(UPGRADING, text), upgrading_from=upgrading_from) == [
        f"{UPGRADING}:10: helm command (no --version)"
    ]
    assert stale(
        references(UPGRADING, "ownego/runpod-pool-controller:0.1.9"),
        upgrading_from=upgrading_from,
    ) == [f"{UPGRADING}:1: image 0.1.9"]
