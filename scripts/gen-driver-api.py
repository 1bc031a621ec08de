#!/usr/bin/env python3
"""Generates vram's view of the CUDA driver API from a CUDA toolkit's headers.

    scripts/gen-driver-api.py [--cuda-include DIR] [--check-stub LIBCUDA_STUB]

Reads cuda.h, cudaGL.h, cudaEGL.h, cudaVDPAU.h, cudaProfiler.h and their
*Typedefs.h (DIR defaults to the include folder beside `nvcc`, else
/usr/local/cuda/include) and writes, in the repository:

  src/cuda/cuda_api.h     one PFN_<symbol> function type per exported entry
                          point whose parameter types src/cuda/cuda_abi.h
                          declares (add a type there and regenerate to get
                          the function's type);
  src/cuda/cuda_prototypes.h
                          the prototype of each of those entry points, for
                          the test programs that call the driver by name;
  sim/entry_points.inc    every symbol libcuda.so.1 exports, and the table
                          cuGetProcAddress answers from: for each base name,
                          the CUDA version from which each exported symbol is
                          the one handed out, and its per-thread-stream
                          variants.

The outputs are committed: building vram needs no CUDA toolkit. Python 3's
standard library only. The exported symbols are found as NVIDIA's own build
sees the headers (with __CUDA_API_VERSION_INTERNAL, which also declares the
old ABI versions and the _ptds/_ptsz variants); which symbol answers which
requested version comes from the PFN_<name>_v<version> types of
cudaTypedefs.h, and every such match is checked by signature.
--check-stub compares the exported set with a libcuda.so (the toolkit's stub
in lib64/stubs) and fails on any difference.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys

HEADERS = ["cuda.h", "cudaGL.h", "cudaEGL.h", "cudaVDPAU.h", "cudaProfiler.h"]
TYPEDEF_HEADERS = ["cudaTypedefs.h", "cudaGLTypedefs.h", "cudaEGLTypedefs.h",
                   "cudaVDPAUTypedefs.h", "cudaProfilerTypedefs.h"]
# Exported by the driver (and its stub) though no longer declared by the
# headers: removed from cudaProfiler.h in CUDA 12.
RETIRED = {"cuProfilerInitialize": ("cudaProfiler.h", "const char *configFile, const char *outputFile, CUoutput_mode outputMode")}
# Base names the public header maps to another function, from the CUDA
# version whose headers made the change (cuGraphInstantiate became
# cuGraphInstantiateWithFlags in CUDA 12.0); cudaTypedefs.h has no type for
# that version, so the row is stated here.
RENAMED = [("cuGraphInstantiate", 12000, "cuGraphInstantiateWithFlags")]
# What NVIDIA's build of the driver defines when it reads its headers.
DEFINED = {"__CUDA_API_VERSION_INTERNAL", "__GNUC__", "__LP64__", "__linux__"}

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def eval_condition(cond, defined):
    expr = re.sub(r"defined\s*\(\s*(\w+)\s*\)", lambda m: " 1 " if m.group(1) in defined else " 0 ", cond)
    expr = re.sub(r"defined\s+(\w+)", lambda m: " 1 " if m.group(1) in defined else " 0 ", expr)
    expr = expr.replace("&&", " and ").replace("||", " or ")
    expr = re.sub(r"!(?!=)", " not ", expr)
    expr = re.sub(r"\b(\d+)[LUlu]+\b", r"\1", expr)
    expr = re.sub(r"\b[A-Za-z_]\w*\b", lambda m: m.group(0) if m.group(0) in ("and", "or", "not") else "0", expr)
    try:
        return bool(eval(expr, {}, {}))
    except Exception:
        return False


def declarations(path, defined, macros):
    """The CUresult functions a header declares, as the driver's build sees
    them: [(symbol, params)] with macros (cuMemAlloc -> cuMemAlloc_v2,
    __CUDA_API_PTDS(x) -> x_ptds) applied where each declaration stands."""
    text = strip_comments(open(path, encoding="utf-8", errors="replace").read())
    text = re.sub(r"\\\n", " ", text)
    out = []
    stack = []  # (taking, any_branch_taken)
    body = []

    def active():
        return all(s[0] for s in stack)

    def flush():
        chunk = " ".join(body)
        body.clear()
        for m in re.finditer(r"CUresult\s+CUDAAPI\s+(\w+)\s*\(([^;{]*?)\)\s*;", chunk):
            name = macros.get(m.group(1), m.group(1))
            out.append((name, " ".join(m.group(2).split())))

    for line in text.split("\n"):
        s = line.strip()
        if s.startswith("#"):
            flush()
            d = s[1:].strip()
            word = d.split(None, 1)[0] if d else ""
            rest = d[len(word):].strip()
            if word in ("if", "ifdef", "ifndef"):
                if word == "ifdef":
                    c = rest.split()[0] in defined
                elif word == "ifndef":
                    c = rest.split()[0] not in defined
                else:
                    c = eval_condition(rest, defined)
                stack.append([c, c])
            elif word == "elif":
                c = not stack[-1][1] and eval_condition(rest, defined)
                stack[-1] = [c, stack[-1][1] or c]
            elif word == "else":
                stack[-1] = [not stack[-1][1], True]
            elif word == "endif":
                stack.pop()
            elif not active():
                continue
            elif word == "define":
                m = re.match(r"(\w+)(\([^)]*\))?\s*(.*)", rest)
                name, fargs, value = m.group(1), m.group(2), m.group(3).strip()
                if fargs:
                    continue
                defined.add(name)
                p = re.match(r"__CUDA_API_PT(DS|SZ)\((\w+)\)", value)
                if p:
                    macros[name] = p.group(2) + "_pt" + p.group(1).lower()
                elif re.fullmatch(r"cu\w+", value) and name.startswith("cu"):
                    macros[name] = value
            elif word == "undef":
                macros.pop(rest.split()[0], None)
            continue
        if active():
            body.append(s)
    flush()
    return out


def typedef_aliases(path):
    """typedef A B; for single-word A and B: the names cuda.h gives one type."""
    text = strip_comments(open(path, encoding="utf-8", errors="replace").read())
    aliases = {}
    for m in re.finditer(r"typedef\s+(?:struct\s+|enum\s+|union\s+)?(\w+)\s*(\*?)\s*(\w+)\s*;", text):
        aliases[m.group(3)] = m.group(1) + (" *" if m.group(2) else "")
    for m in re.finditer(r"}\s*(\w+)\s*,\s*\*\s*(\w+)\s*;", text):
        pass
    return aliases


def enum_values(text, tag):
    """(name, value) of the enum `typedef enum TAG { ... }`, aliases included."""
    m = re.search(r"typedef\s+enum\s+" + tag + r"\s*{(.*?)}", text, re.S)
    out, nxt, vals = [], 0, {}
    for item in m.group(1).split(","):
        item = item.strip()
        if not item or item.startswith("#"):
            continue
        item = re.sub(r"#\w+.*", "", item).strip()
        mm = re.match(r"(\w+)\s*(?:=\s*(.+))?$", item, re.S)
        if not mm:
            continue
        name, val = mm.group(1), mm.group(2)
        if val is not None:
            val = val.strip()
            nxt = vals[val] if val in vals else int(eval(re.sub(r"(\d+)[uUlL]+", r"\1", val)))
        vals[name] = nxt
        out.append((name, nxt))
        nxt += 1
    return out


def split_params(params):
    if params.strip() in ("", "void"):
        return []
    parts, depth, cur = [], 0, ""
    for ch in params:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    parts.append(cur.strip())
    return parts


KEYWORDS = {"const", "struct", "enum", "union", "unsigned", "signed", "void", "char", "short", "int",
            "long", "float", "double", "volatile"}


def param_type(p):
    """The type of one parameter, its name dropped, in a canonical spacing."""
    p = re.sub(r"\bCUDAAPI\b", " ", p)
    p = re.sub(r"\s*\*\s*", " * ", p)
    p = re.sub(r"\s*\[\s*(\w*)\s*\]", r" [\1]", p)
    toks = p.split()
    # The last identifier that is not a keyword, when something precedes it, is the name.
    arr = [t for t in toks if t.startswith("[")]
    toks = [t for t in toks if not t.startswith("[")]
    if len(toks) > 1 and re.fullmatch(r"[A-Za-z_]\w*", toks[-1]) and toks[-1] not in KEYWORDS:
        toks = toks[:-1]
    if arr:
        toks.append("*")
    return " ".join(toks)


def canon_type(t, aliases):
    out = []
    for tok in t.split():
        seen = set()
        while tok in aliases and tok not in seen:
            seen.add(tok)
            tok = aliases[tok]
        out.extend(tok.split())
    s = " ".join(out)
    return s.replace("CUDAAPI", "").strip()


def signature(params, aliases):
    return tuple(canon_type(param_type(p), aliases) for p in split_params(params))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cuda-include")
    ap.add_argument("--check-stub")
    args = ap.parse_args()
    inc = args.cuda_include
    if not inc:
        nvcc = shutil.which("nvcc")
        inc = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))), "include") \
            if nvcc else "/usr/local/cuda/include"
    for h in HEADERS + TYPEDEF_HEADERS:
        if not os.path.exists(os.path.join(inc, h)):
            sys.exit(f"gen-driver-api: {inc}/{h} not found; give --cuda-include DIR (a CUDA toolkit's include folder)")

    cuda_h = open(os.path.join(inc, "cuda.h")).read()
    version = int(re.search(r"#define\s+CUDA_VERSION\s+(\d+)", cuda_h).group(1))

    # Exported symbols and their declared parameters.
    symbols = {}
    origin = {}
    order = []
    top_macros = {}  # base name -> what the public headers map it to
    for h in HEADERS:
        defined = set(DEFINED)
        macros = {}
        # The public (non-internal) mapping of base names, for the newest version.
        pub = {}
        for m in re.finditer(r"#define\s+(cu\w+)\s+(?:__CUDA_API_PT(?:DS|SZ)\((\w+)\)|(cu\w+))",
                             strip_comments(open(os.path.join(inc, h)).read())):
            pub.setdefault(m.group(1), m.group(2) or m.group(3))
        for k, v in pub.items():
            top_macros.setdefault(k, v)
        for name, params in declarations(os.path.join(inc, h), defined, macros):
            if name not in symbols:
                order.append(name)
                origin[name] = h
            symbols[name] = params
    for name, (h, params) in RETIRED.items():
        if name not in symbols:
            symbols[name], origin[name] = params, h
    aliases = {}
    for h in HEADERS:
        aliases.update(typedef_aliases(os.path.join(inc, h)))

    # The versioned function types: base name, version, variant, parameters.
    pfns = []
    for h in TYPEDEF_HEADERS:
        text = strip_comments(open(os.path.join(inc, h)).read())
        for m in re.finditer(r"typedef\s+CUresult\s*\(\s*CUDAAPI\s*\*\s*PFN_(\w+?)_v(\d+)(_ptds|_ptsz)?\s*\)\s*\(([^;]*?)\)\s*;", text):
            pfns.append((m.group(1), int(m.group(2)), (m.group(3) or "")[1:], " ".join(m.group(4).split())))

    problems = []
    bases = {}
    for base, ver, var, params in pfns:
        bases.setdefault(base, {}).setdefault(var, {})[ver] = params
    rows = []  # (base, version, variant, symbol)
    for base in sorted(bases):
        plain = bases[base].get("", {})
        chosen = {}
        vers = sorted(plain)
        for i, v in enumerate(vers):
            sym = base if i == 0 else f"{base}_v{i + 1}"
            if v == vers[-1] and base in top_macros:
                sym = top_macros[base]
            if not any(re.fullmatch(re.escape(base) + r"(_v\d+)?", s) for s in symbols):
                print(f"gen-driver-api: PFN_{base}_v{v}: not declared for Linux, skipped", file=sys.stderr)
                break
            want = signature(plain[v], aliases)
            if sym not in symbols or signature(symbols[sym], aliases) != want:
                cands = [s for s in symbols if re.fullmatch(re.escape(base) + r"(_v\d+)?", s)
                         and signature(symbols[s], aliases) == want and s not in chosen.values()]
                if len(cands) == 1:
                    sym = cands[0]
                elif sym not in symbols:
                    problems.append(f"PFN_{base}_v{v}: no exported symbol {sym} (candidates {cands})")
                    continue
                else:
                    problems.append(f"PFN_{base}_v{v}: {sym} declared ({symbols[sym]}), typedef ({plain[v]})")
            chosen[v] = sym
            rows.append((base, v, "", sym))
        for var in ("ptds", "ptsz"):
            for v in sorted(bases[base].get(var, {})):
                below = [x for x in chosen if x <= v]
                base_sym = chosen[max(below)] if below else (chosen[min(chosen)] if chosen else base)
                sym = f"{base_sym}_{var}"
                if sym not in symbols:
                    problems.append(f"PFN_{base}_v{v}_{var}: no exported symbol {sym}")
                    continue
                rows.append((base, v, var, sym))

    for base, v, sym in RENAMED:
        if sym not in symbols:
            problems.append(f"{base} -> {sym}: no such symbol")
        rows.append((base, v, "", sym))

    if args.check_stub:
        nm = subprocess.run(["nm", "-D", "--defined-only", args.check_stub], capture_output=True,
                            text=True, check=True).stdout
        stub = {l.split()[-1] for l in nm.splitlines() if l.split() and l.split()[-1].startswith("cu")}
        # The stub is for linking against cuda.h: it has no graphics interop.
        ours = {s for s in symbols if origin[s] in ("cuda.h", "cudaProfiler.h")}
        for s in sorted(stub - ours):
            problems.append(f"{args.check_stub} exports {s}, the headers declare no such symbol")
        for s in sorted(ours - stub):
            problems.append(f"the headers declare {s}, {args.check_stub} does not export it")
    for p in problems:
        print("gen-driver-api:", p, file=sys.stderr)
    if problems:
        sys.exit(1)

    # Types cuda_abi.h declares: a function type is emitted when all its
    # parameter types are among them.
    abi = strip_comments(open(os.path.join(ROOT, "src/cuda/cuda_abi.h")).read())
    known = set(re.findall(r"typedef[^;{]*?(\w+)\s*;", abi)) | set(re.findall(r"}\s*(\w+)\s*;", abi))
    known |= set(re.findall(r"typedef[^;]*?\(\s*\*\s*(\w+)\s*\)", abi))
    known |= {"size_t", "uint32_t", "uint64_t", "int64_t"}

    def types_known(params):
        for p in split_params(params):
            for tok in re.findall(r"[A-Za-z_]\w*", param_type(p)):
                if tok not in KEYWORDS and tok not in known:
                    return False
        return True

    regen = "scripts/gen-driver-api.py (reads a CUDA toolkit's headers)"
    head = (f"/* Generated by {regen} from CUDA {version // 1000}.{version % 1000 // 10}'s "
            f"cuda.h and its companions.\n * Do not edit: run scripts/gen-driver-api.py and commit "
            f"what it writes. */\n")

    typed = [s for s in sorted(symbols) if types_known(symbols[s])]
    with open(os.path.join(ROOT, "src/cuda/cuda_api.h"), "w") as f:
        f.write(head)
        f.write("/* The function type of each driver entry point whose parameter types\n"
                " * cuda_abi.h declares, named PFN_ and the exported symbol (cuMemAlloc_v2,\n"
                " * cuMemcpyHtoD_v2_ptds), as the driver's own build declares it. */\n")
        f.write("#ifndef VRAM_CUDA_API_H\n#define VRAM_CUDA_API_H\n\n")
        f.write(f"#define VRAM_CUDA_API_VERSION {version}\n\n")
        for s in typed:
            params = symbols[s] if split_params(symbols[s]) else "void"
            f.write(f"typedef CUresult (*PFN_{s})({params});\n")
        f.write("\n#endif\n")

    with open(os.path.join(ROOT, "src/cuda/cuda_prototypes.h"), "w") as f:
        f.write(head)
        f.write("/* A prototype of each driver entry point cuda_api.h has a type for, as the\n"
                " * driver's own build declares it (CUDAAPI is empty on Linux), for the\n"
                " * programs that call the driver by name: the test programs, linked to\n"
                " * libcuda.so.1 (the simulated one). vram itself never does: it dlopen()s\n"
                " * the driver (driver.h, src/preload/resolve.c), and nothing in src/\n"
                " * includes this file. */\n")
        f.write("#ifndef VRAM_CUDA_PROTOTYPES_H\n#define VRAM_CUDA_PROTOTYPES_H\n\n"
                "#include \"cuda_abi.h\"\n\n")
        for s in typed:
            params = symbols[s] if split_params(symbols[s]) else "void"
            f.write(f"CUresult {s}({params});\n")
        f.write("\n#endif\n")

    with open(os.path.join(ROOT, "sim/entry_points.inc"), "w") as f:
        f.write(head)
        f.write(f"/* {len(symbols)} exported symbols, {len(rows)} cuGetProcAddress rows.\n"
                " *\n"
                " * SIM_SYMBOL(name): an exported entry point.\n"
                " * SIM_FORWARD(name, to, params, args): a per-thread-default-stream variant of\n"
                " *     an entry point whose type cuda_abi.h knows; it does what `to` does.\n"
                " * SIM_PROC(\"base\", version, variant, symbol): cuGetProcAddress(base) with a\n"
                " *     CUDA version >= version hands out symbol (variant: 0, or SIM_PTDS for\n"
                " *     per-thread default stream); rows sorted by base, then version. */\n\n")
        ptds_of = {}
        for base, v, var, sym in rows:
            if var:
                plain_sym = sym[: -len("_" + var)]
                ptds_of[sym] = plain_sym
        for s in sorted(symbols):
            to = ptds_of.get(s)
            if to and to in symbols and types_known(symbols[s]) and \
                    signature(symbols[s], aliases) == signature(symbols[to], aliases):
                ps = split_params(symbols[s])
                names = [re.findall(r"\w+", p)[-1] for p in ps]
                f.write(f"SIM_FORWARD({s}, {to}, ({symbols[s] or 'void'}), ({', '.join(names)}))\n")
            else:
                f.write(f"SIM_SYMBOL({s})\n")
        f.write("\n")
        for base, v, var, sym in sorted(rows, key=lambda r: (r[0], r[1], r[2])):
            f.write(f"SIM_PROC(\"{base}\", {v}, {'SIM_PTDS' if var else 0}, {sym})\n")
    with open(os.path.join(ROOT, "sim/driver_enums.inc"), "w") as f:
        f.write(head)
        f.write("/* SIM_RESULT(name, value): every CUresult; SIM_ATTRIBUTE(name, value): every\n"
                " * CUdevice_attribute (some values have two names). */\n\n")
        text = strip_comments(cuda_h)
        results = enum_values(text, "cudaError_enum")
        attrs = [a for a in enum_values(text, "CUdevice_attribute_enum") if not a[0].endswith("_MAX")]
        for name, val in results:
            f.write(f"SIM_RESULT({name}, {val})\n")
        f.write("\n")
        for name, val in attrs:
            f.write(f"SIM_ATTRIBUTE({name}, {val})\n")
    print(f"gen-driver-api: CUDA {version}: {len(symbols)} symbols, {len(rows)} version rows, "
          f"{len(typed)} function types", file=sys.stderr)


if __name__ == "__main__":
    main()
