# SPDX-License-Identifier: MIT
"""Mutation testing: plant one classic student bug at a time in a solution, and see a test fail.

A chapter's tests are only as good as the wrong answers they reject. This tool takes each
`// @solution` region of solutions/NN_*/*.cu (the markers tools/exercises.py reads), plants one
bug at a time in it, builds that chapter for the CPU emulator from a private copy of the tree,
runs the region's exercise test in every thread order the maintainer tests use (the CUEMU_ORDER
values in tests/CMakeLists.txt), and records which test killed the mutant, or that none did.
The working files are never touched: each worker mutates its own copy under a temporary directory
and builds into its own BUILD directory, reusing the emulator runtime already built.

    make mutants                       every chapter (make -j2 mutants: two workers)
    make mutants CH=04                 one chapter; CH=04.1 one exercise
    python3 tools/mutants.py --list 04 the mutants, without running them
    python3 tools/mutants.py --show ID  one mutant as a diff

A mutant that survives is a bug the tests let through: strengthen a test, or, if the change
cannot alter what the code does, declare it in solutions/NN_*/mutants.txt (`ID reason`, one per
line). The same file plants bugs no operator makes (`plant NN.M FILE `OLD` -> `NEW` ...`, see
read_plants); those run in the --sample of make test too. A missing synchronisation, a race or a stream mix-up is never equivalent: a GPU shows it.
Exit status: 0 when every mutant is killed or declared, 1 otherwise (or when a declaration is
stale: its mutant is killed, or no longer exists), 2 when the run itself could not be done.
Results: BUILD/results/cpu/mutants/NN_topic.json (--sample: .../mutants-sample/).
"""
import argparse
import concurrent.futures
import contextlib
import hashlib
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import exercises  # noqa: E402  (the @solution marker parser: one parser for both tools)

REPO = Path(__file__).resolve().parent.parent
DECLARATIONS = "mutants.txt"

# Operators whose survivors a GPU shows as wrong results some of the time: never equivalent.
NEVER_EQUIVALENT = {"delete-syncthreads", "delete-sync", "default-stream"}


# ---- reading C/CUDA source -----------------------------------------------------------------------
def code_mask(text):
    """text with comments and string/char literals blanked to spaces (newlines kept), so the
    operators match code only and every offset still points into the real text."""
    out, i, n = list(text), 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
        else:
            i += 1
            continue
        for k in range(i, j):
            if out[k] != "\n":
                out[k] = " "
        i = j
    return "".join(out)


def match_close(masked, open_at):
    """Index of the bracket closing the one at open_at (-1 if none)."""
    return _match(masked, open_at, 1)


def match_open(masked, close_at):
    """Index of the bracket opening the one at close_at (-1 if none)."""
    return _match(masked, close_at, -1)


def _match(masked, at, step):
    """Walk from `at` in direction `step` to the bracket that balances the one at `at`."""
    inward, outward = ("([{", ")]}") if step > 0 else (")]}", "([{")
    depth = 0
    end = len(masked) if step > 0 else -1
    for i in range(at, end, step):
        c = masked[i]
        if c in inward:
            depth += 1
        elif c in outward:
            depth -= 1
            if depth == 0:
                return i
    return -1


