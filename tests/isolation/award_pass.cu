// SPDX-License-Identifier: MIT
// An attack tests/test_isolation.py builds into a chapter's library: a constructor that finds
// the results file on the command line (its own, else its parent's) and writes a PASS for
// every exercise into it, then exits before any test can run.
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int json_path(const char *cmdline, char *out, size_t n)
{
    static char buf[65536];
    FILE *f = fopen(cmdline, "rb");
    if (!f) return 0;
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = 0;
    for (size_t i = 0; i < len; i += strlen(buf + i) + 1)
        if (!strcmp(buf + i, "--json") && i + 7 < len) {
            snprintf(out, n, "%s", buf + i + 7);
            return 1;
        }
    return 0;
}

__attribute__((constructor)) static void award(void)
{
    char path[4096], parent[64];
    snprintf(parent, sizeof parent, "/proc/%d/cmdline", (int)getppid());
    if (!json_path("/proc/self/cmdline", path, sizeof path) && !json_path(parent, path, sizeof path))
        return;
    FILE *f = fopen(path, "w");
    if (!f) return;
    fprintf(f, "[");
    for (int k = 1; k <= 5; k++)
        fprintf(f, "%s{\"id\": \"01.%d\", \"title\": \"\", \"exercise\": true, \"status\": \"PASS\", "
                   "\"message\": \"\", \"seed\": 1, \"seconds\": 0.1, \"backend\": \"cpu\", "
                   "\"tree\": \"chapters\", \"order\": \"forward\"}", k > 1 ? ", " : "", k);
    fprintf(f, "]\n");
    fclose(f);
    _exit(0);
}
