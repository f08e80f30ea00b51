#!/usr/bin/env python3
"""Tests of import_cycles.py on small crates written into a temporary directory.

    python3 scripts/test_import_cycles.py
"""
import io
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import import_cycles  # noqa: E402


def crate(files):
    """A crate in a new temporary directory: {path under src/: text}."""
    tmp = tempfile.TemporaryDirectory()
    for path, text in files.items():
        full = os.path.join(tmp.name, "src", path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as f:
            f.write(text)
    return tmp


def check(files):
    """(whether the crate has no circle, what the checker printed)."""
    with crate(files) as root:
        out = io.StringIO()
        ok = import_cycles.check(root, out)
        return ok, out.getvalue()


class Circles(unittest.TestCase):
    def test_rejects_two_files_that_import_each_other(self):
        ok, out = check(
            {
                "lib.rs": "mod a;\nmod b;\n",
                "a.rs": "use crate::b::B;\npub struct A(B);\n",
                "b.rs": "pub struct B;\npub fn f() -> crate::a::A { todo!() }\n",
            }
        )
        self.assertFalse(ok)
        self.assertIn("import circle between 2 files: a.rs, b.rs", out)
        self.assertIn("a.rs:1 imports b.rs", out)
        self.assertIn("b.rs:2 imports a.rs", out)

    def test_rejects_a_circle_through_super_and_a_facade_that_defines_what_a_child_uses(self):
        ok, out = check(
            {
                "lib.rs": "mod fmt;\n",
                "fmt/mod.rs": "mod blob;\npub use blob::Blob;\npub const MAGIC: u32 = 1;\n",
                "fmt/blob.rs": "use super::MAGIC;\npub struct Blob;\n",
            }
        )
        self.assertFalse(ok)
        self.assertIn("fmt/blob.rs, fmt/mod.rs", out)

    def test_rejects_a_three_file_circle_and_names_every_file(self):
        ok, out = check(
            {
                "lib.rs": "mod a;\nmod b;\nmod c;\n",
                "a.rs": "pub struct A;\nfn f(_: crate::b::B) {}\n",
                "b.rs": "pub struct B;\nfn f(_: crate::c::C) {}\n",
                "c.rs": "pub struct C;\nfn f(_: crate::a::A) {}\n",
            }
        )
        self.assertFalse(ok)
        self.assertIn("import circle between 3 files: a.rs, b.rs, c.rs", out)

    def test_rejects_a_circle_in_a_binary_of_src_bin(self):
        ok, out = check(
            {
                "bin/tool.rs": "mod x;\nmod y;\nfn main() {}\n",
                "bin/x.rs": "pub struct X;\nfn f(_: crate::y::Y) {}\n",
                "bin/y.rs": "pub struct Y;\nfn f(_: super::x::X) {}\n",
            }
        )
        self.assertFalse(ok)
        self.assertIn("(bin/tool.rs): import circle between 2 files: bin/x.rs, bin/y.rs", out)


class NoCircle(unittest.TestCase):
    def test_accepts_a_facade_a_leaf_and_files_that_import_down_only(self):
        ok, out = check(
            {
                "lib.rs": "mod error;\nmod ids;\nmod fmt;\npub use error::Error;\n",
                "ids.rs": "pub struct Slot;\n",
                "error.rs": "use crate::ids::Slot;\npub enum Error { Bad(Slot) }\n",
                "fmt/mod.rs": "mod blob;\nmod constants;\npub use blob::Blob;\n"
                "pub use constants::MAGIC;\n",
                "fmt/constants.rs": "pub const MAGIC: u32 = 1;\n",
                # Through the facades: `super::MAGIC` is constants.rs, `crate::Error` error.rs.
                "fmt/blob.rs": "use super::MAGIC;\nuse crate::Error;\npub struct Blob;\n",
            }
        )
        self.assertTrue(ok, out)

    def test_ignores_paths_in_comments_and_strings_and_a_files_own_tests(self):
        ok, out = check(
            {
                "lib.rs": "mod a;\nmod b;\n",
                "a.rs": "pub struct A;\n// crate::b::B would be a circle\n"
                'const S: &str = "crate::b::B";\n'
                "#[cfg(test)]\nmod tests {\n    use super::*;\n    fn f(_: A) {}\n}\n",
                "b.rs": "use crate::a::A;\npub struct B(A);\n/* crate::b::B */\n",
            }
        )
        self.assertTrue(ok, out)

    def test_follows_glob_re_exports_to_the_defining_file(self):
        ok, out = check(
            {
                "lib.rs": "mod m;\nmod user;\n",
                "m/mod.rs": "mod inner;\npub use inner::*;\nuse crate::user::U;\nfn f(_: U) {}\n",
                "m/inner.rs": "pub struct Leaf;\n",
                "user.rs": "pub struct U;\nfn g(_: crate::m::Leaf) {}\n",
            }
        )
        self.assertTrue(ok, out)

    def test_the_repositorys_checked_crates_have_no_circle(self):
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        for name in ("npub-core", "device-agent", "device-agent/capi", "cli", "bench/loadgen"):
            out = io.StringIO()
            self.assertTrue(import_cycles.check(os.path.join(here, name), out), out.getvalue())


if __name__ == "__main__":
    unittest.main()
