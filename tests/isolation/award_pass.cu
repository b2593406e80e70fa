// SPDX-License-Identifier: MIT
// An attack tests/test_isolation.py builds into a chapter's library: a constructor that finds
// the results file on the command line (its own, else an ancestor's) and writes a PASS for
// every exercise into it, then exits before any test can run.
#include <errno.h>
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

static int parent_of(int pid)
{
    char stat[64], buf[512];
    snprintf(stat, sizeof stat, "/proc/%d/stat", pid);
    FILE *f = fopen(stat, "r");
    if (!f) return 0;
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = 0;
    const char *end = strrchr(buf, ')');
    int ppid = 0;
    return end && sscanf(end + 1, " %*c %d", &ppid) == 1 ? ppid : 0;
}

__attribute__((constructor)) static void award(void)
{
    char path[4096], cmdline[64];
    int found = json_path("/proc/self/cmdline", path, sizeof path);
    for (int pid = (int)getppid(), up = 0; !found && pid > 1 && up < 4; pid = parent_of(pid), up++) {
        snprintf(cmdline, sizeof cmdline, "/proc/%d/cmdline", pid);
        found = json_path(cmdline, path, sizeof path);
    }
    if (!found) return;
    FILE *f = fopen(path, "w");
    if (!f) {
        perror("attack: cannot write the results file");
        return;
    }
    fprintf(f, "[");
    for (int k = 1; k <= 5; k++)
        fprintf(f, "%s{\"id\": \"01.%d\", \"title\": \"\", \"exercise\": true, \"status\": \"PASS\", "
                   "\"message\": \"\", \"seed\": 1, \"seconds\": 0.1, \"backend\": \"cpu\", "
                   "\"tree\": \"chapters\", \"order\": \"forward\"}", k > 1 ? ", " : "", k);
    fprintf(f, "]\n");
    fclose(f);
    _exit(0);
}
