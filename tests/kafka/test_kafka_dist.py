"""The Kafka installation `make kafka` made: every tool of the table is a main class of the installed jars."""

from __future__ import annotations

import re
import subprocess
import zipfile

import pytest

from tests.helpers import kafka_dist


@pytest.fixture(scope="module")
def classes() -> set[str]:
    try:
        lib = kafka_dist.lib_dir()
    except kafka_dist.KafkaNotInstalled as exc:
        pytest.fail(str(exc), pytrace=False)
    names: set[str] = set()
    for jar in lib.glob("*.jar"):
        with zipfile.ZipFile(jar) as archive:
            names.update(n[:-6].replace("/", ".") for n in archive.namelist() if n.endswith(".class"))
    return names


def test_the_pinned_version_is_installed() -> None:
    lib = kafka_dist.lib_dir()
    version = kafka_dist.kafka_version()
    assert version == "4.4.0"
    for artifact in ("kafka_2.13", "kafka-tools", "kafka-clients", "kafka-streams", "kafka-storage",
                     "kafka-server", "kafka-share-coordinator"):
        assert (lib / f"{artifact}-{version}.jar").is_file(), artifact
    assert list(lib.glob("log4j-core-*.jar")) and list(lib.glob("log4j-slf4j-impl-*.jar"))


def test_every_tool_is_a_main_class_of_the_jars(classes: set[str]) -> None:
    missing = {tool: cls for tool, cls in kafka_dist.TOOLS.items() if cls not in classes}
    assert not missing, f"not in the installed jars: {missing}"
    # javap (the JDK's class-file reader) shows each one declares `public static void main(String[])`.
    done = subprocess.run(["javap", "-cp", kafka_dist.classpath(), "-public", *kafka_dist.TOOLS.values()],
                          capture_output=True, text=True, timeout=120, check=True)
    declared = {m.group(1) for m in re.finditer(r"^(?:public )?(?:final )?(?:abstract )?class (\S+)",
                                                done.stdout, re.MULTILINE)}
    assert declared == set(kafka_dist.TOOLS.values())
    text = re.sub(r"^Compiled from .*\n", "", done.stdout, flags=re.MULTILINE)
    blocks = re.split(r"^(?=(?:public )?(?:final )?(?:abstract )?class )", text, flags=re.MULTILINE)
    without_main = [block.splitlines()[0] for block in blocks if block.strip()
                    and "public static void main(java.lang.String[])" not in block
                    and "public static void main(java.lang.String...)" not in block]
    assert not without_main, without_main


def test_a_tool_runs_by_its_main_class() -> None:
    done = kafka_dist.run_tool("kafka-topics", ["--version"])
    assert done.stdout.startswith(kafka_dist.kafka_version()), done.stdout
