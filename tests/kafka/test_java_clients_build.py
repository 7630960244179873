"""The Java client programs of the differential suite (tests/java) compile against Kafka's jars, once per change
of their sources, and a javac error fails loudly with javac's output (tests/helpers/java_clients.py)."""

from __future__ import annotations

import pytest

from tests.helpers import java_clients

PROGRAM = """package probe;

public final class Probe {
    public static void main(String[] args) {
        System.out.println(org.apache.kafka.common.Uuid.randomUuid() + "%s");
    }
}
"""


def test_the_programs_compile_once_against_kafkas_jars() -> None:
    out = java_clients.classes()
    assert (out / "shoal" / "javaclients" / "Main.class").is_file()
    stamp = (out / ".complete").stat().st_mtime_ns
    assert java_clients.classes() == out  # unchanged sources: the same build, not compiled again
    assert (out / ".complete").stat().st_mtime_ns == stamp


def test_a_changed_source_is_compiled_again_and_old_builds_removed(tmp_path) -> None:
    source = tmp_path / "src" / "probe" / "Probe.java"
    source.parent.mkdir(parents=True)
    source.write_text(PROGRAM % "")
    first = java_clients.classes(tmp_path / "src", tmp_path / "build")
    assert (first / "probe" / "Probe.class").is_file()
    source.write_text(PROGRAM % "!")
    second = java_clients.classes(tmp_path / "src", tmp_path / "build")
    assert second != first and (second / "probe" / "Probe.class").is_file()
    assert first.exists()  # recent: it may be another checkout's
    source.write_text(PROGRAM % "?")
    third = java_clients.classes(tmp_path / "src", tmp_path / "build", keep_s=0)
    assert (third / "probe" / "Probe.class").is_file() and not first.exists() and not second.exists()


def test_a_javac_error_fails_with_javacs_output(tmp_path) -> None:
    source = tmp_path / "src" / "probe" / "Probe.java"
    source.parent.mkdir(parents=True)
    source.write_text(PROGRAM.replace("randomUuid()", "noSuchMethod()") % "")
    with pytest.raises(java_clients.JavaBuildError, match=r"cannot find symbol[\s\S]*noSuchMethod"):
        java_clients.classes(tmp_path / "src", tmp_path / "build")
    assert [p.name for p in (tmp_path / "build").iterdir()] == [".lock"]  # no half-made build left
