"""The web UI's files, shipped in the package (`cortex/http/ui`): an HTML
page, its script and its style sheet, read once and served as they are.
They hold no data (the page reads everything from the JSON API), so they
are served without the API token; the page asks for it when the API does."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

UI_PATH = "/ui/"
INDEX = "index.html"
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}
# The page runs only its own script and style sheet and talks only to this
# node: no inline scripts, nothing from elsewhere, never framed.
UI_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:;"
        " connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


@dataclass(frozen=True)
class Asset:
    body: bytes
    content_type: str


class UiAssets:
    """`/` is the page; `/ui/NAME` each shipped file."""

    def __init__(self) -> None:
        folder = resources.files("cortex.http").joinpath("ui")
        self._files = {
            entry.name: Asset(entry.read_bytes(), CONTENT_TYPES[suffix])
            for entry in folder.iterdir()
            if (suffix := "." + entry.name.rpartition(".")[2]) in CONTENT_TYPES
        }

    def find(self, path: str) -> Asset | None:
        if path == "/":
            return self._files.get(INDEX)
        if path.startswith(UI_PATH):
            return self._files.get(path.removeprefix(UI_PATH))
        return None
