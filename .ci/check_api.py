"""The built documentation site documents every public name: each name of each public module's ``__all__`` has
its entry (an ``id`` equal to the name it is documented under, docs/_generate.py's ``api_anchors``) on some page.

    python .ci/check_api.py docs/_build/html
"""

import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "docs"))

import _generate  # noqa: E402


def main(root):
    ids = set()
    for folder, _, files in os.walk(root):
        for name in files:
            if name.endswith(".html"):
                with open(os.path.join(folder, name), encoding="utf-8") as f:
                    ids.update(re.findall(r'\bid="([^"]+)"', f.read()))
    anchors = _generate.api_anchors()
    missing = sorted(name for name, home in anchors.items() if home not in ids)
    for name in missing:
        print(f"check_api: {name} (documented as {anchors[name]}) has no entry in the site")
    print(f"check_api: {len(anchors) - len(missing)} of {len(anchors)} public names documented")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
