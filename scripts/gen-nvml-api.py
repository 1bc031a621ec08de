#!/usr/bin/env python3
"""Generates vram's view of NVML's API from NVIDIA's nvml.h.

    scripts/gen-nvml-api.py --nvml-header PATH [--check-lib LIBNVIDIA_ML]

Reads nvml.h (from a CUDA toolkit's include folder, or NVIDIA's go-nvml
repository, gen/nvml/nvml.h) and writes, in the repository:

  src/cuda/nvml_api.h        the prototype of every function nvml.h declares,
                             as the library exports it: the versioned names,
                             the original ones nvml.h declares only under
                             NVML_NO_UNVERSIONED_FUNC_DEFS, and the retired
                             names it maps to functions with #define
                             (nvmlGetBlacklistDeviceCount): libnvidia-ml.so.1
                             exports them all; the parameter types that
                             src/cuda/nvml_abi.h does not declare, as
                             incomplete structs (every struct is passed by
                             pointer), ints (enums) or nvml.h's own scalar
                             typedefs; and a check that each PFN_ type of
                             nvml_abi.h is the type of its function;
  sim/nvml_entry_points.inc  NVML_SYMBOL(name, (params)) for each function
                             returning nvmlReturn_t and NVML_OTHER(name) for
                             the rest (nvmlErrorString): the symbols the
                             simulated libnvidia-ml.so.1 exports.

Both outputs are committed: building vram needs no NVML header, and the
header itself is NVIDIA's and is not part of vram. Python 3's standard
library only. --check-lib compares the exported set with a library's
(nm -D; or a list of its exported names, one a line) and fails on any
difference.
"""

import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEYWORDS = {"const", "struct", "enum", "union", "unsigned", "signed", "void", "char", "short", "int",
            "long", "float", "double", "volatile"}
SCALARS = {"size_t", "uint32_t", "uint64_t", "int64_t", "uint8_t", "int32_t", "uint16_t"}


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def split_params(params):
    if params.strip() in ("", "void"):
        return []
    return [p.strip() for p in params.split(",")]


def param_parts(p):
    """(type, name) of one parameter; name None when the header gives none."""
    p = " ".join(re.sub(r"\s*\*\s*", " * ", p).split())
    arr = re.search(r"\s*(\[\s*\w*\s*\])$", p)
    suffix = ""
    if arr:
        suffix, p = arr.group(1), p[: arr.start()]
    toks = p.split()
    if len(toks) > 1 and re.fullmatch(r"[A-Za-z_]\w*", toks[-1]) and toks[-1] not in KEYWORDS:
        return " ".join(toks[:-1]), toks[-1] + suffix
    return " ".join(toks), None


def functions(text):
    """[(return type, name, params)] in the header's order, each name once."""
    text = re.sub(r"DEPRECATED\s*\([^)]*\)", " ", text)
    out, seen = [], {}
    for m in re.finditer(r"([^;{}#]*?)\bDECLDIR\b([^;{}#(]*?)\b(nvml\w+)\s*\(([^;]*?)\)\s*;", text):
        ret = " ".join((m.group(1) + " " + m.group(2)).split())
        ret = re.sub(r"\s*\*", " *", ret)
        params = " ".join(m.group(4).split())
        name = m.group(3)
        if name in seen:
            if seen[name] != (ret, params):
                sys.exit(f"gen-nvml-api: {name} declared twice, differently")
            continue
        seen[name] = (ret, params)
        out.append((ret, name, params))
    return out


