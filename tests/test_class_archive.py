"""Class-data archives of the verify sections' JVMs (``rollcheck.sections._class_archive``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rollcheck.sections import _class_archive as ca


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROLLCHECK_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ROLLCHECK_JVM_DEFAULTS", raising=False)
    monkeypatch.delenv("ROLLCHECK_CLASS_ARCHIVES", raising=False)
    for var in ("ROLLCHECK_TEST_OPTS", "JAVA_TOOL_OPTIONS"):  # restored after the test, whatever it set
        monkeypatch.setenv(var, "")
        monkeypatch.delenv(var)


def _kind(tmp_path: Path, train: object) -> ca.ArchiveKind:
    jar = tmp_path / "lib.jar"
    if not jar.exists():
        jar.write_bytes(b"jar")
    return ca.ArchiveKind("test", "ROLLCHECK_TEST_OPTS", lambda: "/usr/bin/java", lambda: [jar], train)  # type: ignore[arg-type]


def _writes(content: bytes, ok: bool) -> object:
    def train(opts: list[str], scratch: Path) -> bool:
        dump = next(o for o in opts if o.startswith("-XX:ArchiveClassesAtExit="))
        Path(dump.split("=", 1)[1]).write_bytes(content)
        assert scratch.is_dir()
        return ok

    return train


def test_made_once_then_used(tmp_path: Path) -> None:
    said: list[str] = []
    kind = _kind(tmp_path, _writes(b"archive", True))
    path = ca.use_class_archive(kind, said.append)
    assert path is not None and path.read_bytes() == b"archive"
    assert os.environ["ROLLCHECK_TEST_OPTS"].split() == [f"-XX:SharedArchiveFile={path}", *ca.ARCHIVE_LOGGING]
    assert "made" in said[0]

    def no_second_training(opts: list[str], scratch: Path) -> bool:
        raise AssertionError("trained twice")

    again = ca.use_class_archive(ca.ArchiveKind("test", "ROLLCHECK_TEST_OPTS", kind.java, kind.classpath,
                                                no_second_training), said.append)
    assert again == path
    assert os.environ["ROLLCHECK_TEST_OPTS"].count("SharedArchiveFile") == 1  # not added twice
    assert [p.name for p in path.parent.iterdir() if p.suffix == ".part"] == []


@pytest.mark.parametrize("content, ok", [(b"half", False), (b"", True)])
def test_failed_training_leaves_nothing(tmp_path: Path, content: bytes, ok: bool) -> None:
    said: list[str] = []
    assert ca.use_class_archive(_kind(tmp_path, _writes(content, ok)), said.append) is None
    folder = tmp_path / "cache" / "jvm-archives"
    assert sorted(p.suffix for p in folder.iterdir()) == [".lock"]  # no archive, no part file
    assert "ROLLCHECK_TEST_OPTS" not in os.environ
    assert "did not finish" in said[0] and "without one" in said[0]


def test_name_follows_the_class_path(tmp_path: Path) -> None:
    kind = _kind(tmp_path, _writes(b"a", True))
    before = ca.archive_path(kind)
    (tmp_path / "lib.jar").write_bytes(b"another jar")
    assert ca.archive_path(kind) != before


def test_switched_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROLLCHECK_CLASS_ARCHIVES", "0")
    assert ca.use_class_archive(_kind(tmp_path, _writes(b"a", True))) is None
    assert "ROLLCHECK_TEST_OPTS" not in os.environ
    assert not (tmp_path / "cache").exists()


def test_read_only_cache_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("ROLLCHECK_CACHE", str(blocker))
    said: list[str] = []
    assert ca.use_class_archive(_kind(tmp_path, _writes(b"a", True)), said.append) is None
    assert "no class-data archive" in said[0]


@pytest.mark.tlc
def test_a_real_jvm_dumps_and_maps_an_archive(tmp_path: Path) -> None:
    """The machinery with a real JVM (TLC's jar: the cheapest one at hand): the training run's
    JVM writes the archive as it exits, and a JVM mapping it gives the same model-checking result."""
    from rollcheck.tla.manifest import MODELS_DIR, load_manifest, run_entry
    from rollcheck.tla.runner import TLCUnavailable, find_jar, find_java

    try:
        jar, java = Path(find_jar()), find_java()
    except TLCUnavailable as e:
        pytest.skip(f"no TLC: {e}")
    entry = next(e for e in load_manifest() if e.name == "cl-aligned-acyclic-small")

    def train(opts: list[str], scratch: Path) -> bool:
        return ca._run_training([java, *opts, "-cp", str(jar), "tlc2.TLC", "-workers", "1", "-metadir",
                                 str(scratch / "meta"), "-config", str(MODELS_DIR / entry.config), entry.module],
                                MODELS_DIR, ca._training_environ())

    kind = ca.ArchiveKind("tlc-test", "JAVA_TOOL_OPTIONS", lambda: java, lambda: [jar], train)
    plain = run_entry(entry, workers=1, timeout=300).result
    path = ca.use_class_archive(kind, print)
    assert path is not None and path.stat().st_size > 1_000_000
    assert f"-XX:SharedArchiveFile={path}" in os.environ["JAVA_TOOL_OPTIONS"]
    mapped = run_entry(entry, workers=1, timeout=300).result
    assert (mapped.status, mapped.distinct_states, mapped.depth) == (plain.status, plain.distinct_states, plain.depth)
    assert plain.distinct_states > 0