def split_top(masked, start, end, sep=","):
    """(start, end) of each part of masked[start:end] split at `sep` outside any bracket."""
    parts, depth, first = [], 0, start
    for i in range(start, end):
        c = masked[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == sep and depth == 0:
            parts.append((first, i))
            first = i + 1
    parts.append((first, end))
    return parts


def strip_span(masked, start, end):
    while start < end and masked[start].isspace():
        start += 1
    while end > start and masked[end - 1].isspace():
        end -= 1
    return start, end


def prev_code(masked, pos):
    """Index of the last non-space character before pos (-1 if none)."""
    i = pos - 1
    while i >= 0 and masked[i].isspace():
        i -= 1
    return i


def next_code(masked, pos):
    i = pos
    while i < len(masked) and masked[i].isspace():
        i += 1
    return i


def word_before(masked, pos):
    m = re.search(r"([A-Za-z_]\w*)\s*$", masked[:pos])
    return (m.group(1), m.start(1)) if m else ("", pos)


def call_args(masked, name_end):
    """([(start, end) of each argument], index of the closing parenthesis) of the call whose
    name ends at name_end, or (None, None) when no call follows."""
    open_at = next_code(masked, name_end)
    if open_at >= len(masked) or masked[open_at] != "(":
        return None, None
    close = match_close(masked, open_at)
    if close < 0:
        return None, None
    if masked[open_at + 1:close].strip() == "":
        return [], close
    return [strip_span(masked, a, b) for a, b in split_top(masked, open_at + 1, close)], close


def function_start(masked, pos):
    """Offset of the `{` opening the top-level body (function) that contains pos, or -1."""
    depth, start = 0, -1
    for i in range(pos):
        c = masked[i]
        if c == "{":
            if depth == 0:
                start = i
            depth += 1
        elif c == "}":
            depth = max(depth - 1, 0)
            if depth == 0:
                start = -1
    return start


def statement_of_call(masked, name_start, name_end):
    """(start, end) of the whole statement made of this call alone, with its wrapper macro
    (CUDA_CHECK(...)) or (void) cast and its ';', or None when the call is part of an
    expression (`e = cudaFree(p);`, `if (cudaFree(p))`), which deleting would not compile."""
    _, close = call_args(masked, name_end)
    if close is None:
        return None
    start, end = name_start, close + 1
    while True:
        j = prev_code(masked, start)
        if j >= 0 and masked[j] == "(":          # a wrapper: CUDA_CHECK( call )
            word, wstart = word_before(masked, j)
            wclose = match_close(masked, j)
            if (word and word not in ("if", "while", "for", "switch", "return", "sizeof")
                    and next_code(masked, end) == wclose):
                start, end = wstart, wclose + 1
                continue
            return None
        cast = re.search(r"\(\s*void\s*\)\s*$", masked[:start])
        if cast:
            start = cast.start()
            continue
        break
    semi = next_code(masked, end)
    if semi >= len(masked) or masked[semi] != ";":
        return None
    end = semi + 1
    j = prev_code(masked, start)
    if j < 0 or masked[j] in ";{}:":
        return start, end
    if masked[:j + 1].endswith("else") and not re.search(r"\w", masked[j - 4:j - 3] or " "):
        return start, end
    if masked[j] == ")":                          # the body of an if/for/while without braces
        word, _ = word_before(masked, match_open(masked, j))
        if word in ("if", "for", "while"):
            return start, end
    return None


def blank_statement(text, start, end):
    """The replacement that deletes text[start:end]: an empty statement (safe as the body of an
    if or a loop), with the same number of lines so every later line keeps its number."""
    return ";" + "\n" * text.count("\n", start, end)


# ---- the operators ------------------------------------------------------------------------------
@dataclass
class Site:
    """One planted bug: edits (start, end, replacement) on one file's text."""
    op: str
    edits: list


OPERATORS = {}


def operator(name, what):
    def register(fn):
        OPERATORS[name] = (fn, what)
        return fn
    return register


def _deletions(masked, text, lo, hi, names, op):
    for m in re.finditer(r"\b(%s)\s*(?=\()" % "|".join(names), masked[lo:hi]):
        span = statement_of_call(masked, lo + m.start(1), lo + m.end(1))
        if span and lo <= span[0] and span[1] <= hi:
            yield Site(op, [(span[0], span[1], blank_statement(text, *span))])


@operator("delete-syncthreads", "a __syncthreads() or __syncwarp() deleted")
def op_delete_syncthreads(text, masked, lo, hi):
    yield from _deletions(masked, text, lo, hi, ["__syncthreads", "__syncwarp"],
                          "delete-syncthreads")


SYNC_CALLS = ["cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
              "cudaStreamWaitEvent"]


@operator("delete-sync", "a device, stream or event synchronisation deleted")
def op_delete_sync(text, masked, lo, hi):
    yield from _deletions(masked, text, lo, hi, SYNC_CALLS, "delete-sync")


FREE_CALLS = ["cudaFree", "cudaFreeHost", "cudaFreeAsync", "cudaFreeArray",
              "cudaHostUnregister", "cudaMemPoolDestroy"]


@operator("delete-free", "a cudaFree (FreeHost, FreeAsync, FreeArray, HostUnregister, "
                         "MemPoolDestroy) deleted")
def op_delete_free(text, masked, lo, hi):
    yield from _deletions(masked, text, lo, hi, FREE_CALLS, "delete-free")


@operator("free-on-success-only", "a free after the cleanup: label done only when nothing "
                                  "failed: the error paths leak")
def op_free_on_success_only(text, masked, lo, hi):
    for m in re.finditer(r"\b(%s)\s*(?=\()" % "|".join(FREE_CALLS), masked[lo:hi]):
        span = statement_of_call(masked, lo + m.start(1), lo + m.end(1))
        if not span or span[1] > hi:
            continue
        body = function_start(masked, span[0])
        before = masked[body:span[0]] if body >= 0 else ""
        if re.search(r"^\s*cleanup\s*:", before, re.M) and re.search(r"\bstatus\b", before):
            yield Site("free-on-success-only", [(span[0], span[0], "if (status == 0) ")])


FLIP = {"<": "<=", "<=": "<", ">": ">=", ">=": ">"}


def _conditions(masked, lo, hi):
    """Spans of the conditions of if/while/for and of ?: in masked[lo:hi]."""
    for m in re.finditer(r"\b(if|while|for)\s*\(", masked[lo:hi]):
        open_at = lo + m.end() - 1
        close = match_close(masked, open_at)
        if close < 0:
            continue
        if m.group(1) == "for":
            clauses = split_top(masked, open_at + 1, close, ";")
            if len(clauses) == 3:
                yield clauses[1]
        else:
            yield open_at + 1, close
    for m in re.finditer(r"\?", masked[lo:hi]):
        i, depth = lo + m.start() - 1, 0
        while i >= lo:
            c = masked[i]
            if c in ")]":
                depth += 1
            elif c in "([":
                if depth == 0:
                    break
                depth -= 1
            elif depth == 0 and (c in ",;{}?:" or (c == "=" and masked[i - 1] not in "=!<>"
                                                   and masked[i + 1] != "=")):
                break
            elif depth == 0 and re.match(r"\breturn\b", masked[i - 5:i + 1] + " "):
                break
            i -= 1
        yield i + 1, lo + m.start()


@operator("guard-off-by-one", "< and <=, > and >= swapped in an if, loop or ?: condition")
def op_guard_off_by_one(text, masked, lo, hi):
    seen = set()
    for start, end in _conditions(masked, lo, hi):
        for m in re.finditer(r"(?<![<>=!\-])(<=|>=|<|>)(?![<>=])", masked[start:end]):
            at = start + m.start()
            if at in seen:
                continue
            seen.add(at)
            yield Site("guard-off-by-one", [(at, at + len(m.group(1)), FLIP[m.group(1)])])


CAST = (r"(?:\(\s*(?:size_t|int|unsigned(?:\s+int)?|unsigned\s+long(?:\s+long)?"
        r"|long(?:\s+long)?)\s*\)\s*)?")
GLOBAL_INDEX = [
    CAST + r"blockIdx\.([xyz])\s*\*\s*" + CAST + r"blockDim\.{d}\s*\+\s*threadIdx\.{d}\b",
    CAST + r"blockDim\.([xyz])\s*\*\s*" + CAST + r"blockIdx\.{d}\s*\+\s*threadIdx\.{d}\b",
    r"threadIdx\.([xyz])\s*\+\s*" + CAST + r"blockIdx\.{d}\s*\*\s*" + CAST + r"blockDim\.{d}\b",
    r"threadIdx\.([xyz])\s*\+\s*" + CAST + r"blockDim\.{d}\s*\*\s*" + CAST + r"blockIdx\.{d}\b",
]


@operator("index-threadIdx-only", "the global index blockIdx * blockDim + threadIdx reduced "
                                  "to threadIdx")
def op_index_threadidx_only(text, masked, lo, hi):
    for pattern in GLOBAL_INDEX:
        for m in re.finditer(pattern.replace("{d}", r"\1"), masked[lo:hi]):
            yield Site("index-threadIdx-only",
                       [(lo + m.start(), lo + m.end(), f"threadIdx.{m.group(1)}")])


BUILTIN_XY = re.compile(r"\b(threadIdx|blockIdx|blockDim|gridDim)\.([xy])\b")
IDENT = r"[A-Za-z_]\w*"


@operator("xy-swapped", "x and y swapped in a 2D index: the built-ins, a [y][x] subscript, "
                        "or row * width + col")
def op_xy_swapped(text, masked, lo, hi):
    found = list(BUILTIN_XY.finditer(masked[lo:hi]))
    if {m.group(2) for m in found} == {"x", "y"}:
        yield Site("xy-swapped", [(lo + m.start(2), lo + m.end(2),
                                   "y" if m.group(2) == "x" else "x") for m in found])
    subscript = re.compile(r"(?<=[\w\]])\[\s*(%s(?:\.\w)?)\s*\]\s*\[\s*(%s(?:\.\w)?)\s*\]"
                           % (IDENT, IDENT))
    for m in subscript.finditer(masked[lo:hi]):
        line_start = masked.rfind("\n", 0, lo + m.start()) + 1
        if m.group(1) == m.group(2) or "__shared__" in masked[line_start:lo + m.start()]:
            continue
        yield Site("xy-swapped", [(lo + m.start(1), lo + m.end(1), m.group(2)),
                                  (lo + m.start(2), lo + m.end(2), m.group(1))])
    linear = re.compile(r"(?<![\w.>])(%s)\s*\*\s*(%s)\s*\+\s*(%s)\b(?!\s*(?:[\[(.]|->))"
                        % (IDENT, IDENT, IDENT))
    for m in linear.finditer(masked[lo:hi]):
        if m.group(1) == m.group(3):
            continue
        yield Site("xy-swapped", [(lo + m.start(1), lo + m.end(1), m.group(3)),
                                  (lo + m.start(3), lo + m.end(3), m.group(1))])


SIZEOF = r"sizeof\s*(?:\([^()]*\)|\*?\s*%s(?:->\w+)?)" % IDENT


@operator("sizeof-missing", "a byte count without its sizeof (n * sizeof(float) -> n)")
def op_sizeof_missing(text, masked, lo, hi):
    for m in re.finditer(r"\s*[*/]\s*" + SIZEOF, masked[lo:hi]):
        yield Site("sizeof-missing", [(lo + m.start(), lo + m.end(), "")])
    for m in re.finditer(r"(?<![*/]\s)(?<![*/])" + SIZEOF + r"\s*\*\s*", masked[lo:hi]):
        yield Site("sizeof-missing", [(lo + m.start(), lo + m.end(), "")])


@operator("copy-direction", "cudaMemcpyHostToDevice and cudaMemcpyDeviceToHost swapped")
def op_copy_direction(text, masked, lo, hi):
    for m in re.finditer(r"\bcudaMemcpy(HostToDevice|DeviceToHost)\b", masked[lo:hi]):
        other = "DeviceToHost" if m.group(1) == "HostToDevice" else "HostToDevice"
        yield Site("copy-direction", [(lo + m.start(1), lo + m.end(1), other)])


# the index of the stream argument (negative: from the end)
STREAM_ARG = {"cudaMemcpyAsync": -1, "cudaMemcpy2DAsync": -1, "cudaMemcpy3DAsync": -1,
              "cudaMemcpyToSymbolAsync": -1, "cudaMemcpyFromSymbolAsync": -1,
              "cudaMemcpy2DToArrayAsync": -1, "cudaMemcpy2DFromArrayAsync": -1,
              "cudaMemsetAsync": -1, "cudaMemset2DAsync": -1, "cudaMemset3DAsync": -1,
              "cudaMallocAsync": -1, "cudaMallocFromPoolAsync": -1, "cudaFreeAsync": -1,
              "cudaMemPrefetchAsync": -1, "cudaEventRecord": 1, "cudaStreamWaitEvent": 0,
              "cudaLaunchHostFunc": 0}
DEFAULT_STREAMS = {"0", "NULL", "nullptr", "0u", "cudaStreamLegacy", "cudaStreamPerThread"}


@operator("default-stream", "a stream argument (of a launch or an async call) replaced by the "
                            "default stream")
def op_default_stream(text, masked, lo, hi):
    spans = []
    for m in re.finditer(r"\b(%s)\s*(?=\()" % "|".join(STREAM_ARG), masked[lo:hi]):
        args, _ = call_args(masked, lo + m.end(1))
        k = STREAM_ARG[m.group(1)]
        if args and -len(args) <= k < len(args) and len(args) > (1 if k == 1 else 0):
            spans.append(args[k])
    for m in re.finditer(r"<<<", masked[lo:hi]):
        close = masked.find(">>>", lo + m.end())
        if 0 <= close <= hi:
            args = [strip_span(masked, a, b) for a, b in split_top(masked, lo + m.end(), close)]
            if len(args) == 4:
                spans.append(args[3])
    for start, end in spans:
        if masked[start:end] not in DEFAULT_STREAMS:
            yield Site("default-stream", [(start, end, "0")])


# (pitch argument indices, width argument index) of the pitched copies and sets
PITCHED = {"cudaMemcpy2D": ([1, 3], 4), "cudaMemcpy2DAsync": ([1, 3], 4),
           "cudaMemset2D": ([1], 3), "cudaMemset2DAsync": ([1], 3),
           "cudaMemcpy2DToArray": ([4], 5), "cudaMemcpy2DToArrayAsync": ([4], 5),
           "cudaMemcpy2DFromArray": ([1], 5), "cudaMemcpy2DFromArrayAsync": ([1], 5)}


@operator("pitch-as-width", "a row pitch replaced by the row width (a pitched copy's pitch "
                            "argument, or the pitch in an address computation)")
def op_pitch_as_width(text, masked, lo, hi):
    calls = []   # the pitched calls' spans: a pitch inside them is the case above, once
    for m in re.finditer(r"\b(%s)\s*(?=\()" % "|".join(PITCHED), masked[lo:hi]):
        args, close = call_args(masked, lo + m.end(1))
        pitches, width = PITCHED[m.group(1)]
        if not args or len(args) <= max(pitches + [width]):
            continue
        calls.append((lo + m.start(), close))
        w = masked[slice(*args[width])]
        for p in pitches:
            if masked[slice(*args[p])] != w:
                yield Site("pitch-as-width", [(args[p][0], args[p][1], w)])
    body = function_start(masked, lo)
    scope = masked[max(masked.rfind("}", 0, body), 0):hi] if body >= 0 else masked[lo:hi]
    for m in re.finditer(r"\b\w*pitch\w*\b", masked[lo:hi], re.I):
        name, at = m.group(), lo + m.start()
        before, after = prev_code(masked, at), next_code(masked, lo + m.end())
        if name.isupper() or (before >= 0 and masked[before] == "&"):
            continue
        if any(start <= at < end for start, end in calls):
            continue
        if before >= 0 and masked[before] == "*":   # *pitch, a dereference, is not a product
            ahead = prev_code(masked, before)
            if ahead < 0 or masked[ahead] in "(,=;{}?:+-*/%&|<>!":
                continue
        in_arithmetic = ((before >= 0 and masked[before] in "*/+")
                         or (after < len(masked) and masked[after] in "*/"))
        if not in_arithmetic:
            continue
        widths = sorted({w for w in re.findall(r"\b\w+\b", scope)
                         if re.fullmatch(r"(?i)\w*width\w*|w|cols|ncols|nx", w) and w != name})
        for w in widths[:2]:
            yield Site("pitch-as-width", [(at, lo + m.end(), w)])


PAD = r"\s*\+\s*(?:1|[A-Z_]*PAD[A-Z_0-9]*)\b"


@operator("pad-removed", "a shared-memory pad removed ([TILE][TILE + 1] -> [TILE][TILE])")
def op_pad_removed(text, masked, lo, hi):
    for line in re.finditer(r"[^\n]*\n?", masked[lo:hi]):
        s, e = lo + line.start(), lo + line.end()
        code = masked[s:e]
        if "__shared__" in code:
            for b in re.finditer(r"\[", code):
                close = match_close(masked, s + b.start())
                for m in re.finditer(PAD, masked[s + b.start():close]):
                    yield Site("pad-removed", [(s + b.start() + m.start(),
                                                s + b.start() + m.end(), "")])
        define = re.match(r"\s*#\s*define\s+(\w+)", code)
        if define and re.search(r"(?i)pitch|pad|stride|ld", define.group(1)):
            for m in re.finditer(PAD, code[define.end():]):
                at = s + define.end() + m.start()
                yield Site("pad-removed", [(at, s + define.end() + m.end(), "")])


# ---- mutants ------------------------------------------------------------------------------------
@dataclass
class Mutant:
    id: str
    chapter: str
    file: str          # name within the chapter's folder
    line: int
    op: str
    exercise: str
    before: str        # the changed lines, each stripped, joined by one space
    after: str
    text: str = field(repr=False)   # the whole mutated file
    names: str = ""    # planted: "file.cu:N" the killing test's message must name
    why: str = ""      # planted: the bug, in words

    def where(self):
        return f"{self.file}:{self.line}"

    def change(self, width=None):
        """`before  ->  after` on one line; with `width`, cut down to the part that differs."""
        b, a = self.before, self.after or "(deleted)"
        if not width or len(b) + len(a) + 6 <= width:
            return f"{b}  ->  {a}"
        if not self.after:
            return f"{b[:width - 15]}…  ->  {a}"
        p = 0
        while p < min(len(a), len(b)) and a[p] == b[p]:
            p += 1
        s = 0
        while s < min(len(a), len(b)) - p and a[-1 - s] == b[-1 - s]:
            s += 1
        ctx, lo = 14, max(p - 14, 0)

        def cut(x):
            x = ("…" if lo else "") + x[lo:len(x) - s + ctx] + ("…" if s > ctx else "")
            half = (width - 6) // 2   # changes spread over a long line: cut both sides
            return x if len(x) <= half else x[:half - 1] + "…"
        return f"{cut(b)}  ->  {cut(a)}"


def apply_edits(text, edits):
    out, at = [], 0
    for start, end, repl in sorted(edits):
        assert start >= at, "overlapping edits"
        assert text.count("\n", start, end) == repl.count("\n"), "an edit moved later lines"
        out += [text[at:start], repl]
        at = end
    out.append(text[at:])
    return "".join(out)


def chapter_mutants(chapter, problems=None):
    """Every mutant of one chapter's solution regions, in file and line order, then the bugs
    planted by hand (read_plants)."""
    return [m for path in sorted((REPO / "solutions" / chapter).glob("*.cu"))
            for m in file_mutants(path, path.read_text(), chapter)] + read_plants(
                chapter, [] if problems is None else problems)


PLANT = re.compile(r"plant\s+(\d\d\.\d+)\s+(\S+\.cu)\s+`((?:[^`\\]|\\.)+)`\s*->\s*"
                   r"`((?:[^`\\]|\\.)*)`(?:\s+names\s+`((?:[^`\\]|\\.)+)`)?\s+(\S.*)")


def _unescape(s):
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), s)


