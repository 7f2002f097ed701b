"""Every link inside the built documentation site resolves: each relative ``href`` / ``src`` of every HTML page
names a file of the site and, with a ``#fragment``, an ``id`` on that page. External links are not followed
(CI has no network to check them against).

    python .ci/check_links.py docs/_build/html
"""

import os
import re
import sys
from html.parser import HTMLParser
from urllib.parse import unquote, urlsplit


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        for key, value in attrs:
            if key == "id" or (key == "name" and tag == "a"):
                self.ids.add(value)
            elif key in ("href", "src") and value:
                self.links.append(value)


def main(root):
    pages = {}
    for folder, _, files in os.walk(root):
        if os.path.relpath(folder, root).split(os.sep)[0] in ("_static", "_sources"):
            continue  # (the theme's templates and the pages' sources: not pages of the site)
        for name in files:
            if name.endswith(".html"):
                path = os.path.join(folder, name)
                parser = _Links()
                with open(path, encoding="utf-8") as f:
                    parser.feed(f.read())
                pages[os.path.normpath(path)] = parser
    broken = []
    for path, parser in sorted(pages.items()):
        for link in parser.links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith(("mailto:", "javascript:", "data:")):
                continue  # external: not followed
            target = os.path.normpath(os.path.join(os.path.dirname(path), unquote(parts.path))) if parts.path else path
            if parts.path.endswith("/") or os.path.isdir(target):
                target = os.path.join(target, "index.html")
            if not os.path.exists(target):
                broken.append(f"{os.path.relpath(path, root)}: {link} (no file {os.path.relpath(target, root)})")
            elif parts.fragment and target in pages and unquote(parts.fragment) not in pages[target].ids:
                broken.append(f"{os.path.relpath(path, root)}: {link} (no id {parts.fragment!r} there)")
    for line in broken:
        print("broken link:", line)
    print(f"check_links: {len(pages)} pages, {sum(len(p.links) for p in pages.values())} links, {len(broken)} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
