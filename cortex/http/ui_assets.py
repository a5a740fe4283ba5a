"""The web UI's files, shipped in the package (`cortex/http/ui`): an HTML
page, its scripts (ES modules) and its style sheet, read once and served as
they are; and the paths the page answers at (`/tasks`, `/tasks/ID`,
`/workflows`, `/workflows/ID`, `/nodes`, `/cluster`), each of which is
served the same page, its script showing the view the path names. They
hold no data (the page reads everything from the JSON API), so they are
served without the API token; the page asks for it when the API does."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

UI_PATH = "/ui/"
INDEX = "index.html"
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}
# Each path a view of the page lives at; an id is one path segment.
PAGE_PATH = re.compile(r"/(?:(?:tasks|workflows)(?:/[^/]+)?|nodes|cluster)")
TASKS_PAGE = "/tasks"
WORKFLOWS_PAGE = "/workflows"
# The page runs only its own scripts and style sheet and talks only to this
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
    """`/ui/NAME` each shipped file; `page` the HTML page every view path
    is served."""

    def __init__(self) -> None:
        folder = resources.files("cortex.http").joinpath("ui")
        self._files = {
            entry.name: Asset(entry.read_bytes(), CONTENT_TYPES[suffix])
            for entry in folder.iterdir()
            if (suffix := "." + entry.name.rpartition(".")[2]) in CONTENT_TYPES
        }
        self.page = self._files[INDEX]

    def find(self, path: str) -> Asset | None:
        if path.startswith(UI_PATH):
            return self._files.get(path.removeprefix(UI_PATH))
        return None


def is_page(path: str) -> bool:
    """Whether `path` is one the page shows a view at."""
    return PAGE_PATH.fullmatch(path) is not None