def read_plants(chapter, problems):
    """The bugs planted by hand in solutions/<chapter>/mutants.txt, for mistakes no operator
    makes (an argument with the right type and the wrong meaning, two calls in the wrong
    order, a call too many). One per line:

        plant NN.M FILE `OLD` -> `NEW` [names `TEXT`] WHY

    OLD occurs exactly once in FILE (anywhere in it, a @solution region or not) and is replaced
    by NEW, with as many line breaks (`\\n`; a backquote is `\\``): every later line keeps its
    number. Exercise NN.M's test must kill it. With `names`, the killing message must also
    name FILE:N, N the line of the mutated file that holds TEXT: a diagnosis at the right line."""
    path = REPO / "solutions" / chapter / DECLARATIONS
    out = []
    if not path.exists():
        return out
    for n, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line.startswith("plant"):
            continue
        where = f"{path.relative_to(REPO)}:{n}"
        m = PLANT.fullmatch(line)
        if not m:
            problems.append(f"{where}: expected `plant NN.M FILE `OLD` -> `NEW` [names `TEXT`] "
                            f"why`")
            continue
        ex, name, old, new, names, why = m.groups()
        old, new = _unescape(old), _unescape(new)
        src = REPO / "solutions" / chapter / name
        text = src.read_text() if src.exists() else ""
        if text.count(old) != 1 or old.count("\n") != new.count("\n"):
            problems.append(f"{where}: `{old}` must occur once in {name} (it occurs "
                            f"{text.count(old)} times), and `NEW` must have as many line breaks")
            continue
        at = text.index(old)
        mutated = text[:at] + new + text[at + len(old):]
        first = text.count("\n", 0, at)
        lines, new_lines = text.splitlines(), mutated.splitlines()
        span = range(first, first + old.count("\n") + 1)
        named = ""
        if names:
            names = _unescape(names)
            hits = [k for k, l in enumerate(new_lines, 1) if names in l]
            if len(hits) != 1:
                problems.append(f"{where}: names `{names}` must be on one line of the mutated "
                                f"{name} ({len(hits)} lines hold it)")
                continue
            named = f"{name}:{hits[0]}"
        before = " ".join(lines[k].strip() for k in span)
        after = " ".join(new_lines[k].strip() for k in span if new_lines[k].strip())
        digest = hashlib.sha1(f"{name}|planted|{before}|{after}".encode()).hexdigest()[:8]
        out.append(Mutant(digest, chapter, name, first + 1, "planted", ex, before, after,
                          mutated, named, why))
    return out


