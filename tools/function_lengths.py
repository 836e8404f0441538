#!/usr/bin/env python3
"""Lines per file and the longest functions, for the layout's before/after.

usage: tools/function_lengths.py FILE.cc... [--top N]

A function is a brace block that opens at the end of a line outside any
other block but a namespace or class (the style this tree is written in);
its length runs from that line to its closing brace. Good enough to rank,
not a C++ parser.
"""
import re
import sys


def functions(path):
    lines = open(path, encoding="utf-8", errors="replace").read().split("\n")
    out, stack = [], []  # stack: (kind, start line, name)
    for n, line in enumerate(lines, 1):
        code = re.sub(r'"([^"\\]|\\.)*"|//.*', "", line)
        for ch in code:
            if ch == "{":
                head = code.split("{")[0].strip() or (lines[n - 2].strip() if n > 1 else "")
                in_scopes = all(k == "scope" for k, _, _ in stack)
                if re.match(r"(namespace|extern)\b", head) or in_scopes and re.match(r"(class|struct|union|enum)\b", head):
                    kind = "scope"
                elif in_scopes:
                    kind = "function"
                else:
                    kind = "block"
                m = re.search(r"([\w:~]+)\s*\(", code) or re.search(r"([\w:~]+)\s*\(", lines[n - 2] if n > 1 else "")
                stack.append((kind, n, m.group(1) if m else head[:30]))
            elif ch == "}" and stack:
                kind, start, name = stack.pop()
                if kind == "function":
                    out.append((n - start + 1, name, start))
    return len(lines) - 1, out


def main(argv):
    top = 3
    if "--top" in argv:
        i = argv.index("--top")
        top = int(argv[i + 1])
        del argv[i:i + 2]
    for path in argv:
        total, fns = functions(path)
        fns.sort(reverse=True)
        longest = ", ".join(f"{name} {length}" for length, name, _ in fns[:top])
        print(f"{path}: {total} lines; longest: {longest}")


if __name__ == "__main__":
    main(sys.argv[1:])
