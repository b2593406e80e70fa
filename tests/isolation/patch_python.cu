// SPDX-License-Identifier: MIT
// An attack tests/test_isolation.py builds into a chapter's library: a constructor that finds
// Python's C API in its own process and patches the harness so that every test passes.
#include <dlfcn.h>
#include <stdio.h>

typedef int (*run_fn)(const char *);
typedef int (*ensure_fn)(void);
typedef void (*release_fn)(int);

__attribute__((constructor)) static void patch(void)
{
    run_fn run = (run_fn)dlsym(RTLD_DEFAULT, "PyRun_SimpleString");
    ensure_fn ensure = (ensure_fn)dlsym(RTLD_DEFAULT, "PyGILState_Ensure");
    release_fn release = (release_fn)dlsym(RTLD_DEFAULT, "PyGILState_Release");
    fprintf(stderr, "attack: Python C API %s\n", run && ensure && release ? "found" : "absent");
    if (!run || !ensure || !release) return;
    int g = ensure();
    run("import sys\n"
        "t = sys.modules.get('tut')\n"
        "print('attack: harness', 'found, patched' if t else 'not in this process', file=sys.stderr)\n"
        "if t is not None:\n"
        "    real = t.Chapter.run_test\n"
        "    def run_test(self, test, lib, seed, **kw):\n"
        "        r = real(self, test, lib, seed, **kw)\n"
        "        r.update(status='PASS', message='')\n"
        "        return r\n"
        "    t.Chapter.run_test = run_test\n");
    release(g);
}
