// SPDX-License-Identifier: MIT
// Functions tests/test_isolation.py builds into a chapter's library to see how the checker
// takes a library that crashes, hangs, exits, or keeps writing shared memory after it returns.
#include <pthread.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

extern "C" int misbehave_crash(void) { raise(SIGSEGV); return 0; }
extern "C" int misbehave_exit(void) { exit(3); }
extern "C" int misbehave_hang(void) { for (;;) pause(); }
extern "C" int misbehave_flood(void)
{
    for (int i = 0; i < 100000; i++) puts("flood flood flood flood flood flood flood flood");
    return 0;
}

static volatile unsigned char *target;
static size_t target_n;
static time_t born;   // when the first writer started

// The writers below are the test's own attackers, so they end by themselves: after 60 s, or
// once orphaned to init (the checker that should have stopped them is gone). Without this, a
// test killed at its timeout left a chain forking forever, and a CI machine slowed to a crawl.
static int should_end(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (!born) born = t.tv_sec;
    return t.tv_sec - born > 60 || getppid() == 1;
}

static void *scribble(void *arg)
{
    (void)arg;
    for (unsigned char v = 1; !should_end(); v++) {
        for (size_t i = 0; i < target_n; i++) target[i] = v;
        usleep(1000);
    }
    return NULL;
}

// Until the writer has started (buf[0] was 0): then the test sees it stop, not never start.
static int started(void)
{
    for (int i = 0; i < 5000 && !target[0]; i++) usleep(1000);
    return target[0] ? 0 : -1;
}

// Returns once a thread it leaves behind keeps writing buf[0..n) (a checker's array).
extern "C" int misbehave_scribble(void *buf, size_t n)
{
    target = (volatile unsigned char *)buf;
    target_n = n;
    pthread_t t;
    if (pthread_create(&t, NULL, scribble, NULL) != 0) return -1;
    return started();
}

// The same from a child process in a session of its own (not in the worker's process group).
extern "C" int misbehave_scribble_elsewhere(void *buf, size_t n)
{
    pid_t pid = fork();
    if (pid < 0) return -1;
    target = (volatile unsigned char *)buf;
    target_n = n;
    if (pid == 0) {
        setsid();
        scribble(NULL);
        _exit(0);
    }
    return started();
}

// A chain of processes that do not stay: a child in a session of its own writes buf, forks its
// successor and exits, over and over, pausing pause_us between links.
static int scribble_chain(void *buf, size_t n, useconds_t pause_us)
{
    pid_t pid = fork();
    if (pid < 0) return -1;
    target = (volatile unsigned char *)buf;
    target_n = n;
    if (pid == 0) {
        setsid();
        for (unsigned char v = 1; !should_end(); v++) {
            for (size_t i = 0; i < target_n; i++) target[i] = v;
            if (pause_us) usleep(pause_us);
            pid_t next = fork();
            if (next > 0) _exit(0);     // the successor goes on; this one is gone
            if (next < 0) usleep(1000);
        }
        _exit(0);
    }
    return started();
}

// The same from processes that do not stay. A freeze that walks the worker's tree once, or
// ends at the first process gone, misses the one alive by then. (One every 20 ms: a chain much
// faster than the checker's walk of the tree could stay a step ahead.)
extern "C" int misbehave_scribble_escaping(void *buf, size_t n)
{
    return scribble_chain(buf, n, 20000);
}

// The same as fast as it can go: each process writes buf and forks its successor at once, no
// pause, so the chain moves on in far less time than a walk of the process tree takes. Only a
// signal to every process of its user at once (kill(-1) as that user) stops it; it ends by
// itself as the others do.
extern "C" int misbehave_scribble_racing(void *buf, size_t n)
{
    return scribble_chain(buf, n, 0);
}
