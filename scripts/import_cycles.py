#!/usr/bin/env python3
"""Fails on an import circle between the files of a Rust crate.

    scripts/import_cycles.py CRATE_DIR...          # exit 0: no circle; 1: each circle printed
    scripts/import_cycles.py --edges CRATE_DIR     # every file and the files it imports

A crate's files are the modules its root declares with `mod name;`, found as `name.rs` or
`name/mod.rs`; `src/lib.rs`, `src/main.rs` and each binary of `src/bin/` are roots, each checked
on its own. File A *imports* file B when A names an item, by a path, that B defines:

| path in A                                   | resolves from                                |
|---------------------------------------------|----------------------------------------------|
| `crate::m::n::X` (a `use` or any code)      | the crate root                               |
| `super::X`, `self::X`                       | A's module (or the inline `mod {}` it is in) |
| `m::X` where A declares `mod m`             | A's module                                   |

A path is followed through the modules it names and then through re-exports (`pub use`, globs
included) to the file that defines its last item, so a facade (`lib.rs`'s `pub use error::Error`)
is not where `crate::Error` comes from: `error.rs` is. Declaring a module is not importing it, and
a file's references to itself do not count. A circle is a strongly connected set of two or more
files; each is printed with its files and, for every file, the files of the circle it imports and
the first line that does.

Dependency-free on purpose (Python's standard library): it parses what the crates here write, not
all of Rust (no `#[path]`, no macros that expand to paths, `$crate` ignored).
"""
import os
import re
import sys

KEYWORDS_WITH_NAME = re.compile(
    r"\b(?:fn|struct|enum|trait|type|const|static|union|macro_rules!)\s+(\w+)"
)


