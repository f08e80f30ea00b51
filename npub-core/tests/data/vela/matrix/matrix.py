#!/usr/bin/env python3
"""Compiles the Vela matrix and writes the corpus `tests/vela_matrix.rs` packs.

    python3 matrix.py VENVS MODELS OUT [--all]

VENVS holds one venv per Vela version (`VENVS/5.2.0/bin/vela`, ...; `gen.sh` makes them), MODELS the
input models (`conv1.tflite`, `two_io.tflite`, `lut.tflite`), OUT the corpus directory. Every
compilation below is run; its outputs are kept unless an earlier one gave the same bytes (raw
`.npz` files are compared by their arrays: zip timestamps differ between runs), and
`OUT/expected.json` gets one entry per compilation: how it was made, the files it gave, and the
facts `facts.py` reads from them (Vela's bytes, not npub).

Without `--all` only the SMALL subset `commit()` picks is written: what `cargo test` reads. With
`--all` every compilation is kept, for a local run (`NPUB_VELA_MATRIX=OUT cargo test -p npub-core
--test vela_matrix`).
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

sys.dont_write_bytecode = True  # nothing but the corpus is written into this directory
import facts as facts_mod  # noqa: E402

VERSIONS = ["3.10.0", "3.12.0", "4.0.1", "4.4.1", "4.5.0", "5.0.0", "5.1.0", "5.2.0"]
U55 = ["ethos-u55-32", "ethos-u55-64", "ethos-u55-128", "ethos-u55-256"]
CONFIG = ["--config", "Arm/vela.ini"]
OPTIONS = {
    "default": [],
    "size": ["--optimise", "Size"],
    "performance": ["--optimise", "Performance"],
    "sram_only": CONFIG + ["--system-config", "Ethos_U55_High_End_Embedded", "--memory-mode", "Sram_Only"],
    "deep_embedded": CONFIG + ["--system-config", "Ethos_U55_Deep_Embedded", "--memory-mode", "Shared_Sram"],
    "dedicated_sram": CONFIG + ["--system-config", "Ethos_U65_High_End", "--memory-mode", "Dedicated_Sram"],
    "cop2": ["--cop-format", "COP2"],
    "cop2_separate_io": ["--cop-format", "COP2", "--separate-io-regions"],
}


def major(v):
    return int(v.split(".")[0])


def cores(v):
    """The compiler cores of a version and the flag that picks each."""
    if major(v) == 3:
        return {"python": []}
    if major(v) == 4:
        return {"python": [], "regor": ["--debug-force-regor"]}
    return {"regor": [], "python": ["--debug-force-legacy-core"]}


def has_option(v, option):
    if option.startswith("cop2"):
        return v not in ("3.10.0", "3.12.0", "4.0.1")
    return True


def compilations():
    """(version, core, accel, option, model, form) for the whole matrix."""
    out = []
    for v in VERSIONS:
        for core in cores(v):
            forms = ["tflite"] if major(v) == 3 else ["tflite", "raw"]
            for form in forms:
                for accel in U55:
                    out.append((v, core, accel, "default", "conv1", form))
                for option in ["size", "performance", "sram_only", "deep_embedded", "dedicated_sram"]:
                    out.append((v, core, "ethos-u55-256", option, "conv1", form))
                for model in ["two_io", "lut"]:
                    out.append((v, core, "ethos-u55-256", "default", model, form))
                # Targets and payload formats that must be refused.
                for accel in ["ethos-u65-256", "ethos-u65-512"] + (["ethos-u85-256"] if major(v) >= 4 else []):
                    out.append((v, core, accel, "default", "conv1", form))
                for option in ["cop2", "cop2_separate_io"]:
                    if has_option(v, option):
                        out.append((v, core, "ethos-u55-256", option, "conv1", form))
    return out


def commit(v, core, accel, option, model, form):
    """The SMALL subset `cargo test` reads (a few hundred KB): one of each behaviour, and every
    accelerator size where issue 18 found a difference (the Python core's raw output)."""
    tflite = form == "tflite"
    if not accel.startswith("ethos-u55") or option.startswith("cop2"):
        if (v, core) == ("5.2.0", "regor"):
            return accel != "ethos-u65-512" or tflite
        if (v, core) == ("4.5.0", "regor"):
            return option == "cop2_separate_io" and tflite
        # The Python core ignores --cop-format COP2 --separate-io-regions: it packs.
        return (v, core, option) == ("4.4.1", "python", "cop2_separate_io")
    if model != "conv1":
        return (v, core, model) in {("4.4.1", "regor", "two_io"), ("5.0.0", "regor", "two_io"),
                                    ("5.2.0", "python", "two_io"), ("5.0.0", "regor", "lut"),
                                    ("4.4.1", "python", "lut")}
    if option == "default":
        if core == "python" and v in ("4.4.1", "5.2.0"):
            return True  # both forms on every size
        if major(v) == 3 or v == "4.0.1" and core == "python":
            return accel in ("ethos-u55-32", "ethos-u55-256")
        return accel == "ethos-u55-256" or accel == "ethos-u55-32" and v in ("4.0.1", "5.0.0", "5.2.0")
    if option in ("size", "performance", "deep_embedded"):
        return tflite and v in ("3.10.0", "5.2.0")
    if option == "sram_only":
        return (v, core) in {("3.12.0", "python"), ("5.2.0", "python")}
    return (v, core) in {("4.5.0", "python"), ("5.2.0", "python"), ("5.2.0", "regor")}  # dedicated_sram


def content_key(path):
    if path.endswith(".npz"):
        with zipfile.ZipFile(path) as z:
            return hashlib.sha256(b"".join(n.encode() + z.read(n) for n in sorted(z.namelist()))).hexdigest()
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def main():
    venvs, models, out = sys.argv[1:4]
    keep_all = "--all" in sys.argv
    os.makedirs(out, exist_ok=True)
    files_dir = os.path.join(out, "files")
    shutil.rmtree(files_dir, ignore_errors=True)
    os.makedirs(files_dir)
    seen = {}  # content key -> stored file name
    entries = []
    facts_of = {}  # stored file name -> facts
    for (v, core, accel, option, model, form) in compilations():
        if not (keep_all or commit(v, core, accel, option, model, form)):
            continue
        name = f"{v}-{core}-{accel.replace('ethos-', '')}-{option}-{model}-{form}"
        cmd = [os.path.join(venvs, v, "bin", "vela"), "--accelerator-config", accel] + OPTIONS[option]
        cmd += cores(v)[core]
        if form == "raw":
            cmd += ["--output-format", "raw"]
        with tempfile.TemporaryDirectory() as tmp:
            run = subprocess.run(cmd + ["--output-dir", tmp, os.path.join(models, model + ".tflite")],
                                 capture_output=True, text=True, cwd=tmp)
            entry = {"name": name, "version": v, "core": core, "accel": accel, "option": option,
                     "model": model, "form": form,
                     "flags": cmd[1:], "vela_exit": run.returncode, "files": []}
            if run.returncode != 0:
                entry["vela_error"] = (run.stderr.strip().splitlines() or [""])[-1][:300]
            for f in sorted(os.listdir(tmp)):
                if not (f.endswith("_vela.tflite") or f.endswith(".npz")):
                    continue
                src = os.path.join(tmp, f)
                key = content_key(src)
                if key not in seen:
                    stored = f"{name}__{f}"
                    shutil.copyfile(src, os.path.join(files_dir, stored))
                    seen[key] = stored
                    facts_of[stored] = facts_mod.facts(src)
                entry["files"].append({"vela_name": f, "file": seen[key]})
        entries.append(entry)
        print(name, run.returncode, [f["vela_name"] for f in entry["files"]], file=sys.stderr)
    write_expected(os.path.join(out, "expected.json"), facts_of, entries)


def write_expected(path, facts_of, entries):
    """One line per file and per compilation: small, and a regeneration diffs line by line."""
    line = lambda v: json.dumps(v, sort_keys=True, separators=(",", ":"))
    with open(path, "w") as f:
        f.write('{"generated_by":"matrix.py + facts.py",\n"files":{\n')
        f.write(",\n".join(f"{line(k)}:{line(v)}" for k, v in sorted(facts_of.items())))
        f.write('\n},\n"entries":[\n')
        f.write(",\n".join(line(e) for e in entries))
        f.write("\n]}\n")


if __name__ == "__main__":
    main()
