# SPDX-License-Identifier: MIT
"""The report formats tools/grade.py writes from one submission's score (score.json's dict).

- feedback(): what the student reads (feedback.txt);
- gradescope(): Gradescope's results.json (score, execution_time, output, tests[] with name,
  score, max_score, status, output, visibility);
- prairielearn(): PrairieLearn's external grading results.json (gradable, score in 0..1,
  message, output, tests[] with name, description, points, max_points, message, output);
- classroom50(): Classroom 50's result.json (schema classroom50/result/v1: classroom,
  assignment, submission, commit, release, review, datetime, score, max-score, tests[] with
  test-name, passed, score, max-score; the runner adds owner and assignment_type);
- junit_xml(): JUnit XML valid against the JUnit schema (one testsuite with name, tests,
  failures, errors, time, timestamp, hostname and properties; testcase name, classname, time).

Hidden tests reach students only as the instructor allows, per test (visibility, the values
Gradescope uses): "visible"; "after_due_date" (shown once the deadline has passed);
"after_published" (Gradescope: once grades are published; elsewhere as after_due_date);
"hidden" (never: its name is withheld too, only its points count).
Python standard library only.
"""
import datetime
import re
import socket
import xml.etree.ElementTree as ET

VISIBILITIES = ("visible", "after_due_date", "after_published", "hidden")
# the harness's statuses (issue 20 adds NOT BUILT and CRASH rows)
MARK = {"PASS": "pass", "FAIL": "FAIL", "NOT DONE": "todo", "ERROR": "ERROR", "SKIP": "skip",
        "NOT BUILT": "FAIL", "CRASH": "FAIL"}
# ANSI escape sequences (colours, cursor moves; ESC or its one-character C1 forms, U+009B CSI
# and U+009D OSC, which a terminal obeys too), then every control character but tab and newline:
# C0, DEL, C1, what XML 1.0 cannot hold, and the bidirectional overrides and isolates that make
# a line read differently from what it holds
_ANSI = re.compile("(?:\x1b\\[|\x9b)[0-?]*[ -/]*[@-~]|(?:\x1b\\]|\x9d)[^\x07\x1b\x9c]*"
                   "(?:\x07|\x1b\\\\|\x9c)?|\x1b[@-Z\\\\-_]")
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e"
                      "\u2066-\u2069\ufffe\uffff\ud800-\udfff]")


def clean(text):
    """Text any report can carry: no ANSI escapes, no control characters but tab and newline
    (a CR ends a line: it could otherwise overwrite one on a terminal)."""
    text = str(text or "").replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROL.sub("", _ANSI.sub("", text))


def clean_all(value):
    """value (a score dict, say) with every string in it, keys too, clean()ed: what reaches a
    report is then clean whichever field it came from (a message, a note, a file name)."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, dict):
        return {clean_all(k): clean_all(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_all(v) for v in value]
    return value


# what a spreadsheet takes for the start of a formula (=, +, -, @) or of a cell split (tab, CR)
_FORMULA = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")


def cell(value):
    """A gradebook cell a spreadsheet shows as text: numbers as they are, a string that starts
    like a formula behind an apostrophe (the usual defence against CSV formula injection), and
    clean() of control characters (a line end inside a cell is a space)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    text = clean(value).replace("\n", " ").replace("\t", " ")
    # (after blanks too: a spreadsheet may drop them and then read a formula)
    return "'" + text if text.lstrip().startswith(_FORMULA) else text


def shown(test, result):
    """Whether a student sees this test's message now (its visibility, and the deadline)."""
    vis = test.get("visibility", "visible")
    if vis == "visible":
        return True
    if vis == "hidden":
        return False
    return bool(result.get("past_deadline"))


def display_name(test):
    if test.get("visibility") == "hidden":
        return f"{test['exercise']}+hidden"
    return f"{test['id']} {test['title']}".strip()


def student_message(test, result):
    if test["status"] == "PASS" and not test.get("perf"):   # a performance test: its figure
        return ""
    if not shown(test, result):
        return ("(the output of this hidden test is shown after the deadline)"
                if test.get("visibility") in ("after_due_date", "after_published")
                else "")
    return test.get("message", "")


def summary_line(result):
    return (f"{result['student']}: {result['score']} of {result['max_score']} points "
            f"(chapters {', '.join(result['chapters'])}; {result['backend']} backend; "
            f"seed {result['seed']}; graded {result['graded']})")


def feedback(result):
    lines = [summary_line(result), ""]
    lines += [f"note: {n}" for n in result["notes"]]
    if result["notes"]:
        lines.append("")
    for t in result["tests"]:
        hidden = "  (hidden test)" if t["hidden"] else ""
        name = (f"{t['id']:<12}" if t.get("visibility") != "hidden" else f"{display_name(t):<12}")
        title = t["title"] if t.get("visibility") != "hidden" else ""
        lines.append(f"{name} {t['score']:>3}/{t['max']:<3} "
                     f"{MARK.get(t['status'], t['status']):<5} {title}{hidden}")
        msg = student_message(t, result)
        if msg:
            lines += ["      " + m for m in msg.splitlines()]
    return "\n".join(lines) + "\n"