def file_mutants(path, text, chapter):
    """Every mutant of one solution file's regions, in line order."""
    out = []
    masked = code_mask(text)
    line_at = [0]
    for line in text.splitlines(keepends=True):
        line_at.append(line_at[-1] + len(line))
    lines = text.splitlines()
    seen = {}
    for region in exercises.solution_regions(path, text):
        lo, hi = line_at[region["line"]], line_at[region["end"] - 1]
        sites = []
        for fn, _ in OPERATORS.values():
            sites += list(fn(text, masked, lo, hi))
        sites.sort(key=lambda s: (min(e[0] for e in s.edits), list(OPERATORS).index(s.op)))
        for site in sites:
            mutated = apply_edits(text, site.edits)
            new_lines = mutated.splitlines()
            changed = sorted({n for start, end, _ in site.edits
                              for n in range(text.count("\n", 0, start),
                                             text.count("\n", 0, max(start, end - 1)) + 1)})
            changed = [n for n in changed if lines[n] != new_lines[n]] or changed
            line = changed[0] + 1
            # a change in the continuation of a statement is shown with the statement's start
            masked_lines = masked.splitlines()
            while (changed[0] > region["line"]
                   and re.search(r"[,(+\-*/%&|=<>?]\s*$", masked_lines[changed[0] - 1])):
                changed.insert(0, changed[0] - 1)
            before = " ".join(lines[n].strip() for n in changed).strip()
            after = " ".join(new_lines[n].strip() for n in changed if new_lines[n].strip())
            after = "" if after == ";" else after
            key = f"{path.name}|{site.op}|{before}|{after}"
            seen[key] = seen.get(key, -1) + 1
            digest = hashlib.sha1(f"{key}|{seen[key]}".encode()).hexdigest()[:8]
            out.append(Mutant(digest, chapter, path.name, line, site.op,
                              region["id"], before, after, mutated))
    return out


