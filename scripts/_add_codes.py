import ast, sys
path, pairs = sys.argv[1], sys.argv[2:]
codes = {int(p.split("=")[0]): p.split("=")[1] for p in pairs}
text = open(path, encoding="utf-8").read()
lines = [l.encode() for l in text.splitlines(keepends=True)]
tree = ast.parse(text)
edits = []
for node in ast.walk(tree):
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Wrong" and node.lineno in codes:
        if any(k.arg == "code" for k in node.keywords) or len(node.args) > 1:
            continue
        edits.append((node.end_lineno, node.end_col_offset - 1, codes.pop(node.lineno)))
for ln, col, code in sorted(edits, reverse=True):
    line = lines[ln - 1]
    add = f', "{code}"'.encode()
    if len(line.rstrip(b"\n").decode()) + len(add) > 79:
        first = lines[[n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n, "end_lineno", 0) == ln and isinstance(n.func, ast.Name) and n.func.id == "Wrong"][0] - 1].decode()
        indent = " " * (first.index("Wrong(") + 6)
        lines[ln - 1] = line[:col] + b",\n" + indent.encode() + f'"{code}"'.encode() + line[col:]
    else:
        lines[ln - 1] = line[:col] + add + line[col:]
open(path, "wb").write(b"".join(lines))
print("unused:", codes)
