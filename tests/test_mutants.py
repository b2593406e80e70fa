# SPDX-License-Identifier: MIT
"""Unit tests of tools/mutants.py: each operator plants the bug it is named after, only in code
inside a @solution region, never in a comment or a @stub line, and keeps every line number.
They build nothing (the CTest tests mutants/sample/* run real mutants)."""
import re
import sys
import tempfile
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import mutants  # noqa: E402

SOURCE = """\
__global__ void k(const float *a, float *b, int n, int width, int height, size_t pitch)
{
    for (int i = 0; i < n; i++) b[i] = 0;   // outside any region: never mutated
    // @solution 99.1: everything a kernel can get wrong (~8 lines)
    __shared__ float tile[TILE][TILE + 1];
    int i = blockIdx.x * blockDim.x + threadIdx.x;   /* i < n in a comment stays */
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < n && row >= height)
        b[row * width + i] = tile[threadIdx.y][threadIdx.x] + a[row * pitch / 4 + i];
    __syncthreads();
    float v = i > 3 ? 1.0f : 2.0f;
    // @stub if (i < n) return;
    // @end
}

extern "C" int host(float *h, float *d, size_t n, cudaStream_t s, size_t dpitch, size_t w)
{
    int status = 0; cudaError_t e;
    // @solution 99.2: the host side (~12 lines)
    CUDA_CHECK(cudaMemcpyAsync(d, h, n * sizeof(float), cudaMemcpyHostToDevice, s));
    k<<<1, 32, 0, s>>>(d, d, n, 1, 1, 4);
    CUDA_CHECK(cudaMemcpy2D(d, dpitch, h, w, w, 4,
                            cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaStreamSynchronize(
        s));
    e = cudaDeviceSynchronize();
    if (e != cudaSuccess)
        cudaFree(d);
cleanup:
    cudaFree(d);
    return status;
    // @end
}
"""


def mutants_of(text=SOURCE):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "99_test" / "test.cu"
        path.parent.mkdir()
        path.write_text(text)
        return mutants.file_mutants(path, text, "99_test")