def read_declarations(chapter, problems):
    """{id: reason} from solutions/<chapter>/mutants.txt."""
    path = REPO / "solutions" / chapter / DECLARATIONS
    declared = {}
    if not path.exists():
        return declared
    for n, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#") or line.startswith("plant"):
            continue
        m = re.fullmatch(r"([0-9a-f]{8})\s+(\S.*)", line)
        if not m:
            problems.append(f"{path.relative_to(REPO)}:{n}: expected `<8-hex-digit id> <reason>`")
            continue
        declared[m.group(1)] = m.group(2)
    return declared


# ---- where things are -------------------------------------------------------------------------
def chapters_with_regions():
    return [d.name for d in sorted(REPO.glob("solutions/[0-9][0-9]_*")) if d.is_dir()
            and any(exercises.solution_regions(p, p.read_text()) for p in d.glob("*.cu"))]


def solved_chapters():
    return [d.name for d in sorted(REPO.glob("solutions/[0-9][0-9]_*")) if d.is_dir()]


def select(wanted):
    """Chapters (and exercise ids, None for all) from arguments like 04, 04_shared_memory, 04.1."""
    known, chosen = solved_chapters(), {}
    for w in wanted or [c[:2] for c in chapters_with_regions()]:
        ex = re.fullmatch(r"(\d\d)\.\d+", w)
        prefix = ex.group(1) if ex else w
        match = [c for c in known if c == prefix or c.startswith(prefix + "_")]
        if not match:
            raise SystemExit(f"error: no chapter in solutions/ matches {w!r} "
                             f"(known: {', '.join(known)})")
        ids = chosen.setdefault(match[0], set())
        if ids is not None:
            chosen[match[0]] = ids | {w} if ex else None
    return chosen


def thread_orders():
    """The CUEMU_ORDER values the maintainer tests run the solutions in (tests/CMakeLists.txt),
    so a mutant is judged by the same orders that judge the solution."""
    text = (REPO / "tests" / "CMakeLists.txt").read_text()
    orders = []
    for m in re.finditer(r'add_chapter_tests\("solution/[^)]*?"CUEMU_ORDER=([^";]+)"', text):
        if m.group(1) not in orders:
            orders.append(m.group(1))
    return orders or ["forward"]


def clean_env(**extra):
    """The environment for child processes, without make's jobserver: the makes this tool
    starts are not children of the make that started it."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    env.update(extra)
    return env


def jobs_from_make():
    m = re.search(r"(?:^|\s)-j\s*(\d+)", " " + os.environ.get("MAKEFLAGS", ""))
    return int(m.group(1)) if m else None


# ---- building and running one mutant ------------------------------------------------------------
# The test processes running now (each in its own session, so a timeout kills its children too).
LIVE, LIVE_LOCK = set(), threading.Lock()


class Workspace:
    """A worker's private tree: the repository's Makefile, requirements.txt, common/, emu/ and
    tools/ (links: the Makefile includes tools/classroom.mk), a copy of
    one chapter's solutions, and a BUILD directory of its own that reuses the emulator runtime,
    rewriter and tut_check.o already built in the main BUILD."""

    def __init__(self, root, build):
        self.root, self.build, self.own_build = root, build, root / "build"
        for name in ("Makefile", "requirements.txt", "common", "emu", "tools"):
            (root / name).symlink_to(REPO / name)
        tut_check = self.own_build / "cpu" / "common" / "tut_check.o"
        tut_check.parent.mkdir(parents=True)
        shutil.copy2(build / "cpu" / "common" / "tut_check.o", tut_check)
        self.make_cmd = [
            "make", "-C", str(root), "--no-print-directory", "-s", "BACKEND=cpu",
            f"BUILD={self.own_build}", f"EMU_BUILD={build}/emu",
            f"EMU_REWRITE={build}/emu/cuemu-rewrite", f"PYTHON={sys.executable}",
            "-o", f"{build}/emu/libcuemu.a", "-o", f"{build}/emu/cuemu-rewrite",
            "-o", f"{build}/emu/emu.flags", "-o", str(tut_check)]
        # Nor the main BUILD's precompiled header (clang's or gcc's): remade here after an
        # emulator header changed, it would name this tree's paths and break the main build
        # once the tree is gone (main() made it fresh before the workers started).
        self.make_cmd += ["-o", f"{build}/emu/pch/cuda_runtime.h.pch",
                          "-o", f"{build}/emu/pch/cuda_runtime.h.gch"]

    def library(self, chapter):
        return self.own_build / "cpu" / "solutions" / f"lib{chapter}.so"

    def build_chapter(self, chapter, mutant=None, timeout=600):
        """Build the chapter's library from a fresh copy (with the mutant's file replaced).
        Returns '' or the compiler's first error line."""
        src = self.root / "solutions" / chapter
        shutil.rmtree(src, ignore_errors=True)
        shutil.copytree(REPO / "solutions" / chapter, src)
        if mutant is not None:
            (src / mutant.file).write_text(mutant.text)
        lib = self.library(chapter)
        lib.unlink(missing_ok=True)
        try:
            r = subprocess.run(self.make_cmd + [str(lib)], capture_output=True, text=True,
                               env=clean_env(), timeout=timeout)
        except subprocess.TimeoutExpired:
            return f"the build took more than {timeout} s"
        if r.returncode == 0 and lib.exists():
            return ""
        # the compiler's first error, else make's ("*** [...] Error 1", naming the rule)
        errors = [l for l in (r.stderr + r.stdout).splitlines() if "error" in l.lower()]
        return (errors or (r.stderr + r.stdout).strip().splitlines() or ["make failed"])[0]

    def run_tests(self, chapter, ids, order, seed, timeout, watchdog=None):
        """Run the chapter's driver on ids in one thread order. Returns (results by id, a line
        saying why there are none: a crash or a timeout)."""
        out = self.root / f"result-{order.replace(':', '-')}.json"
        out.unlink(missing_ok=True)
        cmd = [sys.executable, str(REPO / "chapters" / chapter / "driver.py"), "--check",
               "--only", ",".join(ids), "--seed", str(seed), "--json", str(out)]
        env = clean_env(TUT_BACKEND="cpu", TUT_TREE="solutions", TUT_BUILD=str(self.own_build),
                        CUEMU_ORDER=order)
        if watchdog and "CUEMU_WATCHDOG_S" not in os.environ:
            env["CUEMU_WATCHDOG_S"] = str(watchdog)
        # errors="replace": a mutant may print any bytes (a string it never terminated)
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                errors="replace", env=env, cwd=str(self.root),
                                start_new_session=True)
        with LIVE_LOCK:
            LIVE.add(proc)
        try:
            output, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return {}, f"timeout: no result after {timeout:.0f} s (a hang?)"
        finally:
            with LIVE_LOCK:
                LIVE.discard(proc)
        results = {}
        if out.exists():
            try:
                results = {r["id"]: r for r in json.loads(out.read_text())}
            except (ValueError, KeyError):
                results = {}
        if results:
            return results, ""
        if proc.returncode < 0:
            why = f"crash: {signal.Signals(-proc.returncode).name}"
        else:
            why = f"exit status {proc.returncode} with no results"
        tail = [l for l in output.strip().splitlines() if l.strip()][-1:] or [""]
        return {}, f"{why}: {tail[0].strip()}"[:300]