def overall_output(result):
    text = f"{result['score']} of {result['max_score']} points"
    return "; ".join([text] + result["notes"])


def gradescope(result):
    """Gradescope's results.json. Gradescope applies each test's visibility itself."""
    tests = []
    for t in result["tests"]:
        entry = {"name": display_name(t), "score": t["score"], "max_score": t["max"],
                 "status": "passed" if t["status"] == "PASS" else "failed",
                 "output": "" if t["status"] == "PASS" and not t.get("perf")
                 else t.get("message", ""),
                 "visibility": t.get("visibility", "visible")}
        if t.get("visibility") != "hidden":
            entry["number"] = t["id"]
        tests.append(entry)
    return {"score": result["score"], "execution_time": round(result["seconds"]),
            "output": overall_output(result), "stdout_visibility": "hidden", "tests": tests}


def prairielearn(result):
    """PrairieLearn's results.json: it shows everything at once, so visibility is applied
    here."""
    tests = []
    for t in result["tests"]:
        tests.append({"name": display_name(t), "description": "" if t.get(
                          "visibility") == "hidden" else t["title"],
                      "points": t["score"], "max_points": t["max"],
                      "message": MARK.get(t["status"], t["status"]),
                      "output": student_message(t, result)})
    return {"gradable": True,
            "score": round(result["score"] / result["max_score"], 6) if result["max_score"]
            else 0.0,
            "message": overall_output(result), "output": feedback(result), "tests": tests}


def classroom50(result, env):
    """Classroom 50's result.json, from the runner's environment (CLASSROOM, ASSIGNMENT,
    SUBMISSION_TAG, COMMIT_URL, RELEASE_URL, REVIEW_URL)."""
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    commit = env.get("COMMIT_URL", "")
    return {"schema": "classroom50/result/v1", "classroom": env.get("CLASSROOM", ""),
            "assignment": env.get("ASSIGNMENT", ""),
            "submission": env.get("SUBMISSION_TAG", ""), "commit": commit,
            "release": env.get("RELEASE_URL", ""), "review": env.get("REVIEW_URL") or commit,
            "datetime": now, "score": int(result["score"]),
            "max-score": int(result["max_score"]),
            "tests": [{"test-name": display_name(t), "passed": t["status"] == "PASS",
                       "score": int(t["score"]), "max-score": int(t["max"])}
                      for t in result["tests"]]}


def _not_graded(t):
    """A skip worth no points in this grade (a performance test on the cpu backend, counted in
    neither the score nor the maximum): JUnit's <skipped>, where any other skip, which costs
    its points, is a <failure>."""
    return t["status"] == "SKIP" and not t.get("max")


def junit_xml(result):
    """JUnit XML: one <testsuite> as the JUnit schema has it (timestamp without a time zone:
    UTC), points in <properties> (the schema has no points attribute)."""
    graded = datetime.datetime.fromisoformat(result["graded"]).astimezone(datetime.timezone.utc)
    tests = result["tests"]
    errors = sum(t["status"] == "ERROR" for t in tests)
    suite = ET.Element("testsuite", name=clean(f"grade {result['student']}"),
                       tests=str(len(tests)), failures=str(sum(
                           t["status"] not in ("PASS", "ERROR") and not _not_graded(t)
                           for t in tests)),
                       errors=str(errors), time=f"{result['seconds']:.3f}",
                       timestamp=graded.strftime("%Y-%m-%dT%H:%M:%S"),
                       hostname=socket.gethostname() or "localhost")
    props = ET.SubElement(suite, "properties")
    for key, value in (("score", result["score"]), ("max_score", result["max_score"]),
                       ("backend", result["backend"]), ("seed", result["seed"]),
                       ("sandbox", result.get("sandbox", ""))):
        ET.SubElement(props, "property", name=key, value=clean(str(value)))
    for t in tests:
        ET.SubElement(props, "property", name=f"points {t['id']}",
                      value=f"{t['score']}/{t['max']}")
    for t in tests:
        case = ET.SubElement(suite, "testcase", classname=t["chapter"],
                             name=clean(f"{t['id']} {t['title']}".strip()),
                             time=f"{t.get('seconds', 0.0):.3f}")
        if _not_graded(t):   # no points to lose here: not a failure
            ET.SubElement(case, "skipped", message=(clean(t.get("message", "")) or
                                                    "SKIP").splitlines()[0][:500])
        elif t["status"] != "PASS":
            msg = clean(t.get("message", "")) or t["status"]
            kind = "error" if t["status"] == "ERROR" else "failure"
            fail = ET.SubElement(case, kind, message=msg.splitlines()[0][:500], type=t["status"])
            fail.text = msg
    ET.SubElement(suite, "system-out").text = ""
    ET.SubElement(suite, "system-err").text = ""
    ET.indent(suite)
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"
