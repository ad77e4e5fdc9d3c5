#!/usr/bin/env python3
"""check_doc_citations.py — every section a source comment cites in the project's docs still exists.

Comments say why and cite the docs by file and title, e.g. `docs/GPU.md "Claimed items"`: a reader of the repo has
only docs/. A renamed or removed section leaves such a citation pointing nowhere, which no compiler notices. This
reads every quoted title that follows a docs/<NAME>.md in the source trees below (comment continuation markers
joined, so a citation may wrap) and accepts it when the cited file has a heading containing the title, or a line
led by it (after list marks, numbers and table bars: "**Title", "*Title", "Title:" or "Title."; backticks
ignored). Prints each unresolved citation with its file; exits 1 if there is one.

Usage: check_doc_citations.py [repository root] (default: this file's parent's parent).
"""
import glob
import os
import re
import sys

SOURCE_DIRS = ["kernels", "src", "tests", "bench", "tools", "abi", "scripts", "python/fp8moe", "python/tests",
               "cmake", "packaging"]
SOURCE_FILE = re.compile(r"\.(c|h|cu|cuh|cpp|py|sh|cmake)$|CMakeLists\.txt$")
CITATION = re.compile(r'docs/([A-Z]+\.md)((?:[^"\n]{0,6}"[^"\n]{2,100}"(?:,| and| or)?)+)')
TITLE = re.compile(r'"([^"\n]{2,100})"')
CONTINUATION = re.compile(r"\n\s*(?:\*|//|#)\s?")
LEADER = re.compile(r"^(?:[-|]|\d+\.|\s)*")


def resolves(doc_text, title):
    t = title.rstrip(".").strip().lower()
    for line in doc_text.split("\n"):
        low = line.lower()
        if line.startswith("#") and t in low:
            return True
        lead = LEADER.sub("", low, count=1)  # list marks, numbers and table bars
        if lead.startswith(("**" + t, "*" + t, t + ":", t + ".")):
            return True
    return False


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    docs = {}
    for path in glob.glob(os.path.join(root, "docs", "*.md")):
        with open(path, encoding="utf-8") as f:
            docs[os.path.basename(path)] = f.read().replace("`", "")
    checked = bad = 0
    for d in SOURCE_DIRS:
        for path in sorted(glob.glob(os.path.join(root, d, "**", "*"), recursive=True)):
            if not os.path.isfile(path) or not SOURCE_FILE.search(path) or "/venv/" in path:
                continue
            with open(path, encoding="utf-8", errors="replace") as f:
                flat = CONTINUATION.sub(" ", f.read())
            for m in CITATION.finditer(flat):
                doc = m.group(1)
                for title in TITLE.findall(m.group(2)):
                    checked += 1
                    if doc not in docs or not resolves(docs[doc], title):
                        bad += 1
                        print("unresolved: %s cites docs/%s \"%s\"" % (os.path.relpath(path, root), doc, title))
    if checked == 0:
        print("no citations found under %s: wrong root?" % root)
        return 1
    print("check_doc_citations: %d passed, %d failed" % (checked - bad, bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