def names_line(message, where):
    """Whether message names where ("file.cu:LINE"): that line, or a range of lines around it,
    as the emulator's watchdog names a loop ("file.cu:251-253": the lines its samples fell on).
    A loop's header (its test and step) is the line above its body, and the samples of a busy
    machine may all fall in the body: a range that starts on the line below counts."""
    if re.search(re.escape(where) + r"(?![0-9])", message):   # not k.cu:2511 for k.cu:251
        return True
    file, _, line = where.rpartition(":")
    if not line.isdigit():
        return False
    return any(int(lo) - 1 <= int(line) <= int(hi)
               for lo, hi in re.findall(re.escape(file) + r":(\d+)-(\d+)", message))


def first_line(message):
    return next((l.strip() for l in message.splitlines() if l.strip()), "")


def judge(ws, mutant, orders, seed, timeout):
    """Build and test one mutant. Returns its result dict."""
    started = time.perf_counter()
    res = {"id": mutant.id, "chapter": mutant.chapter, "exercise": mutant.exercise,
           "file": f"solutions/{mutant.chapter}/{mutant.file}", "line": mutant.line,
           "operator": mutant.op, "before": mutant.before, "after": mutant.after}
    error = ws.build_chapter(mutant.chapter, mutant)
    if error:
        res.update(status="stillborn", killed_by=None, message=f"did not compile: {error}")
    else:
        res.update(status="survived", killed_by=None, message="")
        for order in orders:
            results, why = ws.run_tests(mutant.chapter, [mutant.exercise], order, seed,
                                        timeout.get((mutant.exercise, order), timeout["default"]),
                                        timeout.get(("watchdog", mutant.exercise)))
            r = results.get(mutant.exercise)
            if r is None or r["status"] not in ("PASS", "SKIP"):
                res.update(status="killed", killed_by=f"{mutant.exercise} {order}",
                           message=first_line(r["message"]) if r else why)
                if mutant.names and (r is None or not names_line(r["message"], mutant.names)):
                    # caught, but the diagnosis points elsewhere: the student is sent to the
                    # wrong line, which counts as a survivor
                    res.update(status="misnamed", message=(
                        f"the message does not name {mutant.names}: "
                        + " | ".join(l.strip() for l in (r["message"] if r else why)
                                     .splitlines() if l.strip())[:400]))
                break
            if r["status"] == "SKIP":
                res.update(status="unrun", message=first_line(r["message"]))
                break
    res["seconds"] = round(time.perf_counter() - started, 2)
    return res


# ---- the run ------------------------------------------------------------------------------------
class Pool:
    """Workspaces handed to worker threads, one each: each thread drives its own processes."""

    def __init__(self, base, build, jobs):
        self.free = [Workspace(self._dir(base, k), build) for k in range(jobs)]
        self.lock = threading.Lock()

    @staticmethod
    def _dir(base, k):
        d = base / f"w{k}"
        d.mkdir()
        return d

    def run(self, fn, *args):
        with self.lock:
            ws = self.free.pop()
        try:
            return fn(ws, *args)
        finally:
            with self.lock:
                self.free.append(ws)


def baseline(ws, chapter, ids, orders, seed):
    """The unmutated chapter must pass the exercises' tests in every order; their times set
    the mutants' timeouts. Returns (problem or '', {(id, order): seconds}, {id: why skipped}):
    an exercise the emulator cannot run (its test skips there) has its
    mutants left out, said, and counted nowhere."""
    error = ws.build_chapter(chapter)
    if error:
        return f"the unmutated solutions do not compile: {error}", {}, {}
    times, skipped = {}, {}
    for order in orders:
        results, why = ws.run_tests(chapter, sorted(ids), order, seed, 600)
        for i in sorted(ids):
            r = results.get(i)
            if r is not None and r["status"] == "SKIP":
                skipped[i] = first_line(r["message"])
                continue
            if r is None or r["status"] != "PASS":
                return (f"the unmutated solution fails {i} in order {order}: "
                        f"{first_line(r['message']) if r else why}"), {}, {}
            times[(i, order)] = r["seconds"]
    return "", times, skipped