def typedefs(text):
    """name -> ("enum" | "struct" | "union", tag, [all names]) or ("alias", type text)."""
    out = {}
    pos = 0
    for m in re.finditer(r"\btypedef\b", text):
        if m.start() < pos:
            continue
        body = re.match(r"typedef\s+(struct|enum|union)\s*(\w+)?\s*\{", text[m.start():])
        if body:
            i = m.start() + body.end()
            depth = 1
            while depth:
                depth += {"{": 1, "}": -1}.get(text[i], 0)
                i += 1
            end = text.index(";", i)
            names = [n.strip().lstrip("*").strip() for n in text[i:end].split(",")]
            names = [n for n in names if n]
            for n in names:
                out[n] = (body.group(1), body.group(2), names)
            pos = end
            continue
        simple = re.match(r"typedef\s+([^;{}()]+?)\s*\b(\w+)\s*;", text[m.start():])
        if simple:
            out[simple.group(2)] = ("alias", " ".join(re.sub(r"\s*\*", " *", simple.group(1)).split()))
            pos = m.start() + simple.end()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nvml-header", required=True)
    ap.add_argument("--check-lib")
    args = ap.parse_args()
    if not os.path.exists(args.nvml_header):
        sys.exit(f"gen-nvml-api: --nvml-header {args.nvml_header}: no such file; give NVIDIA's nvml.h")
    raw = open(args.nvml_header, encoding="utf-8", errors="replace").read()
    m = re.search(r"#define\s+NVML_API_VERSION\s+(\d+)", raw)
    api = m.group(1) if m else "?"
    text = strip_comments(raw)
    text = re.sub(r"\\\n", " ", text)
    code = re.sub(r"^\s*#.*$", "", text, flags=re.M)
    funcs = functions(code)
    # Names nvml.h maps to a function without declaring them (the old
    # nvmlGetBlacklist* for nvmlGetExcluded*): the library still exports
    # them for programs built with the old names, with the new signature.
    declared = {f[1]: f for f in funcs}
    for alias, target in re.findall(r"#define\s+(nvml\w+)\s+(nvml\w+)\s*$", text, re.M):
        if alias not in declared and target in declared:
            ret, _, params = declared[target]
            declared[alias] = (ret, alias, params)
            funcs.append((ret, alias, params))
    types = typedefs(code)
    macros = dict(re.findall(r"#define\s+(nvml\w+_t)\s+(nvml\w+_t)\b", text))

    abi = strip_comments(open(os.path.join(ROOT, "src/cuda/nvml_abi.h")).read())
    known = set(re.findall(r"typedef[^;{]*?(\w+)\s*;", abi)) | set(re.findall(r"}\s*(\w+)\s*;", abi))
    pfns = re.findall(r"typedef[^;]*?\(\s*\*\s*PFN_(\w+)\s*\)", abi)
    known -= {"PFN_" + p for p in pfns}

    decls, done = [], set()

    def need(name):
        if name in known or name in done or name in KEYWORDS or name in SCALARS:
            return
        done.add(name)
        if name in macros:
            need(macros[name])
            decls.append(f"typedef {macros[name]} {name};")
            return
        if name not in types:
            sys.exit(f"gen-nvml-api: type {name} used by a function, not declared by {args.nvml_header}")
        t = types[name]
        if t[0] == "alias":
            for tok in re.findall(r"[A-Za-z_]\w*", t[1]):
                if tok not in ("struct", "enum", "union") and not re.search(r"\b(struct|union|enum)\s+" + tok, t[1]):
                    need(tok)
            decls.append(f"typedef {t[1]} {name};")
            return
        kind, tag, names = t
        twin = next((n for n in names if n != name and (n in known or n in done)), None)
        if twin:
            decls.append(f"typedef {twin} {name};")
        elif kind == "enum":
            decls.append(f"typedef int {name}; /* an enum */")
        else:
            decls.append(f"typedef {kind} {tag or name + '_opaque'} {name};")

    protos, entries = [], []
    for ret, name, params in funcs:
        ps = split_params(params)
        named = []
        for i, p in enumerate(ps):
            t, n = param_parts(p)
            for tok in re.findall(r"[A-Za-z_]\w*", t):
                need(tok)
            named.append(f"{t} {n or f'arg{i}'}".replace("* ", "*"))
        for tok in re.findall(r"[A-Za-z_]\w*", ret):
            need(tok)
        plist = ", ".join(named) if named else "void"
        protos.append(f"{ret} {name}({plist});")
        if ret == "nvmlReturn_t":
            entries.append(f"NVML_SYMBOL({name}, ({plist}))")
        else:
            entries.append(f"NVML_OTHER({name})")

    if args.check_lib:
        if open(args.check_lib, "rb").read(4) == b"\x7fELF":
            nm = subprocess.run(["nm", "-D", "--defined-only", args.check_lib], capture_output=True,
                                text=True, check=True).stdout
        else:  # a list of the names a library exports, one a line
            nm = open(args.check_lib).read()
        lib = {l.split()[-1] for l in nm.splitlines() if l.split() and l.split()[-1].startswith("nvml")}
        ours = {f[1] for f in funcs}
        problems = [f"{args.check_lib} exports {s}, nvml.h declares no such function" for s in sorted(lib - ours)]
        problems += [f"nvml.h declares {s}, {args.check_lib} does not export it" for s in sorted(ours - lib)]
        for p in problems:
            print("gen-nvml-api:", p, file=sys.stderr)
        if problems:
            sys.exit(1)

    head = (f"/* Generated by scripts/gen-nvml-api.py from NVML API {api}'s nvml.h.\n"
            f" * Do not edit: run scripts/gen-nvml-api.py --nvml-header PATH and commit what\n"
            f" * it writes. */\n")
    with open(os.path.join(ROOT, "src/cuda/nvml_api.h"), "w") as f:
        f.write(head)
        f.write("/* The prototype of every function libnvidia-ml.so.1 exports, as nvml.h\n"
                " * declares it. The types nvml_abi.h does not lay out are only named here:\n"
                " * structs incomplete, enums as int (their size and passing). */\n")
        f.write("#ifndef VRAM_NVML_API_H\n#define VRAM_NVML_API_H\n\n")
        f.write('#include "nvml_abi.h"\n\n')
        f.write(f"#define VRAM_NVML_API_FUNCTIONS {len(funcs)}\n\n")
        for d in decls:
            f.write(d + "\n")
        f.write("\n")
        for p in protos:
            f.write(p + "\n")
        f.write("\n/* nvml_abi.h's function types are those of the functions. */\n")
        names = {fn[1] for fn in funcs}
        for p in pfns:
            if p in names:
                f.write(f"_Static_assert(__builtin_types_compatible_p(__typeof__(&{p}), PFN_{p}), "
                        f"\"PFN_{p}\");\n")
        f.write("\n#endif\n")
    with open(os.path.join(ROOT, "sim/nvml_entry_points.inc"), "w") as f:
        f.write(head)
        f.write(f"/* {len(funcs)} exported functions.\n"
                " * NVML_SYMBOL(name, (params)): a function returning nvmlReturn_t.\n"
                " * NVML_OTHER(name): one returning something else (nvmlErrorString). */\n\n")
        for e in entries:
            f.write(e + "\n")
    print(f"gen-nvml-api: NVML API {api}: {len(funcs)} functions, {len(decls)} types named",
          file=sys.stderr)


if __name__ == "__main__":
    main()