def strip(text):
    """The code with comments, strings and char literals blanked (line breaks kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:]) and not re.match(r"\w", text[i - 1 : i] or " "):
            hashes = re.match(r"r(#*)\"", text[i:]).group(1)
            end = text.find('"' + hashes, i + 2 + len(hashes))
            j = n if end < 0 else end + 1 + len(hashes)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(re.sub(r"[^\n]", " ", text[i : j + 1]))
            i = j + 1
        elif c == "'":
            m = re.match(r"'(\\.[^']*|[^\\'])'", text[i:])
            if m:  # a char literal; otherwise a lifetime
                out.append(" " * len(m.group(0)))
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


class Module:
    """A module: a file, or an inline `mod name { }` inside one."""

    def __init__(self, path, file, parent):
        self.path = path  # tuple of names from the crate root
        self.file = file
        self.parent = parent
        self.children = {}  # name -> Module
        self.items = set()  # names defined here
        self.reexports = {}  # name -> (module, [segments]) of `pub use`
        self.globs = []  # (module, [segments]) of `pub use ...::*`


def use_paths(tree):
    """Every path a `use` tree names: `a::{b, c::{d as e, self}}` -> [a::b, a::c::d, a::c]."""
    tree = re.sub(r"\s+as\s+\w+", "", tree)  # an alias names the same item
    tree = re.sub(r"\s+", "", tree)

    def expand(prefix, t):
        parts, depth, cur = [], 0, ""
        for ch in t:
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
                continue
            depth += ch == "{"
            depth -= ch == "}"
            cur += ch
        parts.append(cur)
        result = []
        for p in filter(None, parts):
            m = re.match(r"^(.*?)::\{(.*)\}$", p) or re.match(r"^()\{(.*)\}$", p)
            if m:
                head = m.group(1)
                result += expand(prefix + ([*head.split("::")] if head else []), m.group(2))
            else:
                segs = p.split("::")
                if segs == ["self"]:
                    result.append((prefix, "self"))
                else:
                    result.append((prefix + segs, segs[-1]))
        return result

    return expand([], tree)


def crate_roots(src_dir):
    """Every crate root under `src`: `lib.rs`, `main.rs`, and each binary of `src/bin/`."""
    roots = [os.path.join(src_dir, f) for f in ("lib.rs", "main.rs")]
    bin_dir = os.path.join(src_dir, "bin")
    if os.path.isdir(bin_dir):
        for entry in sorted(os.listdir(bin_dir)):
            path = os.path.join(bin_dir, entry)
            roots.append(os.path.join(path, "main.rs") if os.path.isdir(path) else path)
    return [r for r in roots if r.endswith(".rs") and os.path.isfile(r)]


def parse_crate(root_file):
    modules, files = {}, {}  # path -> Module; file -> Module
    uses = []  # (file, inline module, path segments, line)

    def load(path, file, parent):
        with open(file, encoding="utf-8") as f:
            text = strip(f.read())
        top = Module(path, file, parent)
        modules[path] = top
        files[file] = top
        stack = [(top, -1)]  # (module, brace depth at which it closes)
        depth = 0
        for m in re.finditer(
            r"(?P<use>\b(?:pub(?:\([^)]*\))?\s+)?use\s+(?P<tree>[^;]+);)"
            r"|(?P<mod>\bmod\s+(?P<name>\w+)\s*(?P<kind>[;{]))"
            r"|(?P<open>\{)|(?P<close>\})"
            r"|(?P<ref>(?<![\w$])(?:crate|super|self)(?:::\w+)+)",
            text,
        ):
            line = text.count("\n", 0, m.start()) + 1
            current = stack[-1][0]
            if m.group("mod"):
                name = m.group("name")
                if m.group("kind") == ";":
                    child_file = resolve_file(file, name, current is top)
                    if child_file:
                        current.children[name] = load(current.path + (name,), child_file, current)
                else:
                    inline = Module(current.path + (name,), file, current)
                    modules[inline.path] = inline
                    current.children[name] = inline
                    depth += 1
                    stack.append((inline, depth))
            elif m.group("open"):
                depth += 1
            elif m.group("close"):
                if stack[-1][1] == depth:
                    stack.pop()
                depth -= 1
            elif m.group("use"):
                public = m.group("use").startswith("pub")
                for segs, name in use_paths(m.group("tree")):
                    if not segs:
                        continue
                    uses.append((file, current, segs, line))
                    if public:
                        if name == "*":
                            current.globs.append((current, segs[:-1]))
                        else:
                            current.reexports[name if name != "self" else segs[-1]] = (current, segs)
            elif m.group("ref"):
                uses.append((file, current, m.group("ref").split("::"), line))
        for m in KEYWORDS_WITH_NAME.finditer(text):
            top.items.add(m.group(1))
        # Items of inline modules are counted as the file's: the file is the node.
        for inline in [mod for mod in modules.values() if mod.file == file and mod is not top]:
            inline.items = top.items
        # Bare paths through a declared child module: `child::X` (not a `use`, caught above).
        for m in re.finditer(r"(?<![\w:$])(\w+)(?:::\w+)+", text):
            first = m.group(1)
            if first in ("crate", "super", "self", "Self"):
                continue
            line = text.count("\n", 0, m.start()) + 1
            uses.append((file, None, m.group(0).split("::"), line))
        return top

    def resolve_file(file, name, is_file_top):
        base = os.path.dirname(file)
        stem = os.path.splitext(os.path.basename(file))[0]
        if not is_file_top:
            return None  # `mod x;` inside an inline module: not used here
        is_root = file == root_file
        here = base if stem == "mod" or is_root else os.path.join(base, stem)
        for candidate in (os.path.join(here, name + ".rs"), os.path.join(here, name, "mod.rs")):
            if os.path.exists(candidate):
                return candidate
        return None

    root = load((), root_file, None)
    return root, modules, files, uses


def resolve(segs, start, root, modules, seen=None):
    """The file defining the item `segs` names from module `start`, or None (another crate)."""
    seen = seen or set()
    key = (start.path, tuple(segs))
    if key in seen:
        return None
    seen.add(key)
    if segs[0] == "crate":
        module, rest = root, segs[1:]
    elif segs[0] in ("self", "super"):
        module, rest = start, segs
        while rest and rest[0] in ("self", "super"):
            if rest[0] == "super":
                module = module.parent
                if module is None:
                    return None
            rest = rest[1:]
    elif segs[0] in start.children:
        module, rest = start, segs
    else:
        return None
    # Walk modules.
    while rest and rest[0] in module.children:
        module, rest = module.children[rest[0]], rest[1:]
    if not rest:
        return module.file
    name = rest[0]
    if name in module.reexports and name not in module.items:
        where, target = module.reexports[name]
        found = resolve(target, where, root, modules, seen)
        if found:
            return found
    if name not in module.items:
        for where, target in module.globs:
            target_module = walk(target, where, root)
            if target_module and (name in target_module.items or name in target_module.reexports):
                found = resolve(target + [name], where, root, modules, seen)
                if found:
                    return found
    return module.file


def walk(segs, start, root):
    if not segs:
        return start
    if segs[0] == "crate":
        module, rest = root, segs[1:]
    else:
        module, rest = start, segs
        while rest and rest[0] in ("self", "super"):
            if rest[0] == "super":
                module = module.parent
            rest = rest[1:]
    for s in rest:
        if module is None or s not in module.children:
            return None
        module = module.children[s]
    return module


def edges_of(root_file):
    root, modules, files, uses = parse_crate(root_file)
    edges = {}  # (from, to) -> first line
    for file, module, segs, line in uses:
        start = module or files[file]
        if module is None and segs[0] not in start.children:
            continue
        target = resolve(segs, start, root, modules)
        if target and target != file:
            edges.setdefault((file, target), line)
    return sorted(files), edges


def circles(nodes, edges):
    """Strongly connected components of two or more files (Tarjan)."""
    graph = {n: sorted({b for (a, b) in edges if a == n}) for n in nodes}
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in nodes:
        if v not in index:
            visit(v)
    return out


def check(crate_dir, out=sys.stdout):
    """Prints every circle of the crate in `crate_dir`; whether there is none."""
    src = os.path.join(crate_dir, "src")
    roots = crate_roots(src)
    if not roots:
        print(f"{crate_dir}: no src/lib.rs, src/main.rs or src/bin/", file=out)
        return False
    rel = lambda f: os.path.relpath(f, src)
    ok = True
    for root_file in roots:
        nodes, edges = edges_of(root_file)
        for comp in circles(nodes, edges):
            ok = False
            print(
                f"{crate_dir} ({rel(root_file)}): import circle between {len(comp)} files: "
                f"{', '.join(rel(f) for f in comp)}",
                file=out,
            )
            for a in comp:
                for b in comp:
                    if (a, b) in edges:
                        print(f"  {rel(a)}:{edges[(a, b)]} imports {rel(b)}", file=out)
    return ok


def print_edges(crate_dir):
    src = os.path.join(crate_dir, "src")
    for root_file in crate_roots(src):
        _, edges = edges_of(root_file)
        imports = {}
        for a, b in edges:
            imports.setdefault(a, set()).add(b)
        print(f"{crate_dir} ({os.path.relpath(root_file, src)}):")
        for a in sorted(imports):
            targets = ", ".join(sorted(os.path.relpath(b, src) for b in imports[a]))
            print(f"  {os.path.relpath(a, src)} -> {targets}")


def main(argv):
    if not argv:
        print("\n".join(__doc__.strip().splitlines()[2:4]), file=sys.stderr)
        return 2
    if argv[0] == "--edges":
        for crate in argv[1:]:
            print_edges(crate)
        return 0
    ok = True
    for crate in argv:
        ok &= check(crate)
    if ok:
        print(f"no import circle in {', '.join(argv)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