def sample(mutants, declared, n):
    """A fixed choice of at most n mutants: the last site of each operator, in this order:
    first the kinds the emulator always catches, none of the sync and stream ones (which
    survive until the emulator's streams run asynchronously). The last site, because a loop's
    first guard often only reads one element too far, which a test may or may not notice."""
    prefer = ["copy-direction", "sizeof-missing", "index-threadIdx-only", "pad-removed",
              "delete-free", "xy-swapped", "guard-off-by-one", "free-on-success-only"]
    picked = []
    for op in prefer:
        for m in reversed(mutants):
            if m.op == op and m.id not in declared and len(picked) < n:
                picked.append(m)
                break
    # the bugs planted by hand are few, and each is there because no operator makes it
    return picked + [m for m in mutants if m.op == "planted"]


def exercise_ids(chapter):
    return sorted({r["id"] for p in (REPO / "solutions" / chapter).glob("*.cu")
                   for r in exercises.solution_regions(p, p.read_text())},
                  key=lambda e: [int(x) for x in e.split(".")])


def print_chapter(chapter, results, declared, ops_applied, stale, wall, no_site):
    width = 76
    print(f"\n== {chapter} ==")
    by_ex = {}
    for r in results:
        by_ex.setdefault(r["exercise"], []).append(r)
    for ex in sorted(by_ex, key=lambda e: [int(x) for x in e.split(".")]):
        rows = by_ex[ex]
        print(f"\n{ex}: {len(rows)} mutant(s)")
        print(f"  {'mutant':<8}  {'where':<28}  {'operator':<20}  {'change':<{width}}  result")
        for r in rows:
            where = f"{Path(r['file']).name}:{r['line']}"
            m = Mutant(r["id"], chapter, "", 0, r["operator"], ex, r["before"], r["after"], "")
            if r["status"] == "killed":
                result = f"killed by {r['killed_by']}: {r['message']}"
            elif r["status"] == "declared":
                result = f"survived, declared: {declared.get(r['id'], '')}"
            elif r["status"] == "declared-but-killed":
                result = f"DECLARED BUT KILLED by {r['killed_by']}: {r['message']}"
            elif r["status"] == "survived":
                result = "SURVIVED"
            elif r["status"] == "misnamed":
                result = f"MISNAMED by {r['killed_by']}: {r['message']}"
            else:
                result = f"{r['status']}: {r['message']}"
            print(f"  {r['id']:<8}  {where:<28}  {r['operator']:<20}  "
                  f"{m.change(width):<{width}}  {result[:140]}")
    t = totals(results)
    print(f"\n{chapter}: {t['mutants']} mutants: {t['killed']} killed, {t['survived']} survived"
          f" ({t['declared']} declared equivalent), {t['declared-but-killed']} declared but "
          f"killed, {t['stillborn']} did not compile, {t['unrun']} not run; {wall:.0f} s")
    print("  operators that applied: " + ", ".join(f"{op} {n}" for op, n in ops_applied.items()
                                                  if n) or "none")
    if no_site:
        print("  exercises where no operator applies: " + ", ".join(no_site))
    absent = [op for op, n in ops_applied.items() if not n]
    if absent:
        print("  operators with no site here (skipped, not counted): " + ", ".join(absent))
    for s in stale:
        print(f"  STALE DECLARATION: {s}")


def totals(results):
    t = {k: 0 for k in ("killed", "survived", "declared", "declared-but-killed", "stillborn",
                        "unrun", "misnamed")}
    for r in results:
        t[r["status"]] += 1
    t["mutants"] = len(results) - t["stillborn"]
    return t


