"""search_code's worker, run as ``python -I -S search_worker.py`` with a JSON request on stdin.

It runs in its own process so that the environment can kill a pathological regular expression
with a timeout. Request: ``root``, ``pattern``, ``glob``, ``skip``, ``take``. Reply: ``total``
hits, ``files`` searched and the ``matches`` page (``path``, ``line`` 1-based, ``text``).
Symlinks are not followed, files over 1 MiB and binary files are skipped.
"""

import fnmatch
import json
import os
import re
import sys

MAX_BYTES = 1 << 20
MAX_TEXT = 200


def main():
    req = json.load(sys.stdin)
    root, skip, take = req["root"], req["skip"], req["take"]
    rx = re.compile(req["pattern"])
    glob = req["glob"].lstrip("./") or "*"
    alt = glob[3:] if glob.startswith("**/") else None
    total, files, matches = 0, 0, []
    for dirpath, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(names):
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            if not (fnmatch.fnmatchcase(rel, glob) or (alt and fnmatch.fnmatchcase(rel, alt))):
                continue
            if os.path.islink(full) or not os.path.isfile(full):
                continue
            if os.path.getsize(full) > MAX_BYTES:
                continue
            with open(full, "rb") as fh:
                data = fh.read()
            if b"\0" in data:
                continue
            files += 1
            for i, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
                if rx.search(line):
                    if skip <= total < skip + take:
                        text = line.strip()
                        matches.append(
                            {
                                "path": rel,
                                "line": i,
                                "text": text[:MAX_TEXT] + ("..." if len(text) > MAX_TEXT else ""),
                            }
                        )
                    total += 1
    json.dump({"total": total, "files": files, "matches": matches}, sys.stdout)


if __name__ == "__main__":
    main()