class Operators(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.all = mutants_of()
        cls.lines = SOURCE.splitlines()

    def find(self, op, after):
        hits = [m for m in self.all if m.op == op and m.after == after]
        self.assertEqual(len(hits), 1, f"{op} -> {after!r}: got "
                         + repr([(m.op, m.after) for m in self.all if m.op == op]))
        return hits[0]

    def test_each_operator_plants_its_bug(self):
        self.find("pad-removed", "__shared__ float tile[TILE][TILE];")
        self.find("index-threadIdx-only", "int i = threadIdx.x;   /* i < n in a comment stays */")
        self.find("index-threadIdx-only", "int row = threadIdx.y;")
        self.find("guard-off-by-one", "if (i <= n && row >= height)")
        self.find("guard-off-by-one", "if (i < n && row > height)")
        self.find("guard-off-by-one", "float v = i >= 3 ? 1.0f : 2.0f;")
        self.find("xy-swapped", "b[i * width + row] = tile[threadIdx.y][threadIdx.x] "
                                "+ a[row * pitch / 4 + i];")
        self.find("xy-swapped", "b[row * width + i] = tile[threadIdx.x][threadIdx.y] "
                                "+ a[row * pitch / 4 + i];")
        self.find("pitch-as-width", "b[row * width + i] = tile[threadIdx.y][threadIdx.x] "
                                    "+ a[row * width / 4 + i];")
        self.find("delete-syncthreads", "")
        self.find("sizeof-missing", "CUDA_CHECK(cudaMemcpyAsync(d, h, n, "
                                    "cudaMemcpyHostToDevice, s));")
        self.find("copy-direction", "CUDA_CHECK(cudaMemcpyAsync(d, h, n * sizeof(float), "
                                    "cudaMemcpyDeviceToHost, s));")
        self.find("default-stream", "CUDA_CHECK(cudaMemcpyAsync(d, h, n * sizeof(float), "
                                    "cudaMemcpyHostToDevice, 0));")
        self.find("default-stream", "k<<<1, 32, 0, 0>>>(d, d, n, 1, 1, 4);")
        self.find("pitch-as-width", "CUDA_CHECK(cudaMemcpy2D(d, w, h, w, w, 4,")
        self.find("delete-sync", "")
        self.find("free-on-success-only", "if (status == 0) cudaFree(d);")

    def test_the_2d_built_ins_swap_together(self):
        m = [m for m in self.all if m.op == "xy-swapped" and "blockIdx.y * blockDim.y" in m.after]
        self.assertEqual(len(m), 1)
        self.assertIn("int row = blockIdx.x * blockDim.x + threadIdx.x;", m[0].after)
        self.assertIn("tile[threadIdx.x][threadIdx.y]", m[0].after)

    def test_frees_on_an_error_path_and_in_cleanup_are_each_deleted(self):
        frees = [m for m in self.all if m.op == "delete-free"]
        self.assertEqual(sorted(m.line for m in frees), [28, 30])
        for m in frees:   # `if (e != cudaSuccess) ;` still compiles
            self.assertEqual(m.text.splitlines()[m.line - 1].strip(), ";")

    def test_a_multi_line_statement_is_deleted_and_later_lines_keep_their_numbers(self):
        m = self.find("delete-sync", "")
        self.assertEqual((m.line, m.before), (24, "CUDA_CHECK(cudaStreamSynchronize( s));"))
        self.assertEqual(m.text.splitlines()[23:25], ["    ;", ""])
        for m in self.all:
            self.assertEqual(len(m.text.splitlines()), len(self.lines), m)
            self.assertEqual(m.text.splitlines()[-3:], self.lines[-3:], m)

    def test_only_region_code_changes(self):
        region_lines = set(range(5, 12)) | set(range(20, 32))
        for m in self.all:
            new = m.text.splitlines()
            changed = {n + 1 for n, (a, b) in enumerate(zip(self.lines, new)) if a != b}
            self.assertTrue(changed and changed <= region_lines, (m.op, m.line, changed))
            self.assertIn("/* i < n in a comment stays */", m.text)
            self.assertIn("// @stub if (i < n) return;", m.text)
            self.assertIn("for (int i = 0; i < n; i++) b[i] = 0;", m.text)

    def test_a_call_inside_an_expression_is_not_deleted(self):
        self.assertFalse([m for m in self.all if "e = cudaDeviceSynchronize();" in m.before])

    def test_a_dereferenced_pitch_is_mutated_once_and_compiles(self):
        src = ("void f(float *d, size_t *pitch, size_t width)\n{\n"
               "    // @solution 99.3: one pitched copy (~1 line)\n"
               "    CUDA_CHECK(cudaMemcpy2D(d, *pitch, d, width, width, 2, "
               "cudaMemcpyDeviceToDevice));\n"
               "    // @end\n}\n")
        self.assertEqual([m.after for m in mutants_of(src) if m.op == "pitch-as-width"],
                         ["CUDA_CHECK(cudaMemcpy2D(d, width, d, width, width, 2, "
                          "cudaMemcpyDeviceToDevice));"])

    def test_ids_are_unique_and_stable(self):
        ids = [m.id for m in self.all]
        self.assertEqual(len(ids), len(set(ids)))
        self.assertTrue(all(re.fullmatch(r"[0-9a-f]{8}", i) for i in ids))
        self.assertEqual(ids, [m.id for m in mutants_of()])
        # an edit elsewhere in the file leaves the other mutants' ids alone
        moved = mutants_of(SOURCE.replace("int status = 0;", "int status = 0;  /* moved */"))
        self.assertEqual(set(ids), {m.id for m in moved})

    def test_the_change_is_shown_on_one_line(self):
        m = self.find("guard-off-by-one", "if (i <= n && row >= height)")
        self.assertEqual(m.change(), "if (i < n && row >= height)  ->  if (i <= n && row >= height)")
        self.assertLessEqual(len(m.change(30)), 30)
        self.assertIn("(deleted)", self.find("delete-sync", "").change())


class Declarations(unittest.TestCase):
    def test_a_declaration_needs_an_id_and_a_reason(self):
        with tempfile.TemporaryDirectory() as tmp:
            chapter = Path(tmp) / "99_test"
            chapter.mkdir()
            (chapter / mutants.DECLARATIONS).write_text(
                "# comment\n\nabcdef01 both branches of the ?: give the same value there\n"
                "abcdef02\nnot-an-id because\n")
            old = mutants.REPO
            mutants.REPO = Path(tmp).parent
            try:
                (Path(tmp) / "solutions").mkdir()
                (Path(tmp) / "solutions" / "99_test").symlink_to(chapter)
                mutants.REPO = Path(tmp)
                problems = []
                declared = mutants.read_declarations("99_test", problems)
            finally:
                mutants.REPO = old
        self.assertEqual(list(declared), ["abcdef01"])
        self.assertEqual(len(problems), 2)

    def test_a_planted_bug_keeps_line_numbers_and_names_its_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            chapter = Path(tmp) / "solutions" / "99_test"
            chapter.mkdir(parents=True)
            (chapter / "test.cu").write_text(SOURCE)
            (chapter / mutants.DECLARATIONS).write_text(
                "abcdef01 an equivalent one\n"
                "plant 99.2 test.cu `    e = cudaDeviceSynchronize();\\n    if (e` -> "
                "`    if (e\\n    e = cudaDeviceSynchronize(); if (e` names `    if (e\\n` "
                "two calls swapped\n"
                "plant 99.1 test.cu `i > 3` -> `i > 4` names `float v` off by one\n"
                "plant 99.1 test.cu `i < n` -> `i <= n` occurs several times\n"
                "plant 99.1 test.cu `nowhere` -> `x` not in the file\n"
                "plant 99.1 test.cu no backquotes\n")
            old = mutants.REPO
            mutants.REPO = Path(tmp)
            try:
                problems = []
                declared = mutants.read_declarations("99_test", problems)
                planted = mutants.read_plants("99_test", problems)
            finally:
                mutants.REPO = old
        self.assertEqual(list(declared), ["abcdef01"])
        self.assertEqual(len(problems), 4, problems)   # the swap's names: no one line holds it
        (m,) = planted
        self.assertEqual((m.op, m.exercise, m.why), ("planted", "99.1", "off by one"))
        line = SOURCE.splitlines().index("    float v = i > 3 ? 1.0f : 2.0f;") + 1
        self.assertEqual((m.line, m.names), (line, f"test.cu:{line}"))
        self.assertEqual(len(m.text.splitlines()), len(SOURCE.splitlines()))
        self.assertIn("i > 4 ?", m.text)

    def test_sync_and_stream_mutants_are_never_equivalent(self):
        self.assertLessEqual({"delete-syncthreads", "delete-sync", "default-stream"},
                             mutants.NEVER_EQUIVALENT)


class ThreadOrders(unittest.TestCase):
    def test_the_orders_are_those_the_solutions_are_tested_in(self):
        orders = mutants.thread_orders()
        self.assertIn("forward", orders)
        text = (REPO / "tests" / "CMakeLists.txt").read_text()
        for order in orders:
            self.assertIn(f"CUEMU_ORDER={order}", text)


if __name__ == "__main__":
    unittest.main()


class NamesLine(unittest.TestCase):
    """A planted bug is killed only by a message that names its line: the line itself, or a
    watchdog's range of sampled lines that holds it or starts just below (a loop's body)."""

    def test_the_line_or_a_range_around_it(self):
        self.assertTrue(mutants.names_line("at k.cu:251: stuck", "k.cu:251"))
        self.assertTrue(mutants.names_line("loops at k.cu:250-253", "k.cu:251"))
        self.assertTrue(mutants.names_line("loops at k.cu:252-253", "k.cu:251"))

    def test_another_line_or_file_does_not(self):
        self.assertFalse(mutants.names_line("at k.cu:270: cudaErrorLaunchTimeout", "k.cu:251"))
        self.assertFalse(mutants.names_line("loops at k.cu:253-255", "k.cu:251"))
        self.assertFalse(mutants.names_line("loops at j.cu:250-253", "k.cu:251"))
        self.assertFalse(mutants.names_line("at k.cu:2511", "k.cu:251"))
