#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Classroom 50 autograder for this course (upload it as the assignment's autograder.py).

Classroom 50's runner runs it in the student's checkout of the handout, with CLASSROOM,
ASSIGNMENT, SUBMISSION_TAG, COMMIT_URL, RELEASE_URL (and REVIEW_URL) set; it reads result.json
(schema classroom50/result/v1) from there. This grades the checkout on the CPU emulator with
`make grade` and writes that file. It runs in a repository the student controls, so its score
is feedback: the grade that counts comes from `make grade-all` on your own tree (see
docs/instructor.md). CH=NN in the environment picks the assignment's chapter (default: all).
"""
import os
import subprocess
import sys

result = os.path.join(os.getcwd(), "result.json")
cmd = ["make", "--no-print-directory", "grade", "BACKEND=cpu", f"PLATFORM=classroom50={result}"]
if os.environ.get("CH"):
    cmd.append(f"CH={os.environ['CH']}")
subprocess.run(cmd)
# a failing grade is not the runner's failure; a missing result.json is
sys.exit(0 if os.path.exists(result) else 1)
