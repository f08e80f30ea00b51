#!/usr/bin/env python3
"""The deepest stack paths below a function of the firmware, from its frames as the compiler sized
them: what the painted figure (`src/stack.rs`) cannot show, the paths a test does not run (a
failure after a pack verified, a lazy boot inside an install).

    cd device-agent/fw
    RUSTC_BOOTSTRAP=1 RUSTFLAGS="-C link-arg=-Tlink.x -C target-cpu=cortex-m55 -Z emit-stack-sizes" \\
        cargo build --release --target-dir target/stack
    ./stack-paths.py target/stack/thumbv8m.main-none-eabihf/release/device-agent-fw poll_once [N]

Frames come from `llvm-readobj --stack-sizes` (the `.stack_sizes` section that `-Z
emit-stack-sizes` adds; the code is the same), calls from `llvm-objdump -d`: `bl`/`blx` add the
callee's frame to the caller's, a `b`/`b.w` to another function is a tail call (the caller's frame
is gone). Calls through a pointer (`dyn` formatting, trait objects) are not followed, so a path
that formats can go deeper than shown; panic paths are not followed. Prints the deepest path, then
the deepest path through each of the root's callees, N levels down (default 2).
"""
import re
import signal
import subprocess
import sys

SKIP = re.compile(r"panic|slice_index_fail|unwrap_failed|expect_failed|rust_begin_unwind")


def tool(name, *args):
    return subprocess.run([name, *args], capture_output=True, text=True, check=True).stdout


def frames(elf):
    out = tool("llvm-readobj", "--stack-sizes", elf)
    size = {}
    for m in re.finditer(r"Functions: \[(.*?)\]\n\s*Size: 0x([0-9A-Fa-f]+)", out, re.S):
        for name in m.group(1).split(", "):
            size[name] = max(size.get(name, 0), int(m.group(2), 16))
    return size


def call_graph(elf):
    calls, tails, current = {}, {}, None
    for line in tool("llvm-objdump", "-d", "--no-show-raw-insn", elf).splitlines():
        m = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
        if m:
            if not m.group(1).startswith("$"):  # $t/$d mark code and data, not functions
                current = m.group(1)
                calls.setdefault(current, set())
                tails.setdefault(current, set())
            continue
        m = re.search(r"\t(bl|blx|b|b\.w)\s+0x[0-9a-f]+ <([^+>]*)>", line)
        # A target "<f+0x12>" is a branch inside f.
        if current and m and m.group(2) != current:
            (calls if m.group(1) in ("bl", "blx") else tails)[current].add(m.group(2))
    return calls, tails


def main():
    elf, root = sys.argv[1], sys.argv[2]
    levels = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    size, (calls, tails) = frames(elf), call_graph(elf)
    memo = {}

    def deepest(f, stack=()):
        """(bytes, path) of the deepest path from entering f."""
        if f in memo:
            return memo[f]
        if f in stack or SKIP.search(f):
            return (0, [])
        own = size.get(f, 0)
        best = (own, [(own, f)])
        for c in calls.get(f, ()):
            depth, path = deepest(c, stack + (f,))
            best = max(best, (own + depth, [(own, f)] + path), key=lambda b: b[0])
        for c in tails.get(f, ()):
            depth, path = deepest(c, stack + (f,))
            best = max(best, (depth, [(own, f + " (tail call)")] + path), key=lambda b: b[0])
        memo[f] = best
        return best

    mangled = sorted(calls)
    plain = dict(zip(mangled, subprocess.run(
        ["llvm-cxxfilt"], input="\n".join(mangled), capture_output=True, text=True, check=True
    ).stdout.splitlines()))

    def short(name):
        name = plain.get(name.removesuffix(" (tail call)"), name)
        return name if len(name) <= 120 else name[:117] + "..."

    named = re.compile(r"(^|::)" + re.escape(root) + r"(::<.*>)?$")
    roots = [n for n in calls if named.search(plain[n])]
    if not roots:
        sys.exit(f"no function named {root} in {elf}")
    for r in roots:
        total, path = deepest(r)
        print(f"deepest below {short(r)}: {total} B")
        for own, f in path:
            print(f"  {own:6} {short(f)}")

        def tree(f, above, level):
            own = size.get(f, 0)
            ranked = sorted(calls.get(f, ()), key=lambda c: -deepest(c)[0])
            for c in ranked[:6]:
                print(f"{'  ' * level}{above + own + deepest(c)[0]:6} via {short(c)}")
                if level < levels:
                    tree(c, above + own, level + 1)

        print("by callee (total depth through it):")
        tree(r, 0, 1)


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends it quietly
    main()
