"""JUnit XML for a zoo check: one testsuite, one testcase per model x backend.

classname is the model's path, name the backend. A MISMATCH is a <failure> carrying the report's
result lines for that backend; a backend ERROR, a model that crashed or ended with exit 2 is an
<error> with its one line (a model without a report gets one such testcase per requested
backend); an UNAVAILABLE backend is <skipped> with the reason. A PARTIAL backend (it ran only part
of the model) is <skipped> with the nodes it did not run (a <failure> under --fail-on-partial), and
every testcase has a `status` property (ok, partial, mismatch, error). CI systems (GitLab, Jenkins,
GitHub test reporters) read this format as it is.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET

from onnx_dml_lowering.ir.display import xml_text

from .model_check import ModelResult, backend_lines

SUITE = "dml-lower check"


def junit_tree(results: "list[ModelResult]", backends: "list[str]", seconds: float) -> ET.ElementTree:
    suite = ET.Element("testsuite", name=SUITE)
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}

    def case(model: str, backend: str, time: float, status: "str | None" = None) -> ET.Element:
        counts["tests"] += 1
        testcase = ET.SubElement(suite, "testcase", classname=model, name=backend, time=f"{time:.3f}")
        if status is not None:
            properties = ET.SubElement(testcase, "properties")
            ET.SubElement(properties, "property", name="status", value=status)
        return testcase

    for result in results:
        report = result.report
        if report is None:
            for backend in backends:
                element = ET.SubElement(case(result.model, backend, result.seconds), "error",
                                        type=result.status, message=result.error or result.status)
                element.text = result.error or result.status
                counts["errors"] += 1
            continue
        for backend in report.get("backends", []):
            testcase = case(result.model, backend["backend"], backend.get("seconds") or 0.0, backend.get("status"))
            lines = "\n".join(backend_lines(report, backend))
            if backend.get("status") == "error":
                element = ET.SubElement(testcase, "error", type="ERROR", message=backend.get("error") or "ERROR")
                counts["errors"] += 1
            elif backend.get("status") == "mismatch":
                mismatches = sum(o.get("status") == "mismatch" for o in backend.get("outputs", []))
                element = ET.SubElement(testcase, "failure", type="MISMATCH",
                                        message=f"{mismatches} MISMATCH")
                counts["failures"] += 1
            elif backend.get("status") == "partial":
                message = next((line.split("PARTIAL: ", 1)[1] for line in lines.splitlines() if "] PARTIAL: " in line),
                               "PARTIAL")
                if report.get("fail_partial"):
                    element = ET.SubElement(testcase, "failure", type="PARTIAL", message=f"PARTIAL: {message}")
                    counts["failures"] += 1
                else:
                    ET.SubElement(testcase, "skipped", message=f"PARTIAL: {message}")
                    counts["skipped"] += 1
                    element = ET.SubElement(testcase, "system-out")
            else:
                element = ET.SubElement(testcase, "system-out")
            element.text = lines
        for backend, reason in report.get("unavailable_backends", {}).items():
            ET.SubElement(case(result.model, backend, 0.0), "skipped", message=f"UNAVAILABLE here: {reason}")
            counts["skipped"] += 1
    for key, value in counts.items():
        suite.set(key, str(value))
    suite.set("time", f"{seconds:.3f}")
    root = ET.Element("testsuites", {"name": SUITE, "time": f"{seconds:.3f}",
                                     **{key: str(value) for key, value in counts.items()}})
    root.append(suite)
    ET.indent(root)
    return ET.ElementTree(root)


def write_junit(path: str, results: "list[ModelResult]", backends: "list[str]", seconds: float) -> None:
    tree = junit_tree(results, backends, seconds)
    # Every attribute and text through xml_text: a name's control characters (NUL, ESC, ...) are not
    # XML 1.0 characters, and one of them makes CI parsers reject the whole report.
    for element in tree.iter():
        element.attrib.update({key: xml_text(value) for key, value in element.attrib.items()})
        if element.text:
            element.text = xml_text(element.text)
        if element.tail:
            element.tail = xml_text(element.tail)
    tree.write(path, encoding="utf-8", xml_declaration=True)