def run(args):
    build = Path(args.build).resolve()
    orders = args.order or thread_orders()
    chosen = select(args.chapters)
    jobs = args.jobs or jobs_from_make() or os.cpu_count() or 1
    out_dir = build / "results" / "cpu" / ("mutants-sample" if args.sample else "mutants")
    before = {p: p.read_bytes() for p in REPO.glob("solutions/*/*.cu")}
    if not args.no_prepare:   # the emulator runtime, rewriter, PCH and tut_check.o, built once here
        r = subprocess.run(["make", "-s", "--no-print-directory", "BACKEND=cpu",
                            f"BUILD={args.build}", f"PYTHON={sys.executable}", "emu-lib",
                            f"{args.build}/cpu/common/tut_check.o"], cwd=REPO, env=clean_env())
        if r.returncode:
            print("error: could not build the emulator runtime (see above)", file=sys.stderr)
            return 2
    if args.prepare_only:
        return 0
    print(f"mutation testing: {', '.join(chosen)}; orders {', '.join(orders)}; seed {args.seed}; "
          f"{jobs} worker(s)" + (f"; a fixed sample of {args.sample} per chapter"
                                 if args.sample else ""))
    exit_code, grand, started_all, survivors = 0, [], time.perf_counter(), []
    base = Path(tempfile.mkdtemp(prefix="mutants-"))
    ex = concurrent.futures.ThreadPoolExecutor(jobs)
    try:
        pool = Pool(base, build, jobs)
        for chapter, ids in chosen.items():
            started = time.perf_counter()
            problems = []
            declared = read_declarations(chapter, problems)
            mutants = [m for m in chapter_mutants(chapter, problems)
                       if ids is None or m.exercise in ids]
            ops_applied = {op: sum(m.op == op for m in mutants) for op in OPERATORS}
            if args.sample:
                mutants = sample(mutants, declared, args.sample)
            for m in mutants:
                if m.id in declared and m.op in NEVER_EQUIVALENT:
                    problems.append(f"{m.id} is declared equivalent, but a {m.op} mutant "
                                    f"never is: a GPU shows it")
            timeout = {"default": args.timeout}
            if not args.no_baseline and mutants:
                problem, times, skipped = pool.run(baseline, chapter,
                                                   {m.exercise for m in mutants}, orders,
                                                   args.seed)
                if problem:
                    print(f"\n== {chapter} ==\nERROR: {problem}")
                    exit_code = 2
                    continue
                for ex_id, why in sorted(skipped.items()):
                    left = sum(m.exercise == ex_id for m in mutants)
                    print(f"  {ex_id}: its test skips on the emulator ({why}): its {left} "
                          f"mutant(s) are not run here", file=sys.stderr)
                mutants = [m for m in mutants if m.exercise not in skipped]
                # a mutant that hangs a kernel (a loop that never ends) is stopped by the
                # emulator's watchdog: seconds, not its default 20, when the test takes less
                timeout.update({k: max(args.timeout / 4, 20 * s) for k, s in times.items()})
                for (ex_id, _), secs in times.items():
                    w = min(20, max(5, math.ceil(5 * secs)))
                    timeout[("watchdog", ex_id)] = max(w, timeout.get(("watchdog", ex_id), 0))
            futures = [ex.submit(pool.run, judge, m, orders, args.seed, timeout)
                       for m in mutants]
            results = []
            for k, f in enumerate(futures, 1):
                r = f.result()
                if (r["id"] in declared and r["status"] == "survived"
                        and r["operator"] not in NEVER_EQUIVALENT):
                    r["status"] = "declared"
                elif r["id"] in declared and r["status"] == "killed":
                    r["status"] = "declared-but-killed"
                results.append(r)
                if not args.quiet:
                    print(f"  [{k}/{len(mutants)}] {chapter[:2]} {r['id']} {r['operator']:<20} "
                          f"{r['status']} ({r['seconds']:.1f} s)", file=sys.stderr, flush=True)
            generated = {m.id for m in chapter_mutants(chapter)}
            stale = problems + [f"{i} is declared in solutions/{chapter}/{DECLARATIONS} but "
                                f"no such mutant exists any more" for i in declared
                                if i not in generated]
            stale += [f"{r['id']} is declared equivalent but {r['killed_by']} kills it: "
                      f"remove it from solutions/{chapter}/{DECLARATIONS}"
                      for r in results if r["status"] == "declared-but-killed"]
            wall = time.perf_counter() - started
            everything = {m.exercise for m in chapter_mutants(chapter)}
            no_site = [e for e in exercise_ids(chapter)
                       if e not in everything and (ids is None or e in ids)]
            print_chapter(chapter, results, declared, ops_applied, stale, wall, no_site)
            survivors += [r for r in results if r["status"] in ("survived", "misnamed")]
            if stale or any(r["status"] in ("survived", "unrun", "misnamed") for r in results):
                exit_code = max(exit_code, 1)
            if any(r["status"] == "stillborn" for r in results):
                print("  note: a mutant that does not compile is a fault of the operator, "
                      "not of the tests: please report it")
            out_dir.mkdir(parents=True, exist_ok=True)
            (out_dir / f"{chapter}.json").write_text(json.dumps({
                "chapter": chapter, "orders": orders, "seed": args.seed, "jobs": jobs,
                "wall_s": round(wall, 1), "totals": totals(results),
                "operators": ops_applied, "declaration_problems": stale,
                "sample": args.sample or None, "mutants": results}, indent=1))
            grand += results
        ex.shutdown()
    except BaseException:   # Ctrl-C: drop the queued mutants, stop the running tests
        signal.signal(signal.SIGINT, signal.SIG_IGN)   # a second Ctrl-C must not stop the cleanup
        ex.shutdown(wait=False, cancel_futures=True)
        with LIVE_LOCK:
            for proc in LIVE:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
        raise
    finally:
        shutil.rmtree(base, ignore_errors=True)
    changed = [p for p, b in before.items() if not p.exists() or p.read_bytes() != b]
    if changed:   # cannot happen by design: mutants live in copies; say so loudly if it does
        print(f"error: solution files changed during the run: {changed}", file=sys.stderr)
        exit_code = 2
    t = totals(grand)
    print(f"\nall: {t['mutants']} mutants: {t['killed']} killed, {t['survived']} survived, "
          f"{t['declared']} declared equivalent; wall time {time.perf_counter() - started_all:.0f}"
          f" s with {jobs} worker(s) on {os.cpu_count()} core(s); results in "
          f"{out_dir.relative_to(REPO) if out_dir.is_relative_to(REPO) else out_dir}/")
    for r in survivors:
        print(f"  SURVIVED {r['chapter'][:2]} {r['id']} {r['operator']:<20} "
              f"{Path(r['file']).name}:{r['line']}  {r['before']}  ->  {r['after'] or '(deleted)'}")
    if survivors:
        print("each survivor needs a test that kills it, or (only if it cannot change what the "
              "code does) a line `ID reason` in solutions/NN_*/mutants.txt")
    return exit_code


def show(mutant_id):
    import difflib
    for chapter in chapters_with_regions():
        for m in chapter_mutants(chapter):
            if m.id == mutant_id:
                path = REPO / "solutions" / chapter / m.file
                sys.stdout.writelines(difflib.unified_diff(
                    path.read_text().splitlines(keepends=True), m.text.splitlines(keepends=True),
                    str(path.relative_to(REPO)), f"mutant {m.id} ({m.op}, {m.exercise})", n=2))
                return 0
    print(f"error: no mutant {mutant_id}", file=sys.stderr)
    return 2


def main(argv=None):
    sys.stdout.reconfigure(line_buffering=True)   # progress (stderr) and tables interleave right
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="operators:\n" + "\n".join(
                                    f"  {n:<22}{w}" for n, (_, w) in OPERATORS.items()))
    p.add_argument("chapters", nargs="*", metavar="CH",
                   help="chapters (04, 04_shared_memory) or exercises (04.1); default: all")
    p.add_argument("-j", "--jobs", type=int, help="workers (default: make's -j, else the cores)")
    p.add_argument("--build", default="build", help="the make BUILD directory (default: build)")
    p.add_argument("--seed", type=int, default=1, help="the tests' seed (default: 1)")
    p.add_argument("--order", action="append",
                   help="a CUEMU_ORDER to run (repeatable; default: tests/CMakeLists.txt's)")
    p.add_argument("--timeout", type=float, default=240,
                   help="seconds a test run may take before the mutant counts as a hang")
    p.add_argument("--sample", type=int, metavar="N",
                   help="only a fixed sample of N mutants per chapter (make test)")
    p.add_argument("--list", action="store_true", help="list the mutants and exit")
    p.add_argument("--show", metavar="ID", help="print one mutant as a diff and exit")
    p.add_argument("--no-baseline", action="store_true",
                   help="skip the check that the unmutated solutions pass first")
    p.add_argument("--no-prepare", action="store_true",
                   help="do not (re)build the emulator runtime first")
    p.add_argument("--prepare-only", action="store_true",
                   help="only build the emulator runtime the mutants reuse, then exit")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    args = p.parse_args(argv)
    if args.show:
        return show(args.show)
    if args.list:
        for chapter, ids in select(args.chapters).items():
            for m in chapter_mutants(chapter):
                if ids is None or m.exercise in ids:
                    print(f"{m.id}  {m.exercise:<6} {m.where():<30} {m.op:<20} {m.change(90)}")
        return 0
    try:
        return run(args)
    except KeyboardInterrupt:
        print("\ninterrupted: the temporary copies are removed, the working files untouched",
              file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
